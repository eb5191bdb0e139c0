// In-process store for a single replica: LRUs bounded by entry count, with
// a TTL on every entry. Node runs it on one thread, so get+delete is atomic.
// Key classes that unauthenticated requests write (pending authorizations,
// rate-limit counters) each live in an LRU of their own: a flood of them
// evicts only its own kind, never a session binding, grant, consent or
// registration in the main LRU.
import { LRUCache } from 'lru-cache';
import { PENDING_AUTHORIZATION_CLASS, RATE_LIMIT_CLASS } from './key-names.js';
import type { LogEntry, Store } from './store.js';
import { assertTtl } from './ttl.js';

export interface MemoryStoreOptions {
  /** Upper bound on entries of the main LRU; the least recently used entry goes first. */
  maxEntries: number;
  /** Entry budgets of the key classes kept apart from the main LRU (default: `floodClassBudgets(maxEntries)`). */
  classBudgets?: Readonly<Record<string, number>>;
}

/** A tenth of the main budget, and never under this: enough for every user mid-login on a busy replica. */
const MIN_FLOOD_CLASS_BUDGET = 1000;

/** The classes a flood writes, each with its own budget beside `maxEntries`. */
function floodClassBudgets(maxEntries: number): Record<string, number> {
  const budget = Math.max(MIN_FLOOD_CLASS_BUDGET, Math.floor(maxEntries / 10));
  return { [PENDING_AUTHORIZATION_CLASS]: budget, [RATE_LIMIT_CLASS]: budget };
}

export class MemoryStore implements Store {
  readonly kind = 'memory' as const;
  readonly #main: LRUCache<string, string>;
  readonly #byClass = new Map<string, LRUCache<string, string>>();
  /** Time-ordered logs (appendToLog): member → stamp in stamp order; outside the LRUs, so no flood evicts a revocation. */
  readonly #logs = new Map<string, { members: Map<string, number>; expiresAt: number }>();

  constructor(options: MemoryStoreOptions) {
    this.#main = new LRUCache<string, string>({ max: options.maxEntries, ttlAutopurge: false });
    for (const [name, max] of Object.entries(options.classBudgets ?? floodClassBudgets(options.maxEntries))) {
      this.#byClass.set(name, new LRUCache<string, string>({ max, ttlAutopurge: false }));
    }
  }

  async get(key: string): Promise<string | undefined> {
    return this.#cacheOf(key).get(key);
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    this.#cacheOf(key).set(key, value, { ttl: assertTtl(ttlMs) });
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    const ttl = assertTtl(ttlMs);
    const cache = this.#cacheOf(key);
    // has() treats an expired entry as absent.
    if (cache.has(key)) return false;
    cache.set(key, value, { ttl });
    return true;
  }

  async take(key: string): Promise<string | undefined> {
    const cache = this.#cacheOf(key);
    const value = cache.get(key);
    if (value !== undefined) cache.delete(key);
    return value;
  }

  async increment(key: string, ttlMs: number): Promise<number> {
    const ttl = assertTtl(ttlMs);
    const cache = this.#cacheOf(key);
    // get() drops an expired counter, so a new window starts at 1 with a new TTL.
    const count = Number(cache.get(key) ?? 0) + 1;
    cache.set(key, String(count), { ttl, noUpdateTTL: true });
    return count;
  }

  async appendToLog(key: string, member: string, retentionMs: number): Promise<void> {
    const retention = assertTtl(retentionMs);
    const now = Date.now();
    const members = this.#liveLog(key, now)?.members ?? new Map<string, number>();
    // Re-inserted, so the map stays in stamp order and the oldest come first.
    members.delete(member);
    members.set(member, now);
    for (const [old, at] of members) {
      if (at >= now - retention) break;
      members.delete(old);
    }
    this.#logs.set(key, { members, expiresAt: now + retention });
  }

  async readLog(key: string, sinceMs: number): Promise<LogEntry[]> {
    const entries: LogEntry[] = [];
    for (const [member, at] of this.#liveLog(key, Date.now())?.members ?? []) if (at > sinceMs) entries.push({ member, at });
    return entries;
  }

  /** As Redis does with the log's key: gone `retention` after the last append. */
  #liveLog(key: string, now: number) {
    const log = this.#logs.get(key);
    if (log && log.expiresAt <= now) this.#logs.delete(key);
    return log && log.expiresAt > now ? log : undefined;
  }

  async delete(key: string): Promise<void> {
    this.#cacheOf(key).delete(key);
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.#main.clear();
    this.#logs.clear();
    for (const cache of this.#byClass.values()) cache.clear();
  }

  /** The LRU of the key's class (its namespace, before the first `:`), or the main one. */
  #cacheOf(key: string): LRUCache<string, string> {
    const colon = key.indexOf(':');
    return (colon > 0 && this.#byClass.get(key.slice(0, colon))) || this.#main;
  }
}
