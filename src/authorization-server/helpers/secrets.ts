// Random identifiers and secrets of the built-in AS, and how secrets are kept:
// sha256 (they are 256-bit random values, so no slow hash is needed) and
// compared in constant time.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** `bytes` of CSPRNG output, base64url (16 bytes = 128 bits). */
export const randomToken = (bytes = 32): string => randomBytes(bytes).toString('base64url');

export const hashSecret = (secret: string): string => createHash('sha256').update(secret, 'utf8').digest('base64url');

/** Constant-time comparison of a presented secret against a stored hash. */
export function secretMatches(presented: string, storedHash: string): boolean {
  const a = createHash('sha256').update(presented, 'utf8').digest();
  const b = Buffer.from(storedHash, 'base64url');
  return b.length === a.length && timingSafeEqual(a, b);
}

/** Constant-time equality of two strings of any length (lengths may leak; contents do not). */
export function constantTimeEqual(a: string, b: string): boolean {
  const x = createHash('sha256').update(a, 'utf8').digest();
  const y = createHash('sha256').update(b, 'utf8').digest();
  return timingSafeEqual(x, y);
}
