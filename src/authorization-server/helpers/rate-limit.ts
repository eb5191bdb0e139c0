// Fixed-window limits in the store, shared by every replica: one atomic
// counter per (bucket, subject, window), so concurrent requests each see a
// different count and a burst cannot pass the limit (Redis INCR, no
// read-modify-write race). A counter expires with its window.
import { GatewayError } from '../../errors/gateway-error.js';
import { rateLimitKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';

export interface RateLimit {
  max: number;
  windowMs: number;
}

export class RateLimiter {
  constructor(
    private readonly store: Store,
    readonly bucket: string,
    private readonly limit: RateLimit,
  ) {
    if (!(limit.max >= 1 && limit.windowMs >= 1)) throw new RangeError(`rate limit ${bucket}: max and windowMs must be positive`);
  }

  /** 429 when `subject` has used up the current window (writes nothing). */
  async check(subject: string): Promise<void> {
    const { key, retryAfterMs } = this.window(subject);
    if (Number((await this.store.get(key)) ?? 0) >= this.limit.max) throw this.tooMany(retryAfterMs);
  }

  /** Counts one use by `subject` in the current window; 429 when that use is over the limit. */
  async record(subject: string): Promise<void> {
    const { key, retryAfterMs } = this.window(subject);
    if ((await this.store.increment(key, retryAfterMs)) > this.limit.max) throw this.tooMany(retryAfterMs);
  }

  private tooMany(retryAfterMs: number): GatewayError {
    return new GatewayError(429, 'too_many_requests', 'Too many requests; try again later', {
      headers: { 'retry-after': String(Math.max(1, Math.ceil(retryAfterMs / 1000))) },
    });
  }

  private window(subject: string) {
    const now = Date.now();
    const window = Math.floor(now / this.limit.windowMs);
    return { key: rateLimitKey(this.bucket, `${window}|${subject}`), retryAfterMs: (window + 1) * this.limit.windowMs - now };
  }
}
