import crypto from 'node:crypto';

// crypto.hash (Node ≥ 20.12, so always here) hashes a short string in half the
// time of createHash().update().digest(); @types/node 20 does not declare it.
const oneShotHash = (crypto as unknown as { hash: (algorithm: string, data: string, encoding: 'base64url') => string }).hash;

/** sha256, base64url: how tokens are named in caches and logs, never the token itself. */
export function sha256Base64Url(value: string): string {
  return oneShotHash('sha256', value, 'base64url');
}
