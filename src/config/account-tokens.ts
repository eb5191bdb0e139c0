// `account_tokens` in gateway.yaml: the keys users' upstream grants
// (user_oauth) are encrypted with in the store. Several keys rotate: the first
// encrypts, every one decrypts; each is known by an id derived from it, so a
// record names the key it was sealed with and no key is ever stored.
import { createHash, hkdfSync } from 'node:crypto';
import { z } from 'zod';
import type { ConfigPath } from './yaml-file.js';

/** Key material: at least 256 bits when written as base64 (`openssl rand -base64 32`). */
const MIN_KEY_LENGTH = 32;

export function accountTokensSchema(SecretRef: z.ZodType<{ env: string } | { file: string }>) {
  return z
    .strictObject({
      encryption_key: z
        .union([SecretRef, z.array(SecretRef).min(1).max(8)])
        .describe('a secret of at least 32 characters (openssl rand -base64 32), or a list to rotate: the first encrypts, every one decrypts'),
    })
    .meta({ id: 'AccountTokens', description: "How users' upstream grants (upstream_auth kind user_oauth) are kept: encrypted with AES-256-GCM" });
}

/** One AES-256 key and the id records name it by. */
export interface AccountTokenKey {
  id: string;
  key: Buffer;
}

export interface AccountTokensConfig {
  /** The first encrypts; all decrypt. */
  keys: AccountTokenKey[];
}

export interface AccountTokensResolving {
  secret(path: ConfigPath, ref: { env: string } | { file: string }): Promise<string>;
  issue(path: ConfigPath, message: string): void;
}

export async function resolveAccountTokens(file: { encryption_key: { env: string } | { file: string } | ({ env: string } | { file: string })[] }, r: AccountTokensResolving): Promise<AccountTokensConfig> {
  const refs = Array.isArray(file.encryption_key) ? file.encryption_key : [file.encryption_key];
  const keys: AccountTokenKey[] = [];
  for (const [i, ref] of refs.entries()) {
    const path = Array.isArray(file.encryption_key) ? ['account_tokens', 'encryption_key', i] : ['account_tokens', 'encryption_key'];
    const secret = await r.secret(path, ref);
    if (secret === '') continue; // already an issue
    if (secret.length < MIN_KEY_LENGTH) r.issue(path, `an encryption key is at least ${MIN_KEY_LENGTH} characters (openssl rand -base64 32)`);
    keys.push(deriveKey(secret));
  }
  const ids = new Set(keys.map((k) => k.id));
  if (ids.size < keys.length) r.issue(['account_tokens', 'encryption_key'], 'the same key is listed twice');
  return { keys };
}

/** The AES key (HKDF-SHA256 of the secret) and its id: the first 8 bytes of its SHA-256, base64url. */
export function deriveKey(secret: string): AccountTokenKey {
  const key = Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), 'mcp-auth-gateway', 'account tokens v1', 32));
  return { id: createHash('sha256').update(key).digest('base64url').slice(0, 11), key };
}
