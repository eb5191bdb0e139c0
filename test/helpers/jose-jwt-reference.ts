// The oracle of the JWT verifier's differential tests: the access-token check
// as it was before the signature moved to node:crypto (2026-11-26), jose end
// to end — the same refused headers and algorithm list, then jose's jwtVerify
// with the same options (every matching key tried), and the same mapping of
// jose's errors to HTTP answers. What the gateway answers must not change
// except where the new verifier is stricter on purpose (see the test).
import { decodeProtectedHeader, errors, jwtVerify, type CryptoKey, type JWTPayload, type JWTVerifyGetKey, type JWTVerifyOptions } from 'jose';

export interface ReferenceChecks {
  issuer: string;
  audience: string;
  algorithms: readonly string[];
  clockSkewSeconds: number;
}

/** A token accepted (its claims), or refused (the HTTP answer the old verifier gave). */
export type ReferenceOutcome = { ok: true; claims: JWTPayload } | { ok: false; status: number; description: string };

const REFUSED_HEADERS = ['jku', 'x5u', 'jwk', 'x5c', 'crit'];

export async function joseReference(token: string, key: CryptoKey | JWTVerifyGetKey, checks: ReferenceChecks): Promise<ReferenceOutcome> {
  const refused = structureRefusal(token, checks.algorithms);
  if (refused !== undefined) return { ok: false, status: 401, description: refused };
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
    return { ok: false, status: 401, description: describe(err) };
  }
  if (typeof payload.sub !== 'string' || payload.sub === '') return { ok: false, status: 401, description: 'Token has no subject' };
  return { ok: true, claims: payload };
}

function structureRefusal(token: string, algorithms: readonly string[]): string | undefined {
  if (token.length > 16 * 1024) return 'Token too large';
  const parts = token.split('.').length;
  if (parts === 5) return 'Encrypted tokens are not accepted';
  if (parts !== 3) return 'Malformed token';
  let header: Record<string, unknown>;
  try {
    header = decodeProtectedHeader(token);
  } catch {
    return 'Malformed token header';
  }
  for (const name of REFUSED_HEADERS) {
    if (header[name] !== undefined) return `Token header "${name}" is not accepted`;
  }
  if (typeof header.alg !== 'string' || !algorithms.includes(header.alg)) return 'Token algorithm not allowed';
  return undefined;
}

async function verifyWithAnyKey(token: string, key: CryptoKey | JWTVerifyGetKey, options: JWTVerifyOptions): Promise<JWTPayload> {
  try {
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

function describe(err: unknown): string {
  if (err instanceof errors.JWTExpired) return 'Token expired';
  if (err instanceof errors.JWTClaimValidationFailed) return `Invalid or missing "${err.claim}" claim`;
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'Invalid token signature';
  if (err instanceof errors.JWKSNoMatchingKey) return 'No matching signing key';
  if (err instanceof errors.JOSEAlgNotAllowed) return 'Token algorithm not allowed';
  return 'Invalid token';
}
