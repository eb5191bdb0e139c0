// JWT access tokens (RFC 9068, RFC 8725): cheap structural checks before any
// key lookup or crypto, then jose with a pinned algorithm list, exact issuer
// and exact audience (the route's canonical resource URI, RFC 8707).
import { decodeProtectedHeader, errors, jwtVerify, type CryptoKey, type JWTPayload, type JWTVerifyGetKey, type JWTVerifyOptions } from 'jose';
import { isAsymmetricJwsAlgorithm } from '../config/jws-algorithms.js';
import type { JwtTokenConfig } from '../config/types.js';
import { GatewayError, invalidToken, temporarilyUnavailable } from '../errors/gateway-error.js';
import type { OnClaimMismatch } from './claim-mismatch.js';
import { clientIdFrom, scopesFrom } from './claims.js';
import { sha256Base64Url } from './hash.js';
import { JwksUnavailable } from './jwks.js';
import type { AuthContext } from './principal.js';
import type { TokenVerifier } from './verifier.js';

export const MAX_TOKEN_LENGTH = 16 * 1024;

/** Headers that point at, or carry, key material: the key must come from our configuration only. */
const REFUSED_HEADERS = ['jku', 'x5u', 'jwk', 'x5c', 'crit'] as const;

export interface JwtChecks {
  issuer: string;
  /** The route's resource URI, compared by exact string equality. */
  audience: string;
  algorithms: readonly string[];
  clockSkewSeconds: number;
  /** Told when a token's `aud` or `iss` is not the expected one (for the operator's log). */
  onClaimMismatch?: OnClaimMismatch;
}

type KeySource = CryptoKey | JWTVerifyGetKey;

/** Verifies tokens of an external issuer against its JWKS. */
export function createJwtVerifier(resource: string, config: JwtTokenConfig, keys: JWTVerifyGetKey, onClaimMismatch?: OnClaimMismatch): TokenVerifier {
  const { issuer, algorithms, clockSkewSeconds } = config;
  const checks = validChecks({ issuer, audience: resource, algorithms, clockSkewSeconds, onClaimMismatch });
  return { verify: (token) => verifyJwt(token, keys, checks) };
}

export interface LocalJwtVerifierOptions {
  issuer: string;
  audience: string;
  /** Called per verification, so a key rotation takes effect at once. */
  getKeySet: () => JWTVerifyGetKey | CryptoKey;
  algorithms: readonly string[];
  clockSkewSeconds?: number;
}

/** Verifies tokens of the gateway's own authorization server with its local key. */
export function createLocalJwtVerifier(options: LocalJwtVerifierOptions): TokenVerifier {
  const checks = validChecks({ ...options, clockSkewSeconds: options.clockSkewSeconds ?? 0 });
  return { verify: async (token) => verifyJwt(token, options.getKeySet(), checks) };
}

function validChecks(checks: JwtChecks): JwtChecks {
  if (checks.algorithms.length === 0) throw new TypeError('At least one JWT algorithm must be allowed');
  for (const alg of checks.algorithms) {
    if (!isAsymmetricJwsAlgorithm(alg)) throw new TypeError(`JWT algorithm ${alg} is not allowed: only asymmetric signatures are accepted`);
  }
  return { ...checks, algorithms: [...checks.algorithms] };
}

async function verifyJwt(token: string, key: KeySource, checks: JwtChecks): Promise<AuthContext> {
  checkStructure(token, checks.algorithms);
  const options: JWTVerifyOptions = {
    issuer: checks.issuer,
    audience: checks.audience,
    algorithms: [...checks.algorithms],
    clockTolerance: checks.clockSkewSeconds,
    requiredClaims: ['exp', 'iss', 'aud', 'sub'],
  };
  let payload: JWTPayload;
  try {
    payload = await verifyWithAnyKey(token, key, options);
  } catch (err) {
    if (err instanceof errors.JWTClaimValidationFailed) reportMismatch(err, checks);
    throw jwtRejection(err);
  }
  if (typeof payload.sub !== 'string' || payload.sub === '') throw invalidToken('Token has no subject');
  return {
    issuer: checks.issuer,
    subject: payload.sub,
    clientId: clientIdFrom(payload),
    scopes: scopesFrom(payload),
    expiresAt: payload.exp as number,
    claims: payload,
    token,
    tokenHash: sha256Base64Url(token),
  };
}

function reportMismatch(err: errors.JWTClaimValidationFailed, checks: JwtChecks): void {
  if (err.claim === 'aud' || err.claim === 'iss') {
    checks.onClaimMismatch?.({ claim: err.claim, expected: err.claim === 'aud' ? checks.audience : checks.issuer, received: err.payload[err.claim] });
  }
}

/** Refuses, before any key lookup, what must never reach crypto. Descriptions never echo the token. */
function checkStructure(token: string, algorithms: readonly string[]): void {
  if (token.length > MAX_TOKEN_LENGTH) throw invalidToken('Token too large');
  const parts = token.split('.').length;
  if (parts === 5) throw invalidToken('Encrypted tokens are not accepted');
  if (parts !== 3) throw invalidToken('Malformed token');
  let header: Record<string, unknown>;
  try {
    header = decodeProtectedHeader(token);
  } catch {
    throw invalidToken('Malformed token header');
  }
  for (const name of REFUSED_HEADERS) {
    if (header[name] !== undefined) throw invalidToken(`Token header "${name}" is not accepted`);
  }
  if (typeof header.alg !== 'string' || !algorithms.includes(header.alg)) throw invalidToken('Token algorithm not allowed');
}

/** A JWKS may hold several keys matching a kid-less header (rotation): try each, as jose's docs advise. */
async function verifyWithAnyKey(token: string, key: KeySource, options: JWTVerifyOptions): Promise<JWTPayload> {
  try {
    // Two calls only because jwtVerify's overloads do not accept the union.
    const { payload } = typeof key === 'function' ? await jwtVerify(token, key, options) : await jwtVerify(token, key, options);
    return payload;
  } catch (err) {
    if (!(err instanceof errors.JWKSMultipleMatchingKeys)) throw err;
    let last: unknown = err;
    for await (const candidate of err) {
      try {
        return (await jwtVerify(token, candidate, options)).payload;
      } catch (candidateError) {
        last = candidateError;
      }
    }
    throw last;
  }
}

/** What a failed jose verification means for the client: 503 when the keys are out of reach, else 401. */
function jwtRejection(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  if (err instanceof JwksUnavailable || err instanceof errors.JWKSTimeout || err instanceof errors.JWKSInvalid) {
    return temporarilyUnavailable('Token signing keys are unavailable', err);
  }
  if (err instanceof errors.JWTExpired) return invalidToken('Token expired', err);
  if (err instanceof errors.JWTClaimValidationFailed) return invalidToken(`Invalid or missing "${err.claim}" claim`, err);
  if (err instanceof errors.JWSSignatureVerificationFailed) return invalidToken('Invalid token signature', err);
  if (err instanceof errors.JWKSNoMatchingKey) return invalidToken('No matching signing key', err);
  if (err instanceof errors.JOSEAlgNotAllowed) return invalidToken('Token algorithm not allowed', err);
  return invalidToken('Invalid token', err);
}
