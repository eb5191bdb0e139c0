// PKCE (RFC 7636), S256 only: what /authorize accepts as a code_challenge and
// how /token checks the code_verifier against it.
import { createHash } from 'node:crypto';
import { constantTimeEqual } from '../helpers/secrets.js';

/** §4.1 and §4.2: a verifier, and an S256 challenge, are 43 to 128 unreserved characters. */
const PKCE_VALUE = /^[A-Za-z0-9._~-]{43,128}$/;

export const isWellFormedChallenge = (challenge: string): boolean => PKCE_VALUE.test(challenge);

/** §4.6: BASE64URL(SHA256(ASCII(code_verifier))), compared in constant time. */
export function pkceVerifierMatches(verifier: string | undefined, challenge: string): boolean {
  if (verifier === undefined || !PKCE_VALUE.test(verifier)) return false;
  return constantTimeEqual(createHash('sha256').update(verifier, 'ascii').digest('base64url'), challenge);
}
