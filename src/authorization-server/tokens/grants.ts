// A grant is what one authorization (code) or one client_credentials request
// issued; its refresh tokens form one family. Refresh tokens rotate on every
// use; presenting a rotated one again is reuse: the whole grant is revoked.
// There is no grace window: two requests racing with the same refresh token
// both fail and the grant is revoked (the client signs in again).
//
// Keys: refresh:<h(token)> → the grant it belongs to (kept after rotation, so
// reuse is recognised); refresh-family:<h(grant)> → the current member;
// refresh-used:<h(token)> → claimed (SET NX) by the one rotation allowed, kept
// only while that rotation runs: once the family names the new member, reuse of
// the old token is recognised by the family alone;
// grant:<h(grant)> → written only to revoke, never cleared, so a late write of
// the family cannot undo a revocation. A revocation also enters RevokedGrants,
// so the grant's access tokens are refused too (on every replica within 5 s).
import { GatewayError } from '../../errors/gateway-error.js';
import { grantKey, refreshFamilyKey, refreshTokenKey, usedRefreshTokenKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import type { RevokedGrants } from './revoked-grants.js';
import { hashSecret, randomToken } from '../helpers/secrets.js';

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
}

/**
 * How long a rotation's claim is kept: far longer than one rotation takes (each
 * store call is bounded by the store timeout), and short, so the claims a client
 * can pile up by rotating in a loop stay few (docs/storage.md).
 */
const ROTATION_CLAIM_TTL_MS = 10 * 60_000;

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

  constructor(
    private readonly store: Store,
    private readonly refreshTtlMs: number,
    private readonly revokedGrants: RevokedGrants,
  ) {}

  /** The first refresh token of a grant. */
  async startFamily(grant: GrantInfo): Promise<string> {
    return this.issueMember(grant);
  }

  /**
   * Rotates `refreshToken` (presented by `clientId`): the grant and a new
   * refresh token, or invalid_grant. Reuse of a rotated token revokes the grant.
   */
  async rotate(refreshToken: string, clientId: string): Promise<{ grant: GrantInfo; refreshToken: string }> {
    const grant = await this.lookup(refreshToken);
    if (!grant || grant.clientId !== clientId) throw invalidGrant('The refresh token is invalid, expired or revoked');
    if (await this.isRevoked(grant.grantId)) throw invalidGrant('The refresh token is invalid, expired or revoked');
    const family = await this.store.get(refreshFamilyKey(grant.grantId));
    const current = family === undefined ? undefined : (JSON.parse(family) as FamilyState).current;
    const isCurrent = current === hashSecret(refreshToken);
    // Before the claim, and only for the current member (reuse needs no check): a refusal for a
    // transient reason (the IdP unreachable) leaves the token usable.
    if (isCurrent) for (const check of this.#refreshChecks) await check(grant);
    // SET NX: of concurrent rotations of one token, one wins; the others are reuse.
    const claimed = isCurrent && (await this.store.setIfAbsent(usedRefreshTokenKey(refreshToken), '1', ROTATION_CLAIM_TTL_MS));
    if (!claimed) {
      await this.revoke(grant.grantId, 'refresh_token_reuse', { subject: grant.subject, clientId: grant.clientId });
      throw invalidGrant('The refresh token was already used: the grant is revoked');
    }
    return { grant, refreshToken: await this.issueMember(grant) };
  }

  /** The grant of a refresh token, whatever its state (for revocation). */
  async lookup(refreshToken: string): Promise<GrantInfo | undefined> {
    const value = await this.store.get(refreshTokenKey(refreshToken));
    return value === undefined ? undefined : (JSON.parse(value) as GrantInfo);
  }

  async revoke(grantId: string, reason: RevocationReason, revoked: RevokedGrant = {}): Promise<void> {
    await this.store.set(grantKey(grantId), JSON.stringify({ revoked: true, reason, at: Date.now() }), this.refreshTtlMs);
    await this.revokedGrants.add(grantId);
    for (const listener of this.#listeners) await listener(grantId, reason, revoked);
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

  private async issueMember(grant: GrantInfo): Promise<string> {
    const token = randomToken(32);
    await this.store.set(refreshTokenKey(token), JSON.stringify(grant), this.refreshTtlMs);
    await this.store.set(refreshFamilyKey(grant.grantId), JSON.stringify({ current: hashSecret(token) } satisfies FamilyState), this.refreshTtlMs);
    for (const listener of this.#issueListeners) await listener(grant);
    return token;
  }
}

const invalidGrant = (description: string) => new GatewayError(400, 'invalid_grant', description);
