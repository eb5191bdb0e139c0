// Which grants are revoked, known synchronously on every request (docs/authorization-server.md,
// "limits and revocation": a revoked grant's access tokens are refused on
// every replica within 5 s, on kept-alive connections too). An access token
// is a JWT checked without a store round trip, so each replica keeps a local set of revoked
// grant ids: a revocation made here enters it at once; one made elsewhere
// arrives through a shared log in the store (a Redis sorted set stamped by
// the server's clock), read every POLL_INTERVAL_MS "since the last stamp
// seen". Entries leave after RETENTION, longer than any access token lives.
//
// A replica that could not read the log for STALE_AFTER_MS can no longer
// promise the bound: it answers 503 for this AS's tokens rather than accept
// them silently, until a read succeeds again (mag_revocation_syncs_total
// counts failed reads; mag_revocation_last_read_timestamp_seconds dates the
// last good one).
import type { Logger } from '../../observability/logger.js';
import type { AuthorizationServerMetrics } from '../../observability/metrics.js';
import { revokedGrantsKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';

const POLL_INTERVAL_MS = 1_000;
/** With a 1 s poll, a revocation is refused everywhere within this bound plus one poll, inside the 5 s of the contract. */
const STALE_AFTER_MS = 4_000;
/** Stamps are read again this far back: a write stamped just before a Sentinel failover or under clock steps is not missed. */
const REREAD_MS = 5_000;
/** Longer than any access token lives, with room for a TTL shortened by a reload. */
const MIN_RETENTION_MS = 3600_000;
const RETENTION_MARGIN_MS = 60_000;

export type GrantState = 'usable' | 'revoked' | 'unknown';

export interface RevokedGrantsDeps {
  store: Store;
  issuer: string;
  accessTokenTtlMs: number;
  logger: Logger;
  metrics: Pick<AuthorizationServerMetrics, 'revocationSyncs' | 'revocationLastRead'>;
}

export class RevokedGrants {
  /** grant id → local time after which it can be forgotten (every token of it has expired). */
  readonly #revoked = new Map<string, number>();
  readonly #key: string;
  readonly #retentionMs: number;
  #cursor = 0;
  #lastReadStartedAt = Number.NEGATIVE_INFINITY;
  #reading?: Promise<void>;
  #timer?: NodeJS.Timeout;
  #failing = false;
  /** Revocations made here that the shared log has not taken yet: written again before each read. */
  readonly #unpublished = new Set<string>();

  constructor(private readonly deps: RevokedGrantsDeps) {
    this.#key = revokedGrantsKey(deps.issuer);
    this.#retentionMs = Math.max(MIN_RETENTION_MS, deps.accessTokenTtlMs + RETENTION_MARGIN_MS);
  }

  /** Reads the whole log once (so a new replica knows what was revoked before it started), then polls. */
  async start(): Promise<void> {
    await this.poll();
    this.#timer ??= setInterval(() => void this.poll(), POLL_INTERVAL_MS).unref();
  }

  close(): void {
    clearInterval(this.#timer);
  }

  /** Synchronous and cheap: called on every request that presents one of this AS's tokens. */
  state(grantId: string): GrantState {
    if (this.#revoked.has(grantId)) return 'revoked';
    return Date.now() - this.#lastReadStartedAt > STALE_AFTER_MS ? 'unknown' : 'usable';
  }

  /**
   * Refused here at once, and on the other replicas at their next poll. A
   * failed write to the log is kept and written again at every poll until it
   * lands: the caller has already revoked the grant in the store, so a blip
   * must not leave the other replicas accepting its access tokens.
   */
  async add(grantId: string): Promise<void> {
    this.#remember(grantId);
    this.#unpublished.add(grantId);
    await this.#publish();
  }

  async #publish(): Promise<void> {
    for (const grantId of this.#unpublished) {
      try {
        await this.deps.store.appendToLog(this.#key, grantId, this.#retentionMs);
        this.#unpublished.delete(grantId);
      } catch (err) {
        this.deps.logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'revoked grants: cannot write to the list; will retry');
        return;
      }
    }
  }

  /** One read of the log; concurrent callers share it. Never rejects. */
  poll(): Promise<void> {
    this.#reading ??= this.#read().finally(() => (this.#reading = undefined));
    return this.#reading;
  }

  async #read(): Promise<void> {
    const startedAt = Date.now();
    if (this.#unpublished.size > 0) await this.#publish();
    try {
      const entries = await this.deps.store.readLog(this.#key, this.#cursor === 0 ? 0 : this.#cursor - REREAD_MS);
      for (const { member, at } of entries) {
        this.#remember(member);
        if (at > this.#cursor) this.#cursor = at;
      }
      this.#forgetExpired(startedAt);
      this.#lastReadStartedAt = startedAt;
      this.deps.metrics.revocationSyncs.labels('ok').inc();
      this.deps.metrics.revocationLastRead.set(startedAt / 1000);
      if (this.#failing) this.deps.logger.info('revoked grants: the list is read again');
      this.#failing = false;
    } catch (err) {
      this.deps.metrics.revocationSyncs.labels('error').inc();
      // Once per outage, not once a second.
      if (!this.#failing) this.deps.logger.warn({ err: err instanceof Error ? err.message : String(err) }, 'revoked grants: cannot read the list from the store');
      this.#failing = true;
    }
  }

  #remember(grantId: string): void {
    if (!this.#revoked.has(grantId)) this.#revoked.set(grantId, Date.now() + this.#retentionMs);
  }

  #forgetExpired(now: number): void {
    // Insertion order is expiry order: stop at the first one still needed.
    for (const [grantId, until] of this.#revoked) {
      if (until > now) break;
      this.#revoked.delete(grantId);
    }
  }
}
