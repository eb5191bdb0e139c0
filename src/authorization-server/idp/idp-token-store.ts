// The third-party IdP tokens of one grant (spec §5.12, session binding):
// written when the login completes, before the code exists; read, refreshed
// and rewritten by `idp_token` upstream auth; deleted with the grant. Always
// encrypted in the store (IdpTokenCipher), keyed by the hashed grant id.
import { idpTokenKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import type { IdpTokenCipher } from './idp-token-cipher.js';
import type { IdpTokenSet } from './oidc-client.js';

/** An IdP token set with the identities it belongs to. */
export interface IdpTokenRecord extends IdpTokenSet {
  /** The IdP's issuer and the user's `sub` there: the identity the grant was issued for. */
  idpIssuer: string;
  idpSubject: string;
  /** The gateway's own `sub` and `client_id` of the grant: what a gateway token must name to use these tokens. */
  subject: string;
  clientId: string;
}

export class IdpTokenStore {
  constructor(
    private readonly store: Store,
    private readonly cipher: IdpTokenCipher,
    /** How long a record lives: the grant's (refresh token) lifetime. */
    private readonly ttlMs: number,
  ) {}

  async save(grantId: string, record: IdpTokenRecord): Promise<void> {
    await this.store.set(idpTokenKey(grantId), this.cipher.seal(grantId, JSON.stringify(record)), this.ttlMs);
  }

  /** The grant's record; undefined when there is none or it does not decrypt (another key, another grant's ciphertext). */
  async load(grantId: string): Promise<IdpTokenRecord | undefined> {
    const sealed = await this.store.get(idpTokenKey(grantId));
    if (sealed === undefined) return undefined;
    const plaintext = this.cipher.open(grantId, sealed);
    return plaintext === undefined ? undefined : (JSON.parse(plaintext) as IdpTokenRecord);
  }

  async delete(grantId: string): Promise<void> {
    await this.store.delete(idpTokenKey(grantId));
  }
}
