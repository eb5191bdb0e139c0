// In-process store for a single replica: an LRU bounded by entry count, with
// a TTL on every entry. Node runs it on one thread, so get+delete is atomic.
import { LRUCache } from 'lru-cache';
import type { Store } from './store.js';
import { assertTtl } from './ttl.js';

export interface MemoryStoreOptions {
  /** Upper bound on entries; the least recently used entry goes first. */
  maxEntries: number;
}

export class MemoryStore implements Store {
  readonly kind = 'memory' as const;
  readonly #cache: LRUCache<string, string>;

  constructor(options: MemoryStoreOptions) {
    this.#cache = new LRUCache<string, string>({ max: options.maxEntries, ttlAutopurge: false });
  }

  async get(key: string): Promise<string | undefined> {
    return this.#cache.get(key);
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    this.#cache.set(key, value, { ttl: assertTtl(ttlMs) });
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    const ttl = assertTtl(ttlMs);
    // has() treats an expired entry as absent.
    if (this.#cache.has(key)) return false;
    this.#cache.set(key, value, { ttl });
    return true;
  }

  async take(key: string): Promise<string | undefined> {
    const value = this.#cache.get(key);
    if (value !== undefined) this.#cache.delete(key);
    return value;
  }

  async delete(key: string): Promise<void> {
    this.#cache.delete(key);
  }

  async ping(): Promise<void> {}

  async close(): Promise<void> {
    this.#cache.clear();
  }
}
