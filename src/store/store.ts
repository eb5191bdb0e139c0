// The storage contract every backend implements (in the manner of
// oidc-provider's adapter). Values are strings; every write has a TTL so the
// store stays bounded; keys come only from `keys.ts`.

export interface Store {
  readonly kind: 'memory' | 'redis';
  get(key: string): Promise<string | undefined>;
  /** Write with a mandatory time-to-live in milliseconds. */
  set(key: string, value: string, ttlMs: number): Promise<void>;
  /** Write only when the key is absent; true when this call wrote it. */
  setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean>;
  /** Atomically read and delete: of concurrent takers exactly one gets the value. */
  take(key: string): Promise<string | undefined>;
  /**
   * Atomically adds one to a counter and returns the new count; the first
   * increment creates it with `ttlMs`, later ones keep that expiry (a fixed window).
   */
  increment(key: string, ttlMs: number): Promise<number>;
  delete(key: string): Promise<void>;
  /** Resolves when the backend answers; rejects (StoreUnavailableError) otherwise. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** The backend did not answer within its bounded time, or is down. */
export class StoreUnavailableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}
