// Whether an upstream of an aggregated route is served (DESIGN §8.2, issue 22
// item 5): a failure (no answer in time, a cut or non-2xx answer) marks it down
// for a short while, during which its calls fail at once and lists leave it
// out; then the next request tries it again, so it comes back without a
// restart. One per upstream per route, shared by every client session.
import type { ProxyLogger } from '../forwarder.js';

/** How long a failed upstream is left alone before it is tried again. */
export const DOWN_FOR_MS = 5_000;

export interface AggregateMetrics {
  /** 1 served, 0 down (`mag_aggregate_upstream_up`). */
  upstreamUp(upstream: string, up: boolean): void;
  /** A list answered without this upstream (`mag_aggregate_left_out_total`). */
  leftOut(upstream: string): void;
}

export class UpstreamHealth {
  private downUntil = 0;

  constructor(
    private readonly route: string,
    readonly name: string,
    private readonly logger?: ProxyLogger,
    private readonly metrics?: AggregateMetrics,
    private readonly now: () => number = Date.now,
  ) {
    metrics?.upstreamUp(name, true);
  }

  get down(): boolean {
    return this.now() < this.downUntil;
  }

  failed(err: unknown): void {
    const wasUp = this.downUntil === 0;
    this.downUntil = this.now() + DOWN_FOR_MS;
    if (wasUp) {
      this.logger?.warn({ route: this.route, upstream: this.name, err }, 'aggregated upstream down: left out of lists, its calls fail until it answers again');
      this.metrics?.upstreamUp(this.name, false);
    }
  }

  served(): void {
    if (this.downUntil === 0) return;
    this.downUntil = 0;
    this.logger?.warn({ route: this.route, upstream: this.name }, 'aggregated upstream answers again');
    this.metrics?.upstreamUp(this.name, true);
  }

  leftOut(): void {
    this.metrics?.leftOut(this.name);
  }
}
