// A user's share of one key class, the one notion both backends bound by
// (DESIGN.md §8.3, K81): records that name their user in the value
// (owned-value.ts) — session bindings, task owners, event ids, pending
// upstream connects — are counted per user and key prefix (the route), and past
// the share that user's own oldest record goes, never another user's. The
// memory store keeps the count in its class LRU (memory-class-cache.ts), the
// Redis store in a sorted set per user (redis-owner-shares.ts).
import { EVENT_ID_CLASS, SESSION_BINDING_CLASS, TASK_OWNER_CLASS, UPSTREAM_CONNECT_CLASS } from './key-names.js';
import { ownerPartOf } from './owned-value.js';

/** The `max_entries` a share derives from where the store has none (Redis): the memory store's default, so both give a user the same share. */
export const DEFAULT_SHARE_BASIS = 100_000;

/** A client that reconnects all day stays far under this; past it, only its own oldest sessions go (so too its oldest task owners and event ids). */
const MAX_SESSIONS_PER_PRINCIPAL = 1000;

/** One user starts a few connections to upstream ASes at once; past this, only that user's oldest pending ones go. */
const MAX_PENDING_CONNECTS_PER_PRINCIPAL = 100;

/** Classes whose entries name their principal in the value, shared per principal and route as sessions are. */
const PER_PRINCIPAL_CLASSES: readonly string[] = [SESSION_BINDING_CLASS, TASK_OWNER_CLASS, EVENT_ID_CLASS];

/**
 * How many records of `keyClass` one user may hold under one key prefix, for a
 * store of `maxEntries` (default DEFAULT_SHARE_BASIS): a tenth of it, at most
 * 1000 (100 pending connects), at least 1; undefined for a class not shared per user.
 */
export function perOwnerShare(keyClass: string, maxEntries = DEFAULT_SHARE_BASIS): number | undefined {
  const tenth = Math.floor(maxEntries / 10);
  if (PER_PRINCIPAL_CLASSES.includes(keyClass)) return Math.max(1, Math.min(MAX_SESSIONS_PER_PRINCIPAL, tenth));
  if (keyClass === UPSTREAM_CONNECT_CLASS) return Math.max(1, Math.min(MAX_PENDING_CONNECTS_PER_PRINCIPAL, tenth));
  return undefined;
}

/** The key's class: its namespace, before the first `:` (a key without one is a class of its own, ''). */
export const keyClassOf = (key: string): string => key.slice(0, Math.max(0, key.indexOf(':')));

/** Whose share a record counts against: its key without the last part (the class and route), and its value's owner part (the user). */
export const shareOwnerOf = (key: string, value: string): string => `${key.slice(0, key.lastIndexOf(':'))}\n${ownerPartOf(value)}`;
