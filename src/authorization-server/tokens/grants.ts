// A grant is what one authorization (code) or one client_credentials request
// issued; its refresh tokens form one family. Refresh tokens rotate on every
// use; presenting a rotated one again is reuse: the whole grant is revoked.
//
// One exception, for an answer that was lost (a store stall, a dropped
// connection): the member rotated last may be presented again by the same
// client with the same DPoP key (or none, as before) within
// REFRESH_RETRY_GRACE_MS of that rotation; it gets a fresh rotation of the
// family (the successor it never received stops working), and the grace is
// not extended by it. After the grace, or with another key, it is reuse.
//
// Keys: refresh:<h(token)> → the grant it belongs to (kept after rotation, so
// reuse is recognised); refresh-family:<h(grant)> → the current member and the
// one it replaced, changed only by compare-and-set (of concurrent rotations one
// wins, the others are judged again on what it wrote, so a rotation delayed in
// the store cannot be undone by a late write);
// grant:<h(grant)> → written only to revoke, never cleared, so a late write of
// the family cannot undo a revocation. A revocation also enters RevokedGrants,
// so the grant's access tokens are refused too (on every replica within 5 s).
import { GatewayError } from '../../errors/gateway-error.js';
import { grantKey, refreshFamilyKey, refreshTokenKey } from '../../store/key-names.js';
import { StoreUnavailableError, type Store } from '../../store/store.js';
import type { RevokedGrants } from './revoked-grants.js';
import { hashSecret, randomToken } from '../helpers/secrets.js';

/** How long after a rotation its client may present the rotated member again (a lost answer retried). */
export const REFRESH_RETRY_GRACE_MS = 30_000;

/** A rotation lost to concurrent ones this often in a row gives up (503) rather than spin. */
const ROTATION_ATTEMPTS = 20;

export interface GrantInfo {
  grantId: string;
  clientId: string;
  subject: string;
  scopes: string[];
  resource: string;
  /**
   * A public client's DPoP key (RFC 9449 §5, §5.2): its refresh tokens are
   * bound to it, so a refresh needs a proof of that key.
   */
  jkt?: string;
}

interface FamilyState {
  /** hash of the current refresh token */
  current: string;
  /** The member the current one replaced: when (ms), with which DPoP key; its holder may retry within the grace. */
  previous?: { hash: string; at: number; jkt?: string };
}

export interface GrantsOptions {
  /** REFRESH_RETRY_GRACE_MS unless a test says otherwise. */
  retryGraceMs?: number;
  now?: () => number;
}

export type RevocationReason = 'refresh_token_reuse' | 'code_replay' | 'revoked_by_client' | 'idp_session_ended' | 'revoked_by_user' | 'superseded';

/** Whose grant was revoked, as far as the revoker knows (a back-channel logout knows only the grant id). */
export interface RevokedGrant {
  subject?: string;
  clientId?: string;
  /** At /revoke: which kind of token named the grant. */
  token?: 'refresh_token' | 'access_token';
}

/** Told about every revocation: the audit line and metric, or deleting what a third-party login bound to the grant. */
export type RevocationListener = (grantId: string, reason: RevocationReason, revoked: RevokedGrant) => Promise<void> | void;

/** Told when a grant gets a refresh token (code redeemed, refresh rotated): the connected-apps page's "last used". */
export type IssueListener = (grant: GrantInfo) => Promise<void>;

/** Asked before a refresh token rotates; throws (a GatewayError) to refuse, e.g. when the grant's IdP session ended. */
export type RefreshCheck = (grant: GrantInfo) => Promise<void>;

export class Grants {
  readonly #listeners: RevocationListener[] = [];
  readonly #refreshChecks: RefreshCheck[] = [];
  readonly #issueListeners: IssueListener[] = [];

  readonly #retryGraceMs: number;
  readonly #now: () => number;

  constructor(
    private readonly store: Store,
    private readonly refreshTtlMs: number,
    private readonly revokedGrants: RevokedGrants,
    options: GrantsOptions = {},
  ) {
    this.#retryGraceMs = options.retryGraceMs ?? REFRESH_RETRY_GRACE_MS;
    this.#now = options.now ?? Date.now;
  }

  /** The first refresh token of a grant. */
  async startFamily(grant: GrantInfo): Promise<string> {
    const token = randomToken(32);
    await this.store.set(refreshTokenKey(token), JSON.stringify(grant), this.refreshTtlMs);
    await this.store.set(refreshFamilyKey(grant.grantId), JSON.stringify({ current: hashSecret(token) } satisfies FamilyState), this.refreshTtlMs);
    await this.#issued(grant);
    return token;
  }

