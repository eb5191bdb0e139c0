// JWT access tokens (RFC 9068, RFC 8725): cheap structural checks before any
// key lookup or crypto (strict base64url and JSON, refused headers, a pinned
// list of asymmetric algorithms), the key from jose's key set, the signature
// with node:crypto (jws-signature.ts: synchronous, half WebCrypto's CPU), then
// exact issuer and exact audience (the route's canonical resource URI, RFC 8707)
// and the times, with jose's errors (jwt-claims-check.ts).
import { errors, type CompactJWSHeaderParameters, type CryptoKey, type JWTVerifyGetKey } from 'jose';
import { isAsymmetricJwsAlgorithm, type JwtAlgorithm } from '../config/jws-algorithms.js';
import type { JwtTokenConfig } from '../config/types.js';
import { GatewayError, invalidToken, temporarilyUnavailable } from '../errors/gateway-error.js';
import type { OnClaimMismatch } from './claim-mismatch.js';
import { clientIdFrom, scopesFrom } from './claims.js';
import { decodeBase64UrlStrict, decodeJsonSegment, splitCompactJws, type JwsSegments } from './compact-jws.js';
import { sha256Base64Url } from './hash.js';
import { JwksUnavailable } from './jwks.js';
import { jwsSignatureValid, UnusableKey, verificationKey } from './jws-signature.js';
import { checkRegisteredClaims } from './jwt-claims-check.js';
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
  return { verify: (token, _seenOn, tokenHash) => verifyJwt(token, keys, checks, tokenHash) };
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
  return { verify: async (token, _seenOn, tokenHash) => verifyJwt(token, options.getKeySet(), checks, tokenHash) };
}

function validChecks(checks: JwtChecks): JwtChecks {
  if (checks.algorithms.length === 0) throw new TypeError('At least one JWT algorithm must be allowed');
  for (const alg of checks.algorithms) {
    if (!isAsymmetricJwsAlgorithm(alg)) throw new TypeError(`JWT algorithm ${alg} is not allowed: only asymmetric signatures are accepted`);
  }
  return { ...checks, algorithms: [...checks.algorithms] };
}

async function verifyJwt(token: string, key: KeySource, checks: JwtChecks, tokenHash?: string): Promise<AuthContext> {
  const jws = checkStructure(token, checks.algorithms);
  let payload: Record<string, unknown>;
  try {
    await verifySignature(jws, key);
    payload = decodeJsonSegment(jws.segments.payload) ?? invalidPayload();
    checkRegisteredClaims(payload, { ...checks, now: Math.floor(Date.now() / 1000) });
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
    tokenHash: tokenHash ?? sha256Base64Url(token),
  };
}

function invalidPayload(): never {
  throw new errors.JWTInvalid('JWT Claims Set must be a top-level JSON object');
}

function reportMismatch(err: errors.JWTClaimValidationFailed, checks: JwtChecks): void {
  if (err.claim === 'aud' || err.claim === 'iss') {
    checks.onClaimMismatch?.({ claim: err.claim, expected: err.claim === 'aud' ? checks.audience : checks.issuer, received: err.payload[err.claim] });
  }
}

/** A token whose structure and header passed: what the signature check needs. */
interface CheckedJws {
  segments: JwsSegments;
  header: Record<string, unknown>;
  alg: JwtAlgorithm;
}

/** Refuses, before any key lookup, what must never reach crypto. Descriptions never echo the token. */
function checkStructure(token: string, algorithms: readonly string[]): CheckedJws {
  if (token.length > MAX_TOKEN_LENGTH) throw invalidToken('Token too large');
  const segments = splitCompactJws(token);
  if (segments === undefined) throw invalidToken(token.split('.').length === 5 ? 'Encrypted tokens are not accepted' : 'Malformed token');
  const header = decodeJsonSegment(segments.header);
  if (header === undefined) throw invalidToken('Malformed token header');
  for (const name of REFUSED_HEADERS) {
    if (header[name] !== undefined) throw invalidToken(`Token header "${name}" is not accepted`);
  }
  const { alg } = header;
  if (typeof alg !== 'string' || !algorithms.includes(alg) || !isAsymmetricJwsAlgorithm(alg)) throw invalidToken('Token algorithm not allowed');
  return { segments, header, alg };
}

/**
 * The signature, with the key the source names (jose selects it: `kid`, `alg`,
 * `use`, `kty`, `crv`; a JWKS refetches on an unknown `kid`). A JWKS may hold
 * several keys matching a kid-less header (rotation): each is tried.
 */
async function verifySignature(jws: CheckedJws, key: KeySource): Promise<void> {
  const signature = decodeBase64UrlStrict(jws.segments.signature);
  if (signature === undefined) throw invalidToken('Malformed token signature');
  const signingInput = `${jws.segments.header}.${jws.segments.payload}`;
  const candidates = await candidateKeys(jws, key);
  let last: unknown;
  for await (const candidate of candidates) {
    try {
      if (await jwsSignatureValid(jws.alg, verificationKey(candidate, jws.alg), signingInput, signature)) return;
      last = new errors.JWSSignatureVerificationFailed();
    } catch (err) {
      last = err;
    }
  }
  // Several keys matched and none could be imported: as jose answered.
  throw last ?? new errors.JWSInvalid('No usable key among the matching ones');
}

async function candidateKeys(jws: CheckedJws, key: KeySource): Promise<Iterable<CryptoKey> | AsyncIterable<CryptoKey>> {
  if (typeof key !== 'function') return [key];
  const { segments } = jws;
  try {
    const resolved = await key(jws.header as CompactJWSHeaderParameters, { protected: segments.header, payload: segments.payload, signature: segments.signature });
    if (!isCryptoKey(resolved)) throw new UnusableKey('The key source returned no CryptoKey');
    return [resolved];
  } catch (err) {
    if (!(err instanceof errors.JWKSMultipleMatchingKeys)) throw err;
    return err as AsyncIterable<CryptoKey>;
  }
}

function isCryptoKey(key: unknown): key is CryptoKey {
  return (key as { [Symbol.toStringTag]?: unknown } | null)?.[Symbol.toStringTag] === 'CryptoKey';
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
