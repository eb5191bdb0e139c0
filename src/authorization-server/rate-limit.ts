// Fixed-window counters in the store, shared by every replica. The Store has
// no atomic increment, so concurrent requests may each see the same count:
// the limit is approximate under bursts (by at most the burst's width), which
// is enough to keep floods from filling the store.
import { GatewayError } from '../errors/gateway-error.js';
import { rateLimitKey } from '../store/keys.js';
import type { Store } from '../store/store.js';

export interface RateLimit {
  max: number;
  windowMs: number;
}

export class RateLimiter {
  constructor(
    private readonly store: Store,
    private readonly bucket: string,
    private readonly limit: RateLimit,
  ) {
    if (!(limit.max >= 1 && limit.windowMs >= 1)) throw new RangeError(`rate limit ${bucket}: max and windowMs must be positive`);
  }

  /** 429 when `subject` has used up the current window. */
  async check(subject: string): Promise<void> {
    const { key, retryAfterMs } = this.slot(subject);
    const used = Number((await this.store.get(key)) ?? 0);
    if (used >= this.limit.max) {
      throw new GatewayError(429, 'too_many_requests', 'Too many requests; try again later', {
        headers: { 'retry-after': String(Math.ceil(retryAfterMs / 1000)) },
      });
    }
  }

  /** Counts one use by `subject` in the current window. */
  async record(subject: string): Promise<void> {
    const { key, retryAfterMs } = this.slot(subject);
    const used = Number((await this.store.get(key)) ?? 0);
    await this.store.set(key, String(used + 1), retryAfterMs);
  }

  private slot(subject: string): { key: string; retryAfterMs: number } {
    const now = Date.now();
    const window = Math.floor(now / this.limit.windowMs);
    return { key: rateLimitKey(this.bucket, `${window}|${subject}`), retryAfterMs: (window + 1) * this.limit.windowMs - now };
  }
}