  /**
   * Rotates `refreshToken` (presented by `clientId`, with a proof of `jkt` if
   * any): the grant and a new refresh token, or invalid_grant. Reuse of a
   * rotated token revokes the grant, but for its own retry within the grace.
   */
  async rotate(refreshToken: string, clientId: string, jkt?: string): Promise<{ grant: GrantInfo; refreshToken: string }> {
    const grant = await this.lookup(refreshToken);
    if (!grant || grant.clientId !== clientId) throw invalidGrant('The refresh token is invalid, expired or revoked');
    if (await this.isRevoked(grant.grantId)) throw invalidGrant('The refresh token is invalid, expired or revoked');
    const presented = hashSecret(refreshToken);
    const familyKey = refreshFamilyKey(grant.grantId);
    let checked = false;
    for (let attempt = 0; attempt < ROTATION_ATTEMPTS; attempt++) {
      const stored = await this.store.get(familyKey);
      const replaced = this.#replacedBy(stored, presented, jkt);
      if (replaced === undefined) {
        await this.revoke(grant.grantId, 'refresh_token_reuse', { subject: grant.subject, clientId: grant.clientId });
        throw invalidGrant('The refresh token was already used: the grant is revoked');
      }
      // Once, and only when not reuse (reuse needs no check): a refusal for a transient
      // reason (the IdP unreachable) leaves the token usable.
      if (!checked) for (const check of this.#refreshChecks) await check(grant);
      checked = true;
      const token = randomToken(32);
      await this.store.set(refreshTokenKey(token), JSON.stringify(grant), this.refreshTtlMs);
      const next: FamilyState = { current: hashSecret(token), previous: replaced };
      if (await this.store.compareAndSet(familyKey, stored, JSON.stringify(next), this.refreshTtlMs)) {
        await this.#issued(grant);
        return { grant, refreshToken: token };
      }
      // Another rotation changed the family first: this token is never handed out, and the
      // presented one is judged again on what that rotation wrote.
      await this.store.delete(refreshTokenKey(token));
    }
    throw new StoreUnavailableError(`refresh: ${ROTATION_ATTEMPTS} concurrent rotations of one grant in a row`);
  }

  /**
   * What the family's `previous` becomes if `presented` may rotate it now: the
   * current member (replaced now), or the previous one retried within the grace
   * with the same key (kept, so the grace is counted from its first rotation);
   * undefined for reuse (or no family left).
   */
  #replacedBy(stored: string | undefined, presented: string, jkt: string | undefined): FamilyState['previous'] {
    if (stored === undefined) return undefined;
    const family = JSON.parse(stored) as FamilyState;
    const now = this.#now();
    if (family.current === presented) return { hash: presented, at: now, ...(jkt !== undefined && { jkt }) };
    const previous = family.previous;
    if (previous?.hash === presented && now - previous.at <= this.#retryGraceMs && previous.jkt === jkt) return previous;
    return undefined;
  }

  /** The grant of a refresh token, whatever its state (for revocation). */
  async lookup(refreshToken: string): Promise<GrantInfo | undefined> {
    const value = await this.store.get(refreshTokenKey(refreshToken));
    return value === undefined ? undefined : (JSON.parse(value) as GrantInfo);
  }

  /**
   * Fails closed: a marker the store refuses (a full class: 503) still ends the
   * grant: its family goes, so none of its refresh tokens rotates (the next one
   * counts as reuse), and the revocation log still ends its access tokens.
   */
  async revoke(grantId: string, reason: RevocationReason, revoked: RevokedGrant = {}): Promise<void> {
    const marked = await this.store.set(grantKey(grantId), JSON.stringify({ revoked: true, reason, at: Date.now() }), this.refreshTtlMs).then(
      () => undefined,
      (error: unknown) => error,
    );
    if (marked !== undefined) await this.store.delete(refreshFamilyKey(grantId));
    await this.revokedGrants.add(grantId);
    for (const listener of this.#listeners) await listener(grantId, reason, revoked);
    if (marked !== undefined) throw marked;
  }

  onRevoke(listener: RevocationListener): void {
    this.#listeners.push(listener);
  }

  onIssue(listener: IssueListener): void {
    this.#issueListeners.push(listener);
  }

  beforeRefresh(check: RefreshCheck): void {
    this.#refreshChecks.push(check);
  }

  async isRevoked(grantId: string): Promise<boolean> {
    return (await this.store.get(grantKey(grantId))) !== undefined;
  }

  async #issued(grant: GrantInfo): Promise<void> {
    for (const listener of this.#issueListeners) await listener(grant);
  }
}

const invalidGrant = (description: string) => new GatewayError(400, 'invalid_grant', description);
