// Encryption at rest of users' upstream grants (user_oauth): AES-256-GCM under
// the `account_tokens` keys. A sealed value names the id of the key that
// sealed it, so keys rotate: the first key seals, every listed key opens. The
// store key is the additional authenticated data: a value copied under
// another user's or route's key does not open.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { AccountTokenKey } from '../../config/account-tokens.js';

const VERSION = 'a1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class AccountTokenCipher {
  readonly #sealing: AccountTokenKey;
  readonly #byId: ReadonlyMap<string, Buffer>;

  constructor(keys: readonly AccountTokenKey[]) {
    const [first] = keys;
    if (!first) throw new Error('account_tokens needs at least one encryption key');
    this.#sealing = first;
    this.#byId = new Map(keys.map((k) => [k.id, k.key]));
  }

  seal(storeKey: string, plaintext: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#sealing.key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad(storeKey));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, this.#sealing.id, iv.toString('base64url'), body.toString('base64url'), cipher.getAuthTag().toString('base64url')].join('.');
  }

  /** The plaintext; undefined when sealed under a key no longer listed, for another store key, or not ours. */
  open(storeKey: string, sealed: string): string | undefined {
    const [version, keyId, iv, body, tag, ...rest] = sealed.split('.');
    if (version !== VERSION || keyId === undefined || iv === undefined || body === undefined || tag === undefined || rest.length > 0) return undefined;
    const key = this.#byId.get(keyId);
    if (!key) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'), { authTagLength: TAG_BYTES });
      decipher.setAAD(aad(storeKey));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      return undefined;
    }
  }

  /** Sealed under a key other than the first: rewrite it on the next save. */
  isStale(sealed: string): boolean {
    return sealed.split('.')[1] !== this.#sealing.id;
  }
}

const aad = (storeKey: string) => Buffer.from(`upstream-grant\0${storeKey}`, 'utf8');
