// `upstream_auth: idp_token`: from a verified gateway access token to the
// IdP access token of the same user (spec §5.12). The token's `gid` claim
// (signed by the AS, so never chosen by the caller) names the grant; the
// grant's record must also name the token's `sub` and `client_id`, and it
// decrypts only under that grant id — so user A's token cannot reach user B's
// IdP token. An expired IdP access token is refreshed: once per grant in this
// process, and across replicas under a short store lock. When the IdP refuses
// the refresh, the grant is revoked and the client gets a 401 challenge (it
// signs in again). The gateway's own refresh (/token) asks the same question
// first (confirmSession): a grant never outlives its IdP session by more
// than one IdP access token's lifetime.
import { GatewayError, invalidToken, temporarilyUnavailable } from '../../errors/gateway-error.js';
import { translateKnown } from '../../errors/translate.js';
import type { Logger } from '../../observability/logger.js';
import { idpRefreshLockKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import type { IdpTokenSource } from '../../upstream-auth/upstream-credential.js';
import { GRANT_ID_CLAIM } from '../tokens/access-token.js';
import type { GrantInfo, Grants } from '../tokens/grants.js';
import type { IdpTokenRecord, IdpTokenStore } from './idp-token-store.js';
import { IdpSessionEndedError, type OidcClient } from './oidc-client.js';
import type { AuthContext } from '../../auth/principal.js';
import { randomToken } from '../helpers/secrets.js';

/** Longer than one refresh request may take (the IdP request deadline is 10 s). */
const REFRESH_LOCK_TTL_MS = 15_000;
const LOCK_POLL_MS = 100;

export interface IdpAccessTokensDeps {
  /** The built-in AS's issuer: only its tokens carry a grant id. */
  issuer: string;
  store: Store;
  tokens: IdpTokenStore;
  client: OidcClient;
  grants: Grants;
  logger: Logger;
}

/** Whose grant it is: what a gateway token, or the grant itself at /token, names. */
type Owner = Pick<AuthContext, 'subject' | 'clientId'>;

export class IdpAccessTokens implements IdpTokenSource {
  readonly #inFlight = new Map<string, Promise<string>>();

  constructor(private readonly deps: IdpAccessTokensDeps) {}

  async accessTokenFor(auth: AuthContext): Promise<string> {
    const grantId = auth.claims[GRANT_ID_CLAIM];
    if (auth.issuer !== this.deps.issuer || typeof grantId !== 'string' || grantId === '') {
      throw invalidToken('This token is not bound to a sign-in at the identity provider');
    }
    return this.#freshAccessToken(grantId, auth);
  }

  /**
   * At the gateway's refresh of `grant`, before its refresh token rotates:
   * its IdP session must still be alive, i.e. its IdP access token fresh or
   * refreshable now. A session that ended revokes the grant (invalid_grant);
   * an unreachable IdP is 503, and the refresh token stays usable.
   */
  async confirmSession(grant: GrantInfo): Promise<void> {
    try {
      await this.#freshAccessToken(grant.grantId, grant);
    } catch (err) {
      if (err instanceof GatewayError && err.code === 'invalid_token') {
        if (!(await this.deps.grants.isRevoked(grant.grantId))) await this.#endGrant(grant.grantId, grant, 'no identity provider session is bound to the grant');
        throw new GatewayError(400, 'invalid_grant', 'The sign-in at the identity provider has ended; sign in again');
      }
      // An error the translator knows (the store down among them) goes on to /token's handler, which words it.
      if (translateKnown(err)) throw err;
      throw temporarilyUnavailable('The identity provider cannot be reached; try again', err);
    }
  }

  async #freshAccessToken(grantId: string, owner: Owner): Promise<string> {
    const record = await this.#recordFor(grantId, owner);
    if (isFresh(record)) return record.accessToken;
    let refreshing = this.#inFlight.get(grantId);
    if (!refreshing) {
      refreshing = this.#refresh(grantId, owner).finally(() => this.#inFlight.delete(grantId));
      this.#inFlight.set(grantId, refreshing);
    }
    return refreshing;
  }

  /** The grant's record, if it belongs to the token's user and client and to the configured IdP. */
  async #recordFor(grantId: string, auth: Owner): Promise<IdpTokenRecord> {
    const record = await this.deps.tokens.load(grantId);
    if (!record) throw signInAgain();
    if (record.subject !== auth.subject || record.clientId !== auth.clientId || record.idpIssuer !== this.deps.client.issuer) {
      this.deps.logger.warn({ client_id: auth.clientId }, 'idp_token: the grant of a gateway token belongs to another user or identity provider');
      throw signInAgain();
    }
    return record;
  }

  async #refresh(grantId: string, auth: Owner): Promise<string> {
    const lock = idpRefreshLockKey(grantId);
    const owner = randomToken(16);
    if (!(await this.deps.store.setIfAbsent(lock, owner, REFRESH_LOCK_TTL_MS))) return this.#awaitOtherReplica(grantId, auth);
    try {
      // Another replica may have refreshed between our read and the lock.
      const record = await this.#recordFor(grantId, auth);
      if (isFresh(record)) return record.accessToken;
      if (!record.refreshToken) {
        await this.#endGrant(grantId, auth, 'the identity provider issued no refresh token and its access token expired');
        throw signInAgain();
      }
      let refreshed;
      try {
        refreshed = await this.deps.client.refresh(record.refreshToken, record.idpSubject);
      } catch (err) {
        if (!(err instanceof IdpSessionEndedError)) throw err;
        await this.#endGrant(grantId, auth, err.message);
        throw signInAgain();
      }
      const next: IdpTokenRecord = { ...record, ...refreshed };
      // A revocation racing this refresh must not be undone by the write below.
      if (await this.deps.grants.isRevoked(grantId)) throw signInAgain();
      await this.deps.tokens.save(grantId, next);
      if (await this.deps.grants.isRevoked(grantId)) {
        await this.deps.tokens.delete(grantId);
        throw signInAgain();
      }
      return next.accessToken;
    } finally {
      if ((await this.deps.store.get(lock).catch(() => undefined)) === owner) await this.deps.store.delete(lock).catch(() => undefined);
    }
  }

  /** Another replica holds the refresh lock: wait for the record it writes. */
  async #awaitOtherReplica(grantId: string, auth: Owner): Promise<string> {
    const deadline = Date.now() + REFRESH_LOCK_TTL_MS;
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
      const record = await this.#recordFor(grantId, auth);
      if (isFresh(record)) return record.accessToken;
      if ((await this.deps.store.get(idpRefreshLockKey(grantId))) === undefined) return this.#refresh(grantId, auth);
    }
    throw temporarilyUnavailable('The identity provider token is being refreshed; try again');
  }

  /** The IdP session behind a grant is over: its tokens go, and so does the grant (the client must sign in again). */
  async #endGrant(grantId: string, auth: Owner, detail: string): Promise<void> {
    this.deps.logger.info({ detail }, 'idp_token: revoking a grant whose identity provider session ended');
    await this.deps.grants.revoke(grantId, 'idp_session_ended', { subject: auth.subject, clientId: auth.clientId });
  }
}

// A record without refreshAt (written before every IdP token had one) is due: never fresh forever.
const isFresh = (record: IdpTokenRecord) => record.refreshAt !== undefined && Date.now() < record.refreshAt;

const signInAgain = (): GatewayError => invalidToken('The sign-in at the identity provider has ended; sign in again');
