// Encryption at rest of the third-party IdP tokens kept per grant:
// AES-256-GCM under a key derived (HKDF-SHA256) from the AS's signing key, so
// every replica sharing the key can read what another wrote, and the store
// alone reveals nothing. The grant id is the additional authenticated data: a
// record copied under another grant's key does not decrypt.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;

export class IdpTokenCipher {
  readonly #key: Buffer;

  /** `secret`: 32 bytes already derived from the signing key (SigningKeys.cookieSecret); a separate key is derived from it. */
  constructor(secret: Uint8Array) {
    if (secret.byteLength < 32) throw new Error('the IdP token key needs at least 32 bytes of key material');
    this.#key = Buffer.from(hkdfSync('sha256', secret, 'mcp-auth-gateway', 'idp token encryption v1', 32));
  }

  seal(grantId: string, plaintext: string): string {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.#key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(aad(grantId));
    const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return [VERSION, iv.toString('base64url'), body.toString('base64url'), cipher.getAuthTag().toString('base64url')].join('.');
  }

  /** The plaintext, or undefined when the value is not ours, was sealed for another grant, or under another key. */
  open(grantId: string, sealed: string): string | undefined {
    const [version, iv, body, tag, ...rest] = sealed.split('.');
    if (version !== VERSION || iv === undefined || body === undefined || tag === undefined || rest.length > 0) return undefined;
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.#key, Buffer.from(iv, 'base64url'), { authTagLength: TAG_BYTES });
      decipher.setAAD(aad(grantId));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
    } catch {
      return undefined;
    }
  }
}

const aad = (grantId: string) => Buffer.from(`idp-token\0${grantId}`, 'utf8');
