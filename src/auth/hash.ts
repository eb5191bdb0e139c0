import { createHash } from 'node:crypto';

/** sha256, base64url: how tokens are named in caches and logs, never the token itself. */
export function sha256Base64Url(value: string): string {
  return createHash('sha256').update(value).digest('base64url');
}
