// Fixed-window limits in the store, shared by every replica. The Store has no
// atomic increment, so each use claims one of `max` numbered slots with SET NX:
// of concurrent requests each gets a different slot or none, so a burst cannot
// pass the limit. A `next` hint (written only after slot n-1 was claimed, so
// every slot below it is taken) lets a request start its scan there.
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

  /** 429 when `subject` has used up the current window (writes nothing). */
  async check(subject: string): Promise<void> {
    const { retryAfterMs, next } = this.slot(subject);
    if (Number((await this.store.get(next)) ?? 0) >= this.limit.max) throw this.tooMany(retryAfterMs);
  }

  /** Claims one use by `subject` in the current window; 429 when every slot is taken. */
  async record(subject: string): Promise<void> {
    const { retryAfterMs, next, slotKey } = this.slot(subject);
    for (let n = Number((await this.store.get(next)) ?? 0); n < this.limit.max; n++) {
      if (await this.store.setIfAbsent(slotKey(n), '1', retryAfterMs)) {
        await this.store.set(next, String(n + 1), retryAfterMs);
        return;
      }
    }
    throw this.tooMany(retryAfterMs);
  }

  private tooMany(retryAfterMs: number): GatewayError {
    return new GatewayError(429, 'too_many_requests', 'Too many requests; try again later', {
      headers: { 'retry-after': String(Math.ceil(retryAfterMs / 1000)) },
    });
  }

  private slot(subject: string) {
    const now = Date.now();
    const window = Math.floor(now / this.limit.windowMs);
    const base = `${window}|${subject}`;
    return {
      next: rateLimitKey(this.bucket, `${base}|next`),
      slotKey: (n: number) => rateLimitKey(this.bucket, `${base}|${n}`),
      retryAfterMs: (window + 1) * this.limit.windowMs - now,
    };
  }
}
