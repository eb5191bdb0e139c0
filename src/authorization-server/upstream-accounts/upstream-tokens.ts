// The access token a route's upstream gets for one principal (user_oauth):
// the stored grant's, refreshed ahead of expiry by one replica at a time (a
// store lock; the others keep using the token while it is valid, or wait for
// the new one), and one refresh at a time per grant within a replica. No grant,
// or a refresh the AS refuses: UpstreamAccountRequired, with a connect link.
// A refresh writes (or, refused, deletes) the grant only if it is still the
// version the refresh started from: a Disconnect or a new connection made
// meanwhile stands. The lock is released only by its holder.
import { randomBytes } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import type { AuthContext } from '../../auth/principal.js';
import { upstreamRefreshLockKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import { upstreamCredentialFailed } from '../../upstream-auth/credential-error.js';
import { UpstreamAccountRequired } from '../../upstream-auth/user-oauth.js';
import type { UpstreamAccountSource } from '../../upstream-auth/upstream-credential.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { DiscoveredUrlRefused } from './discovery-guard.js';
import { checkTokenSizes } from './upstream-answers.js';
import type { GrantOwner, UpstreamGrant, UpstreamGrants, VersionedGrant } from './upstream-grants.js';
import { safeReason, type UpstreamServer } from './upstream-server.js';
import type { UpstreamAccountEvents } from './upstream-account-events.js';

/** Beyond the worst case of discovery plus the token request, the lock lives this much longer (a replica dying mid-refresh frees it then). */
const REFRESH_LOCK_MARGIN_MS = 10_000;
/** How often a replica without the lock and without a valid token looks for the holder's outcome. */
const POLL_MS = 100;

export interface UpstreamTokensOptions {
  routePath: string;
  /** The route's resource now: a grant kept for another (the configuration changed) is not used. */
  resource: string;
  server: UpstreamServer;
  grants: UpstreamGrants;
  store: Store;
  events: UpstreamAccountEvents;
  /** The connect link for this principal and route (made when asked for). */
  connectLink(owner: GrantOwner): Promise<{ url: string; id: string }>;
}

export class UpstreamTokens implements UpstreamAccountSource {
  readonly #refreshing = new Map<string, Promise<UpstreamGrant | undefined>>();
  /** Each verified principal's grant key (three SHA-256s), by its frozen context: the token cache hands every request of a token the same one. */
  readonly #keys = new WeakMap<AuthContext, string>();

  constructor(private readonly o: UpstreamTokensOptions) {}

  /**
   * Synchronously, the access token of a grant kept in process (grants.kept: as trusted as a
   * load), for this route and not due for refresh: what most requests need, with no store read
   * and no promise. Else undefined, and accessTokenFor reads, refreshes or answers the connect link.
   */
  keptAccessTokenFor(auth: AuthContext): string | undefined {
    const key = this.#keyOf(auth);
    const grant = this.o.grants.kept(key);
    if (grant === undefined || !this.#forThisRoute(grant) || refreshDue(grant)) return undefined;
    this.o.grants.usedKey(key)?.catch(() => undefined);
    return grant.accessToken;
  }

  async accessTokenFor(auth: AuthContext): Promise<string> {
    const owner = this.#owner(auth);
    let grant = await this.o.grants.load(owner);
    if (grant && !this.#forThisRoute(grant)) grant = undefined;
    if (grant && refreshDue(grant)) grant = await this.#refreshOnce(owner, grant);
    if (!grant) throw await this.#required(owner);
    this.o.grants.used(owner).catch(() => undefined);
    return grant.accessToken;
  }

  /** The upstream refused `token` (401): refresh once if it is still the stored one; a refused refresh forgets the grant. */
  async refused(auth: AuthContext, token: string): Promise<void> {
    const owner = this.#owner(auth);
    const grant = await this.o.grants.load(owner);
    if (!grant || grant.accessToken !== token) return;
    await this.#refreshOnce(owner, { ...grant, expiresAt: 0 });
  }

  /** Kept for another configuration (another resource, or from an AS other than the configured or last discovered one): not used. */
  #forThisRoute(grant: UpstreamGrant): boolean {
    const issuer = this.o.server.knownIssuer();
    return grant.resource === this.o.resource && (issuer === undefined || grant.asIssuer === issuer);
  }

  #owner(auth: AuthContext): GrantOwner {
    return { issuer: auth.issuer, subject: auth.subject, routePath: this.o.routePath };
  }

  /** Remembered only for a frozen context, whose issuer and subject cannot change under the key. */
  #keyOf(auth: AuthContext): string {
    let key = this.#keys.get(auth);
    if (key === undefined) {
      key = this.o.grants.keyOf(this.#owner(auth));
      if (Object.isFrozen(auth)) this.#keys.set(auth, key);
    }
    return key;
  }

  async #required(owner: GrantOwner): Promise<UpstreamAccountRequired> {
    const link = await this.o.connectLink(owner);
    return new UpstreamAccountRequired(link.url, link.id);
  }

  /** One refresh per grant in this replica; callers share it. */
  #refreshOnce(owner: GrantOwner, grant: UpstreamGrant): Promise<UpstreamGrant | undefined> {
    const key = this.o.grants.keyOf(owner);
    let pending = this.#refreshing.get(key);
    if (!pending) {
      pending = this.#refresh(owner, grant).finally(() => this.#refreshing.delete(key));
      this.#refreshing.set(key, pending);
    }
    return pending;
  }

  async #refresh(owner: GrantOwner, grant: UpstreamGrant): Promise<UpstreamGrant | undefined> {
    const lock = upstreamRefreshLockKey(this.o.grants.keyOf(owner));
    const holder = randomBytes(16).toString('base64url');
    // Held through discovery and the token request: the lock outlives both, each bounded by its timeout.
    const ttl = this.o.server.worstCaseMs() + REFRESH_LOCK_MARGIN_MS;
    if (!(await this.o.store.setIfAbsent(lock, holder, ttl))) return this.#awaitOthers(owner, grant, lock, ttl);
    try {
      // Another replica may have refreshed between our read and the lock.
      const current = await this.o.grants.loadVersioned(owner);
      if (!current || (current.grant.accessToken !== grant.accessToken && !refreshDue(current.grant))) return current?.grant;
      return await this.#redeem(owner, current);
    } finally {
      // Our lock only: one another replica holds is not ours to free.
      await this.o.store.compareAndSet(lock, holder, undefined, ttl).catch(() => undefined);
    }
  }

  /**
   * Another replica holds the lock: the token while it is valid, else what the holder leaves when it
   * lets go — the new grant, none (refused), or, the grant unchanged, its failure: a 502 then, not at
   * the end of a fixed wait. Bounded by the lock's life (the holder's own bound: its requests' timeouts).
   * The lock is read before the grant, and the grant from the store (the kept one may predate the
   * holder's notice): a holder writes before it releases.
   */
  async #awaitOthers(owner: GrantOwner, grant: UpstreamGrant, lock: string, ttl: number): Promise<UpstreamGrant | undefined> {
    if (grant.expiresAt !== undefined && grant.expiresAt > Date.now()) return grant;
    const deadline = Date.now() + ttl;
    while (Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
      const held = (await this.o.store.get(lock)) !== undefined;
      const current = (await this.o.grants.loadVersioned(owner))?.grant;
      if (!current || current.accessToken !== grant.accessToken) return current && this.#forThisRoute(current) ? current : undefined;
      if (!held) throw upstreamCredentialFailed(new Error('another replica could not refresh the upstream grant'));
    }
    throw upstreamCredentialFailed(new Error('waited too long for another replica to refresh the upstream grant'));
  }

  async #redeem(owner: GrantOwner, { grant, version }: VersionedGrant): Promise<UpstreamGrant | undefined> {
    if (!grant.refreshToken) {
      this.o.events.record('refresh_failed', owner, 'no refresh token');
      return this.#forget(owner, version);
    }
    const resolved = await this.o.server.resolve().catch((err: unknown) => {
      throw err instanceof DiscoveredUrlRefused ? new GatewayError(502, 'bad_gateway', `the upstream's authorization server is refused: ${err.message}`, { cause: err }) : err;
    });
    // Its refresh token goes only to the AS that issued it (RFC 8414 §3.3): the upstream now names another, the grant is over.
    if (resolved.server.issuer !== grant.asIssuer) {
      this.o.events.record('refresh_failed', owner, 'the grant is from another authorization server than the upstream now names');
      return this.#forget(owner, version);
    }
    let tokens: oauth.TokenEndpointResponse;
    try {
      const options = { ...this.o.server.requestOptions(resolved.insecure), ...(grant.resource && { additionalParameters: this.o.server.resourceParameter(grant.resource) }) };
      const response = await oauth.refreshTokenGrantRequest(resolved.server, resolved.client, resolved.auth, grant.refreshToken, options);
      tokens = checkTokenSizes(await oauth.processRefreshTokenResponse(resolved.server, resolved.client, response));
    } catch (err) {
      this.o.events.record('refresh_failed', owner, safeReason(err));
      // The AS refused the grant: it is over, the user connects again. Anything else: this request fails, the grant stays.
      if (err instanceof oauth.ResponseBodyError && err.status < 500) {
        if (err.error === 'invalid_client') await this.o.server.forgetRegistration(resolved.client.client_id);
        return this.#forget(owner, version);
      }
      throw upstreamCredentialFailed(new Error(`upstream token refresh failed: ${safeReason(err)}`));
    }
    const refreshed = grantFrom(tokens, { ...grant, refreshToken: tokens.refresh_token ?? grant.refreshToken });
    // Disconnected or connected again while the AS answered: that stands, this answer is dropped, and revoked there.
    if (!(await this.o.grants.replace(owner, version, refreshed))) {
      this.#revokeDropped(owner, refreshed, tokens.refresh_token !== undefined && tokens.refresh_token !== grant.refreshToken);
      return this.#current(owner);
    }
    this.o.events.record('refreshed', owner);
    return refreshed;
  }

  /**
   * RFC 7009 for what the dropped refresh created (best effort, in the background: the request does
   * not wait for the AS). Its refresh token only when the AS rotated it: an unrotated one is the one
   * the grant that won may still hold, and an AS that ends the whole grant on its revocation would
   * end the user's new connection with it.
   */
  #revokeDropped(owner: GrantOwner, dropped: UpstreamGrant, rotated: boolean): void {
    const [token, hint] = rotated && dropped.refreshToken ? [dropped.refreshToken, 'refresh_token' as const] : [dropped.accessToken, 'access_token' as const];
    this.o.server.revoke(dropped.asIssuer, token, hint).then(
      (revoked) => this.o.events.record('refresh_dropped', owner, revoked ? 'revoked at the upstream authorization server' : 'the upstream authorization server has no revocation endpoint'),
      () => this.o.events.record('revocation_failed', owner, 'the tokens of a dropped refresh'),
    );
  }

  /** Deletes the refused grant unless it changed meanwhile (then the new one is the answer). */
  async #forget(owner: GrantOwner, version: string): Promise<UpstreamGrant | undefined> {
    return (await this.o.grants.deleteIf(owner, version)) ? undefined : this.#current(owner);
  }

  async #current(owner: GrantOwner): Promise<UpstreamGrant | undefined> {
    const grant = await this.o.grants.load(owner);
    return grant && this.#forThisRoute(grant) ? grant : undefined;
  }
}

/** The grant a token answer makes, keeping what the answer does not say. */
export function grantFrom(tokens: oauth.TokenEndpointResponse, base: Omit<UpstreamGrant, 'accessToken' | 'obtainedAt' | 'expiresAt'>): UpstreamGrant {
  const now = Date.now();
  return {
    ...base,
    accessToken: tokens.access_token,
    refreshToken: tokens.refresh_token ?? base.refreshToken,
    obtainedAt: now,
    expiresAt: typeof tokens.expires_in === 'number' ? now + tokens.expires_in * 1000 : undefined,
    scopes: typeof tokens.scope === 'string' ? tokens.scope.split(' ').filter(Boolean) : base.scopes,
  };
}

/** Refreshed ahead: a quarter of its lifetime before expiry, at most 60 s before (a fresh token is never due at once). */
export function refreshDue(grant: UpstreamGrant, now = Date.now()): boolean {
  if (grant.expiresAt === undefined) return false;
  const ahead = Math.min(60_000, (grant.expiresAt - grant.obtainedAt) / 4);
  return grant.expiresAt - now <= ahead;
}
