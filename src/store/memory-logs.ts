// The memory store's time-ordered logs (Store.appendToLog): member → stamp, in
// stamp order, per key. They hold what must not be forgotten early (revoked
// grants, the grants of an IdP session, a principal's tasks), so no flood may
// evict a live one; instead expired logs are swept as the map grows, and past
// the budget a new log or member is refused (503), as Redis refuses writes
// under `noeviction`. Without the sweep a log read never again stayed forever.
import { StoreUnavailableError, type LogEntry } from './store.js';

/** Sweeps run when the number of logs reaches this, then twice the live count: amortised O(1) per append. */
const FIRST_SWEEP_AT = 1024;

interface Log {
  members: Map<string, number>;
  expiresAt: number;
}

export class MemoryLogs {
  readonly #logs = new Map<string, Log>();
  #nextSweepAt = FIRST_SWEEP_AT;

  /**
   * `maxLogs`: the most logs held at once (`store.max_entries`, as every never-evicted class);
   * `maxMembers`: the most members of one log (its writers bound it already: a user's sign-ins,
   * 1000 tasks per principal; this only makes that a promise of the store's own).
   */
  constructor(
    readonly maxLogs: number,
    readonly maxMembers: number,
  ) {}

  /** As Redis's ZADD + EXPIRE: the member stamped now, members older than `retention` dropped, the log gone `retention` after this append. */
  append(key: string, member: string, retentionMs: number, now = Date.now()): void {
    const live = this.#live(key, now);
    if (!live) this.#makeRoomForNewLog(now);
    const members = live?.members ?? new Map<string, number>();
    // Re-inserted, so the map stays in stamp order and the oldest come first.
    members.delete(member);
    for (const [old, at] of members) {
      if (at >= now - retentionMs) break;
      members.delete(old);
    }
    if (members.size >= this.maxMembers) {
      throw new StoreUnavailableError(`memory store: a ${key.slice(0, key.indexOf(':') + 1)} log is full (${this.maxMembers} members, each kept until its retention)`);
    }
    members.set(member, now);
    this.#logs.set(key, { members, expiresAt: now + retentionMs });
  }

  /** The members stamped after `sinceMs`, oldest first. */
  read(key: string, sinceMs: number, now = Date.now()): LogEntry[] {
    const entries: LogEntry[] = [];
    for (const [member, at] of this.#live(key, now)?.members ?? []) if (at > sinceMs) entries.push({ member, at });
    return entries;
  }

  /** How many logs are held, expired ones not yet swept included (for tests and metrics). */
  get size(): number {
    return this.#logs.size;
  }

  clear(): void {
    this.#logs.clear();
    this.#nextSweepAt = FIRST_SWEEP_AT;
  }

  #live(key: string, now: number): Log | undefined {
    const log = this.#logs.get(key);
    if (!log) return undefined;
    if (log.expiresAt > now) return log;
    this.#logs.delete(key);
    return undefined;
  }

  #makeRoomForNewLog(now: number): void {
    if (this.#logs.size >= this.#nextSweepAt || this.#logs.size >= this.maxLogs) {
      for (const [key, log] of this.#logs) if (log.expiresAt <= now) this.#logs.delete(key);
      this.#nextSweepAt = Math.max(FIRST_SWEEP_AT, this.#logs.size * 2);
    }
    if (this.#logs.size >= this.maxLogs) {
      throw new StoreUnavailableError(`memory store: the logs are full (${this.maxLogs} logs, each kept until its retention)`);
    }
  }
}
