// The storage contract every backend implements (in the manner of
// oidc-provider's adapter). Values are strings; every write has a TTL so the
// store stays bounded; keys come only from `key-names.ts`.
import type { Admission, AdmitRequest } from './sliding-window.js';

export type { Admission, AdmitRequest } from './sliding-window.js';

export interface Store {
  readonly kind: 'memory' | 'redis';
  get(key: string): Promise<string | undefined>;
  /** Write with a mandatory time-to-live in milliseconds. */
  set(key: string, value: string, ttlMs: number): Promise<void>;
  /** Write only when the key is absent; true when this call wrote it. */
  setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean>;
  /**
   * Atomically replaces the value at `key` when it is still `expected`
   * (undefined: absent) with `next` (undefined: delete), as one step on every
   * replica (a Lua script on Redis): false, and nothing written, when another
   * writer changed it first. Read-modify-write records (an index revocation
   * depends on) loop on it instead of overwriting a concurrent change.
   */
  compareAndSet(key: string, expected: string | undefined, next: string | undefined, ttlMs: number): Promise<boolean>;
  /** Atomically read and delete: of concurrent takers exactly one gets the value. */
  take(key: string): Promise<string | undefined>;
  /**
   * Atomically adds one to a counter and returns the new count; the first
   * increment creates it with `ttlMs`, later ones keep that expiry (a fixed window).
   */
  increment(key: string, ttlMs: number): Promise<number>;
  /**
   * Adds `member` to the time-ordered log at `key`, stamped (ms) by the
   * backend's one clock, so every replica reads the same order. Members
   * stamped over `retentionMs` before an append are dropped by it, and the
   * whole log expires `retentionMs` after its last append.
   */
  appendToLog(key: string, member: string, retentionMs: number): Promise<void>;
  /**
   * Rate-limit admission (sliding-window.ts): admits `request.cost` uses when
   * the window at `key`, by the backend's one clock, has room for them, and
   * counts them; refused, counts nothing and says when they would fit. Atomic:
   * concurrent callers on every replica never admit more than `limit` together.
   */
  admit(key: string, request: AdmitRequest): Promise<Admission>;
  /** The log's members stamped after `sinceMs` (0: all), with their stamps, oldest first. */
  readLog(key: string, sinceMs: number): Promise<LogEntry[]>;
  delete(key: string): Promise<void>;
  /** Resolves when the backend answers; rejects (StoreUnavailableError) otherwise. */
  ping(): Promise<void>;
  /**
   * The backend's own clock, ms since the epoch (Redis `TIME`): the one clock
   * every replica can read. Only a shared backend has it (store-clock.ts).
   */
  time?(): Promise<number>;
  close(): Promise<void>;
  /** Change notices between replicas (a shared backend only; the memory store has one replica). */
  readonly notices?: StoreNotices;
}

/**
 * Notices between replicas, for an in-process cache of store values that must
 * end on every replica when the value changes: a writer publishes, every
 * subscriber (the writer's replica included) hears it. Delivery is best
 * effort: while `live()` is false notices may be missed, and a cache must not
 * be used.
 */
export interface StoreNotices {
  subscribe(channel: string, onNotice: (message: string) => void): NoticeSubscription;
  publish(channel: string, message: string): Promise<void>;
}

export interface NoticeSubscription {
  /** Subscribed and connected now: no notice published from here on is missed. */
  live(): boolean;
  /** Bumped each time the subscription stops being live: a value kept under an older epoch may have missed a notice. */
  epoch(): number;
  /** No more notices to this subscriber (its owner is replaced, as by a reload): nothing keeps it reachable. */
  close(): void;
}

/** One member of a time-ordered log (`Store.appendToLog`). */
export interface LogEntry {
  member: string;
  /** ms since the epoch, by the backend's clock. */
  at: number;
}

/** The backend did not answer within its bounded time, or is down. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}
