// This replica's reading of the shared store's clock (Redis `TIME`), so every
// replica judges a DPoP proof's `iat` by one clock and a replay marker, which
// the store expires by that same clock, covers every replica's window (K85).
// Read at start and every 30 s, never per request: `nowMs()` is arithmetic.
// Between readings time advances by the monotonic clock, so a step of this
// replica's wall clock changes nothing. An offset past `max_clock_skew` is
// corrected like any other, and said once (a log line, a metric): it means the
// replica's other clocks (tokens' `exp`, nonces) are off too.
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';

/** Readings once synchronised; a failed or imprecise one is retried sooner. */
export const CLOCK_SAMPLE_EVERY_MS = 30_000;
const CLOCK_RETRY_EVERY_MS = 1000;

export interface StoreClockOptions {
  /** The store's clock (`Store.time`); undefined: one replica, whose own clock is the clock. */
  readStoreTime?: () => Promise<number>;
  /** `store.max_clock_skew` in ms. */
  allowedSkewMs: number;
  logger: Logger;
  metrics?: Pick<Metrics, 'storeClockOffset' | 'storeClockSkewExceeded'>;
  /** This replica's wall clock, ms since the epoch (default `Date.now`): tests give replicas clocks apart. */
  wallNow?: () => number;
  /** A monotonic clock in ms (default `performance.now`). */
  monotonicNow?: () => number;
}

/** A reading: the store's time at a monotonic instant. */
interface Anchor {
  storeMs: number;
  monotonicMs: number;
}

export class StoreClock {
  #allowedSkewMs: number;
  #anchor: Anchor | undefined;
  #exceeded = false;
  #failing = false;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  readonly #wallNow: () => number;
  readonly #monotonicNow: () => number;

  constructor(private readonly options: StoreClockOptions) {
    this.#allowedSkewMs = options.allowedSkewMs;
    this.#wallNow = options.wallNow ?? Date.now;
    this.#monotonicNow = options.monotonicNow ?? (() => performance.now());
  }

  /** Now, ms since the epoch: the store's clock where one is shared and was read, else this replica's. */
  nowMs(): number {
    const anchor = this.#anchor;
    return anchor ? anchor.storeMs + (this.#monotonicNow() - anchor.monotonicMs) : this.#wallNow();
  }

  nowSeconds(): number {
    return Math.floor(this.nowMs() / 1000);
  }

  /** The first reading is awaited (bounded by the store's command timeout); failing, it is retried every second. */
  async start(): Promise<void> {
    if (!this.options.readStoreTime) return;
    await this.sample();
    this.#schedule();
  }

  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }

  /** A reload may change `max_clock_skew`. */
  setAllowedSkew(ms: number): void {
    this.#allowedSkewMs = ms;
  }

  /** One reading of the store's clock; the offset is the store's minus this replica's wall clock. */
  async sample(): Promise<void> {
    const read = this.options.readStoreTime;
    if (!read) return;
    const [m0, w0] = [this.#monotonicNow(), this.#wallNow()];
    let storeMs: number;
    try {
      storeMs = await read();
    } catch (err) {
      return this.#failed(`the store's clock could not be read: ${err instanceof Error ? err.message : String(err)}`);
    }
    const [m1, w1] = [this.#monotonicNow(), this.#wallNow()];
    // The store read its clock somewhere within the round trip: the midpoint is off by at most half of it.
    if (m1 - m0 > this.#allowedSkewMs) return this.#failed(`the store took ${Math.round(m1 - m0)} ms to tell its time, more than store.max_clock_skew`);
    this.#anchor = { storeMs, monotonicMs: (m0 + m1) / 2 };
    if (this.#failing) this.options.logger.info("the store's clock is read again: DPoP proofs are judged by it");
    this.#failing = false;
    this.#report(storeMs, (w0 + w1) / 2);
  }

  #report(storeMs: number, wallMs: number): void {
    const offsetMs = storeMs - wallMs;
    this.options.metrics?.storeClockOffset.set(offsetMs / 1000);
    const exceeded = Math.abs(offsetMs) > this.#allowedSkewMs;
    this.options.metrics?.storeClockSkewExceeded.set(exceeded ? 1 : 0);
    if (exceeded === this.#exceeded) return;
    this.#exceeded = exceeded;
    const clocks = { replica_clock: new Date(wallMs).toISOString(), store_clock: new Date(storeMs).toISOString(), offset_ms: Math.round(offsetMs), max_clock_skew_ms: this.#allowedSkewMs };
    if (exceeded) {
      this.options.logger.warn(
        clocks,
        "this replica's clock is further from the store's than store.max_clock_skew: DPoP proofs are judged by the store's clock, but tokens' exp and DPoP nonces by this one; synchronise it (NTP)",
      );
    } else {
      this.options.logger.info(clocks, "this replica's clock is back within store.max_clock_skew of the store's");
    }
  }

  /** Said once per spell of failures; until a reading succeeds the last one (or this replica's clock) serves. */
  #failed(why: string): void {
    if (this.#failing) return;
    this.#failing = true;
    const fallback = this.#anchor ? 'its last reading, advanced by this replica' : "this replica's own clock";
    this.options.logger.warn({ max_clock_skew_ms: this.#allowedSkewMs }, `${why}; DPoP proofs are judged by ${fallback} until it answers`);
  }

  #schedule(): void {
    if (this.#stopped) return;
    const delay = this.#failing || !this.#anchor ? CLOCK_RETRY_EVERY_MS : CLOCK_SAMPLE_EVERY_MS;
    this.#timer = setTimeout(() => {
      void this.sample().finally(() => this.#schedule());
    }, delay);
    this.#timer.unref();
  }
}
