// One key class's entries in the memory store: an LRU bounded by the class's
// budget (memory-class-budgets.ts), a TTL on every entry. A class that must not
// forget refuses a new key when full instead of evicting one; a class bounded
// per owner drops an over-budget owner's own oldest entry.
import { LRUCache } from 'lru-cache';
import type { ClassBudget } from './memory-class-budgets.js';
import { shareOwnerOf } from './owner-shares.js';
import { StoreUnavailableError } from './store.js';

export class MemoryClassCache {
  readonly #cache: LRUCache<string, string>;
  /** With a per-owner bound: owner → its keys, oldest written first. */
  readonly #byOwner = new Map<string, Set<string>>();

  constructor(
    readonly keyClass: string,
    readonly budget: ClassBudget,
  ) {
    this.#cache = new LRUCache<string, string>({
      max: budget.maxEntries,
      ttlAutopurge: false,
      // Told of every entry that leaves (evicted, deleted, expired, overwritten), so the owner index stays exact.
      ...(budget.perOwner !== undefined && { dispose: (value: string, key: string) => this.#disown(key, value) }),
    });
  }

  get(key: string): string | undefined {
    return this.#cache.get(key);
  }

  /** An expired entry counts as absent. */
  has(key: string): boolean {
    return this.#cache.has(key);
  }

  /** `keepTtl`: an existing entry keeps its expiry (a fixed-window counter). */
  set(key: string, value: string, ttl: number, keepTtl = false): void {
    const { perOwner } = this.budget;
    if (this.budget.whenFull === 'refuse') this.#makeRoomWithoutEvicting(key);
    // Before the write: were the class full too, the LRU would otherwise drop another owner's entry.
    if (perOwner !== undefined) this.#makeRoomInOwner(key, value, perOwner);
    this.#cache.set(key, value, { ttl, noUpdateTTL: keepTtl });
    if (perOwner !== undefined) this.#own(key, value);
  }

  delete(key: string): void {
    this.#cache.delete(key);
  }

  clear(): void {
    this.#cache.clear();
    this.#byOwner.clear();
  }

  /** Only expired entries may go; with none, the write fails rather than forget a live one. */
  #makeRoomWithoutEvicting(key: string): void {
    if (this.#cache.size < this.budget.maxEntries || this.#cache.has(key)) return;
    this.#cache.purgeStale();
    if (this.#cache.size >= this.budget.maxEntries) {
      throw new StoreUnavailableError(`memory store: the ${this.keyClass} key class is full (${this.budget.maxEntries} entries, each kept until its TTL)`);
    }
  }

  /** A new key for an owner at its bound: that owner's oldest entries go. */
  #makeRoomInOwner(key: string, value: string, perOwner: number): void {
    const keys = this.#byOwner.get(shareOwnerOf(key, value));
    if (!keys || keys.has(key)) return;
    for (const oldest of keys) {
      if (keys.size < perOwner) break;
      this.#cache.delete(oldest);
      keys.delete(oldest);
    }
  }

  /** The key becomes its owner's newest. */
  #own(key: string, value: string): void {
    const owner = shareOwnerOf(key, value);
    const keys = this.#byOwner.get(owner) ?? new Set<string>();
    keys.delete(key);
    keys.add(key);
    this.#byOwner.set(owner, keys);
  }

  #disown(key: string, value: string): void {
    const owner = shareOwnerOf(key, value);
    const keys = this.#byOwner.get(owner);
    keys?.delete(key);
    if (keys?.size === 0) this.#byOwner.delete(owner);
  }
}
