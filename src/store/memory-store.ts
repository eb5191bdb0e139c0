// In-process store for a single replica: every key class (a key's namespace)
// in a bounded LRU of its own, with a TTL on every entry. Node runs it on one
// thread, so get+delete is atomic. A flood of one class (session bindings from
// `initialize`, pending authorizations from /authorize) evicts only its own
// kind; revocations and spent one-time values are never evicted at all
// (memory-class-budgets.ts says which class gets what).
import { memoryClassBudget, type ClassBudget } from './memory-class-budgets.js';
import { MemoryClassCache } from './memory-class-cache.js';
import { MemoryLogs } from './memory-logs.js';
import { keyClassOf } from './owner-shares.js';
import { admitSlidingWindow, assertAdmitRequest, slidingWindowTtlMs } from './sliding-window.js';
import type { Admission, AdmitRequest, LogEntry, Store } from './store.js';
import { assertTtl } from './ttl.js';

/** A log's members are bounded by their writers (principal-tasks: 1000); the store's own bound is never below that. */
const MIN_LOG_MEMBERS = 1000;

export interface MemoryStoreOptions {
  /** The entry budget each key class derives from (`store.max_entries`). */
  maxEntries: number;
  /** The budget of a key class (default: `memoryClassBudget(keyClass, maxEntries)`). */
  budgetOf?: (keyClass: string) => ClassBudget;
}

export class MemoryStore implements Store {
  readonly kind = 'memory' as const;
  readonly #budgetOf: (keyClass: string) => ClassBudget;
  readonly #classes = new Map<string, MemoryClassCache>();
  /** Time-ordered logs (appendToLog): outside the LRUs, so no flood evicts a revocation. */
  readonly #logs: MemoryLogs;

  constructor(options: MemoryStoreOptions) {
    this.#budgetOf = options.budgetOf ?? ((keyClass) => memoryClassBudget(keyClass, options.maxEntries));
    this.#logs = new MemoryLogs(options.maxEntries, Math.max(options.maxEntries, MIN_LOG_MEMBERS));
  }

  async get(key: string): Promise<string | undefined> {
    return this.#cacheOf(key).get(key);
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    this.#cacheOf(key).set(key, value, assertTtl(ttlMs));
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    const ttl = assertTtl(ttlMs);
    const cache = this.#cacheOf(key);
    // has() treats an expired entry as absent.
    if (cache.has(key)) return false;
    cache.set(key, value, ttl);
    return true;
  }

  async compareAndSet(key: string, expected: string | undefined, next: string | undefined, ttlMs: number): Promise<boolean> {
    const ttl = assertTtl(ttlMs);
    const cache = this.#cacheOf(key);
    // One thread: the comparison and the write happen with no other call in between.
    if (cache.get(key) !== expected) return false;
    if (next === undefined) cache.delete(key);
    else cache.set(key, next, ttl);
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
    cache.set(key, String(count), ttl, true);
    return count;
  }

  async admit(key: string, request: AdmitRequest): Promise<Admission> {
    assertAdmitRequest(request);
    const cache = this.#cacheOf(key);
    // One thread: this read, decision and write happen with no other call in between.
    const counts = new Map<number, number>(JSON.parse(cache.get(key) ?? '[]') as [number, number][]);
    const admission = admitSlidingWindow(counts, Date.now(), request);
    if (admission.admitted) cache.set(key, JSON.stringify([...counts]), slidingWindowTtlMs(request.windowMs));
    return admission;
  }

  async appendToLog(key: string, member: string, retentionMs: number): Promise<void> {
    this.#logs.append(key, member, assertTtl(retentionMs));
  }

  async readLog(key: string, sinceMs: number): Promise<LogEntry[]> {
    return this.#logs.read(key, sinceMs);
  }

  async delete(key: string): Promise<void> {
    this.#cacheOf(key).delete(key);
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.#logs.clear();
    for (const cache of this.#classes.values()) cache.clear();
  }

  /** The cache of the key's class: its namespace, before the first `:` (a key without one is a class of its own). */
  #cacheOf(key: string): MemoryClassCache {
    const keyClass = keyClassOf(key);
    let cache = this.#classes.get(keyClass);
    if (!cache) {
      cache = new MemoryClassCache(keyClass, this.#budgetOf(keyClass));
      this.#classes.set(keyClass, cache);
    }
    return cache;
  }
}
