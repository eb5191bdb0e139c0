// Users' grants at routes' upstream ASes (user_oauth), in the store: one per
// user (the principal's issuer and subject) and route, sealed with the
// account_tokens keys under a key that names neither in clear. The grant's
// record holds the upstream tokens; nothing here logs or returns them but
// `load` to the one caller that puts the access token on the upstream request.
import { upstreamGrantKey, upstreamUsedKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import type { AccountTokenCipher } from './account-token-cipher.js';

export interface UpstreamGrant {
  accessToken: string;
  refreshToken?: string;
  /** ms since the epoch; undefined: the AS named no lifetime (the token is used until refused). */
  expiresAt?: number;
  /** When this access token was obtained (ms): refreshes are timed from it. */
  obtainedAt: number;
  scopes: string[];
  connectedAt: number;
  /** The AS that issued it and the resource it is for: a grant of another configuration is not used. */
  asIssuer: string;
  resource: string;
}

export interface VersionedGrant {
  grant: UpstreamGrant;
  version: string;
}

/** Who and where: the principal (issuer + subject) and the route. */
export interface GrantOwner {
  issuer: string;
  subject: string;
  routePath: string;
}

/** Without a refresh token, a grant is kept this long past its access token. */
const NO_REFRESH_GRACE_MS = 60_000;
const LAST_USED_WRITE_INTERVAL_MS = 60_000;

export class UpstreamGrants {
  readonly #lastUsedWrites = new Map<string, number>();

  constructor(
    private readonly store: Store,
    private readonly cipher: AccountTokenCipher,
    /** How long a grant with a refresh token is kept (the built-in AS's refresh token lifetime). */
    private readonly ttlMs: number,
  ) {}

  keyOf(owner: GrantOwner): string {
    return upstreamGrantKey(owner.issuer, owner.subject, owner.routePath);
  }

  /** The grant; undefined when there is none or it does not open (a key removed from the list, a value moved from another key). */
  async load(owner: GrantOwner): Promise<UpstreamGrant | undefined> {
    const key = this.keyOf(owner);
    const sealed = await this.store.get(key);
    const text = sealed === undefined ? undefined : this.cipher.open(key, sealed);
    return text === undefined ? undefined : (JSON.parse(text) as UpstreamGrant);
  }

  /** The grant and its version (the sealed record as stored, unique to each write): what `replace` and `deleteIf` compare against. */
  async loadVersioned(owner: GrantOwner): Promise<VersionedGrant | undefined> {
    const key = this.keyOf(owner);
    const sealed = await this.store.get(key);
    const text = sealed === undefined ? undefined : this.cipher.open(key, sealed);
    return sealed === undefined || text === undefined ? undefined : { grant: JSON.parse(text) as UpstreamGrant, version: sealed };
  }

  /** A new connection: it replaces whatever was there. */
  async save(owner: GrantOwner, grant: UpstreamGrant): Promise<void> {
    const key = this.keyOf(owner);
    await this.store.set(key, this.cipher.seal(key, JSON.stringify(grant)), this.#ttlOf(grant));
  }

  /** A refresh's result, written only if the grant is still the version it started from (no Disconnect, no new connection since). */
  async replace(owner: GrantOwner, version: string, grant: UpstreamGrant): Promise<boolean> {
    const key = this.keyOf(owner);
    return this.store.compareAndSet(key, version, this.cipher.seal(key, JSON.stringify(grant)), this.#ttlOf(grant));
  }

  /** A grant the AS refused, deleted only if it is still that version. */
  async deleteIf(owner: GrantOwner, version: string): Promise<boolean> {
    const key = this.keyOf(owner);
    if (!(await this.store.compareAndSet(key, version, undefined, this.ttlMs))) return false;
    await this.store.delete(upstreamUsedKey(key));
    return true;
  }

  #ttlOf(grant: UpstreamGrant): number {
    return grant.refreshToken || grant.expiresAt === undefined ? this.ttlMs : Math.max(NO_REFRESH_GRACE_MS, grant.expiresAt - Date.now() + NO_REFRESH_GRACE_MS);
  }

  async delete(owner: GrantOwner): Promise<void> {
    const key = this.keyOf(owner);
    await this.store.delete(key);
    await this.store.delete(upstreamUsedKey(key));
  }

  /** Records a use; best effort and at most once a minute per grant on this replica. */
  async used(owner: GrantOwner): Promise<void> {
    const key = this.keyOf(owner);
    const now = Date.now();
    if (now - (this.#lastUsedWrites.get(key) ?? 0) < LAST_USED_WRITE_INTERVAL_MS) return;
    this.#lastUsedWrites.set(key, now);
    if (this.#lastUsedWrites.size > 10_000) this.#lastUsedWrites.clear();
    await this.store.set(upstreamUsedKey(key), String(now), this.ttlMs);
  }

  async lastUsed(owner: GrantOwner): Promise<number | undefined> {
    const at = await this.store.get(upstreamUsedKey(this.keyOf(owner)));
    return at === undefined ? undefined : Number(at);
  }
}
