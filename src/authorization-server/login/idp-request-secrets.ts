// The PKCE verifier and nonce of one IdP authorization request, derived from
// its `state` (the interaction id: 256 random bits, in the store only as a
// hash) with HMAC-SHA256 under a key derived (HKDF) from the AS's cookie
// secret. So neither is held anywhere between the redirect and the callback
// (issue 11 item 16): the callback recomputes them from the `state` it
// receives, every replica sharing the signing key alike. Someone who sees
// the `state` on its way through the browser cannot compute the verifier
// without the key, and each state is used once (the interaction is taken).
import { createHmac, hkdfSync } from 'node:crypto';
import type { IdpRequestSecrets } from '../idp/oidc-client.js';

export class IdpRequestSecretsDeriver {
  readonly #key: Buffer;

  /** `secret`: SigningKeys.cookieSecret; a key of its own is derived from it. */
  constructor(secret: Uint8Array) {
    if (secret.byteLength < 32) throw new Error('the IdP request key needs at least 32 bytes of key material');
    this.#key = Buffer.from(hkdfSync('sha256', secret, 'mcp-auth-gateway', 'idp request secrets v1', 32));
  }

  /** 43 base64url characters each: a valid RFC 7636 verifier, and a nonce as unguessable as the state. */
  for(state: string): IdpRequestSecrets {
    const derive = (purpose: string) => createHmac('sha256', this.#key).update(`${purpose}\0${state}`, 'utf8').digest('base64url');
    return { codeVerifier: derive('pkce-verifier'), nonce: derive('nonce') };
  }
}
