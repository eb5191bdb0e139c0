// Users' grants at routes' upstream ASes (user_oauth), in the store: one per
// user (the principal's issuer and subject) and route, sealed with the
// account_tokens keys under a key that names neither in clear. The grant's
// record holds the upstream tokens; nothing here logs or returns them but
// `load` to the one caller that puts the access token on the upstream request.
// `load` is on every request of a user_oauth route: the opened grant is kept in
// process for a few seconds (no store read, no decryption, no parse), and every
// write here sends a store notice that ends it on every replica at once; while
// a replica may miss notices (its subscriber is down), it keeps nothing.
import { upstreamGrantKey, upstreamUsedKey } from '../../store/key-names.js';
import type { NoticeSubscription, Store } from '../../store/store.js';
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
/** How long an opened grant is kept in process: notices end it sooner, this bounds a notice that never came. */
const CACHE_TTL_MS = 5_000;
const CACHE_MAX_ENTRIES = 10_000;
const NOTICE_CHANNEL = 'upstream-grant-changed';

export class UpstreamGrants {
  readonly #lastUsedWrites = new Map<string, number>();
  readonly #cache = new Map<string, { grant: UpstreamGrant; at: number; epoch: number }>();
  /** Bumped by every change heard: a read that started before one is not kept. */
  #changes = 0;
  readonly #notices: NoticeSubscription;

  constructor(
    private readonly store: Store,
    private readonly cipher: AccountTokenCipher,
    /** How long a grant with a refresh token is kept (the built-in AS's refresh token lifetime). */
    private readonly ttlMs: number,
    private readonly cacheTtlMs = CACHE_TTL_MS,
  ) {
    // The memory store has one replica: this process's own writes are all the changes there are.
    this.#notices = store.notices?.subscribe(NOTICE_CHANNEL, (key) => this.#forget(key)) ?? { live: () => store.kind === 'memory', epoch: () => 0, close: () => undefined };
  }

  /** Replaced (a reload built another): no more notices reach this one, and nothing opened stays in memory. */
  close(): void {
    this.#notices.close();
    this.#cache.clear();
  }

  keyOf(owner: GrantOwner): string {
    return upstreamGrantKey(owner.issuer, owner.subject, owner.routePath);
  }

  /** The grant; undefined when there is none or it does not open (a key removed from the list, a value moved from another key). */
  async load(owner: GrantOwner): Promise<UpstreamGrant | undefined> {
    const key = this.keyOf(owner);
    const kept = this.kept(key);
    if (kept) return kept;
    const changes = this.#changes;
    const epoch = this.#notices.epoch();
    const sealed = await this.store.get(key);
    const text = sealed === undefined ? undefined : this.cipher.open(key, sealed);
    const grant = text === undefined ? undefined : (JSON.parse(text) as UpstreamGrant);
    if (grant && changes === this.#changes && this.#notices.live() && epoch === this.#notices.epoch()) this.#keep(key, grant, epoch);
    return grant;
  }

  /**
   * Synchronously, the grant opened for the store key `key` while it is kept in process (no store
   * read, no decryption, no promise), trusted exactly as `load` trusts it; else undefined.
   */
  kept(key: string): UpstreamGrant | undefined {
    const kept = this.#cache.get(key);
    // Kept before the subscriber last dropped: a notice may have been missed then, even though it is live again.
    if (kept && Date.now() - kept.at < this.cacheTtlMs && this.#notices.live() && kept.epoch === this.#notices.epoch()) return kept.grant;
    return undefined;
  }

  #keep(key: string, grant: UpstreamGrant, epoch: number): void {
    this.#cache.delete(key);
    if (this.#cache.size >= CACHE_MAX_ENTRIES) this.#cache.delete(this.#cache.keys().next().value!);
    this.#cache.set(key, { grant, at: Date.now(), epoch });
  }

  #forget(key: string): void {
    this.#changes++;
    this.#cache.delete(key);
  }

  /** After every write: ended here at once, and on the other replicas when they hear the notice. */
  async #changed(key: string): Promise<void> {
    this.#forget(key);
    await this.store.notices?.publish(NOTICE_CHANNEL, key).catch(() => undefined);
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
    await this.#changed(key);
  }

  /** A refresh's result, written only if the grant is still the version it started from (no Disconnect, no new connection since). */
  async replace(owner: GrantOwner, version: string, grant: UpstreamGrant): Promise<boolean> {
    const key = this.keyOf(owner);
    const replaced = await this.store.compareAndSet(key, version, this.cipher.seal(key, JSON.stringify(grant)), this.#ttlOf(grant));
    if (replaced) await this.#changed(key);
    return replaced;
  }

  /** A grant the AS refused, deleted only if it is still that version. */
  async deleteIf(owner: GrantOwner, version: string): Promise<boolean> {
    const key = this.keyOf(owner);
    if (!(await this.store.compareAndSet(key, version, undefined, this.ttlMs))) return false;
    await this.#changed(key);
    await this.store.delete(upstreamUsedKey(key));
    return true;
  }

  #ttlOf(grant: UpstreamGrant): number {
    return grant.refreshToken || grant.expiresAt === undefined ? this.ttlMs : Math.max(NO_REFRESH_GRACE_MS, grant.expiresAt - Date.now() + NO_REFRESH_GRACE_MS);
  }

  async delete(owner: GrantOwner): Promise<void> {
    const key = this.keyOf(owner);
    await this.store.delete(key);
    await this.#changed(key);
    await this.store.delete(upstreamUsedKey(key));
  }

  /** Records a use; best effort and at most once a minute per grant on this replica. */
  async used(owner: GrantOwner): Promise<void> {
    await this.usedKey(this.keyOf(owner));
  }

  /** As `used`, by store key; undefined, no promise, when this replica wrote it less than a minute ago (most requests). */
  usedKey(key: string): Promise<void> | undefined {
    const now = Date.now();
    if (now - (this.#lastUsedWrites.get(key) ?? 0) < LAST_USED_WRITE_INTERVAL_MS) return undefined;
    this.#lastUsedWrites.set(key, now);
    if (this.#lastUsedWrites.size > 10_000) this.#lastUsedWrites.clear();
    return this.store.set(upstreamUsedKey(key), String(now), this.ttlMs);
  }

  async lastUsed(owner: GrantOwner): Promise<number | undefined> {
    const at = await this.store.get(upstreamUsedKey(this.keyOf(owner)));
    return at === undefined ? undefined : Number(at);
  }
}
