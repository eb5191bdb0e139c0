// How many entries each key class may hold in the memory store, and what
// happens at that bound. Every class (a key's namespace) has a budget of its
// own, so a flood of one class — `initialize` writing session bindings,
// /authorize writing pending authorizations — only ever pushes out entries of
// that class, never a grant, a registration or another class's entry.
import { NEVER_EVICTED_CLASSES, PENDING_AUTHORIZATION_CLASS, RATE_LIMIT_CLASS } from './key-names.js';
import { perOwnerShare } from './owner-shares.js';

export interface ClassBudget {
  /** Upper bound on the class's live entries. */
  maxEntries: number;
  /**
   * At the bound: `evict` drops the class's least recently used entry;
   * `refuse` keeps every entry until its TTL and fails the new write
   * (StoreUnavailableError, so 503), as Redis does under `noeviction`.
   */
  whenFull: 'evict' | 'refuse';
  /**
   * Entries with one owner part of their value (owned-value.ts: the user) under
   * one key prefix (all but the key's last part): a user's session bindings on one route. Over this many, that owner's
   * oldest goes, not another owner's entry.
   */
  perOwner?: number;
}

/** Flood classes get a tenth of `max_entries`, and never under this: enough for every user mid-login on a busy replica. */
const MIN_FLOOD_CLASS_BUDGET = 1000;

/**
 * The budget of `keyClass` for a store of `maxEntries`: every class may hold
 * `maxEntries` entries; the unauthenticated flood classes a tenth of that
 * (at least 1000); one user (whatever its clients) at most a tenth of the session budget per route
 * (at most 1000; owner-shares.ts), so it takes ten users flooding together to push out
 * another user's session.
 */
export function memoryClassBudget(keyClass: string, maxEntries: number): ClassBudget {
  if (keyClass === PENDING_AUTHORIZATION_CLASS || keyClass === RATE_LIMIT_CLASS) {
    return { maxEntries: Math.max(MIN_FLOOD_CLASS_BUDGET, Math.floor(maxEntries / 10)), whenFull: 'evict' };
  }
  if (NEVER_EVICTED_CLASSES.includes(keyClass)) return { maxEntries, whenFull: 'refuse' };
  // A user's share (owner-shares.ts, the same on Redis): past it, that user's own oldest entry goes.
  const perOwner = perOwnerShare(keyClass, maxEntries);
  return perOwner === undefined ? { maxEntries, whenFull: 'evict' } : { maxEntries, whenFull: 'evict', perOwner };
}
