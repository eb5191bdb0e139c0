// The registered claims of an access token, checked in jose's order and with
// jose's errors (jwtVerify with `issuer`, `audience`, `clockTolerance` and
// `requiredClaims`), so the verifier answers as it did when jose checked them:
// presence, exact `iss`, `aud` naming the route (a string, or an array that
// holds it), numeric `iat`/`nbf`/`exp`, `nbf` not in the future and `exp` not
// past, both within the skew (RFC 7519 §4.1, RFC 9068 §4).
import { errors } from 'jose';

export interface ClaimExpectations {
  issuer: string;
  audience: string;
  clockSkewSeconds: number;
  /** Seconds since the epoch. */
  now: number;
}

/** In the order jose reports a missing one (its presence list, reversed, without repeats). */
const REQUIRED = ['iss', 'aud', 'sub', 'exp'] as const;

/** Throws jose's JWTClaimValidationFailed or JWTExpired; returns nothing when every check passes. */
export function checkRegisteredClaims(claims: Record<string, unknown>, expected: ClaimExpectations): void {
  for (const claim of REQUIRED) {
    if (!Object.hasOwn(claims, claim)) throw new errors.JWTClaimValidationFailed(`missing required "${claim}" claim`, claims, claim, 'missing');
  }
  if (claims.iss !== expected.issuer) throw unexpected(claims, 'iss');
  if (!namesAudience(claims.aud, expected.audience)) throw unexpected(claims, 'aud');
  numericDate(claims, 'iat');
  const nbf = numericDate(claims, 'nbf');
  if (nbf !== undefined && nbf > expected.now + expected.clockSkewSeconds) throw unexpected(claims, 'nbf', '"nbf" claim timestamp check failed');
  const exp = numericDate(claims, 'exp');
  if (exp !== undefined && exp <= expected.now - expected.clockSkewSeconds) {
    throw new errors.JWTExpired('"exp" claim timestamp check failed', claims, 'exp', 'check_failed');
  }
}

function namesAudience(aud: unknown, audience: string): boolean {
  if (typeof aud === 'string') return aud === audience;
  return Array.isArray(aud) && aud.includes(audience);
}

/** The claim's value when present; a present claim that is not a number is refused. */
function numericDate(claims: Record<string, unknown>, claim: 'iat' | 'nbf' | 'exp'): number | undefined {
  const value = claims[claim];
  if (value === undefined) return undefined;
  if (typeof value !== 'number') throw new errors.JWTClaimValidationFailed(`"${claim}" claim must be a number`, claims, claim, 'invalid');
  return value;
}

function unexpected(claims: Record<string, unknown>, claim: string, message = `unexpected "${claim}" claim value`): errors.JWTClaimValidationFailed {
  return new errors.JWTClaimValidationFailed(message, claims, claim, 'check_failed');
}
