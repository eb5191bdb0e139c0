// Whether an upstream of an aggregated route is served (DESIGN §8.2, issue 22
// item 5): a failure (no answer in time, a cut or non-2xx answer) marks it down
// for a short while, during which its calls fail at once and lists leave it
// out; then the next request tries it again, so it comes back without a
// restart. One per upstream per route, shared by every client session.
import type { ProxyLogger } from '../forwarder.js';
import { AggregateUpstreamError } from './captured-exchange.js';
import { isCallersOwn } from './caller-answer.js';

/** How long a failed upstream is left alone before it is tried again. */
export const DOWN_FOR_MS = 5_000;

export interface AggregateMetrics {
  /** 1 served, 0 down (`mag_aggregate_upstream_up`). */
  upstreamUp(upstream: string, up: boolean): void;
  /** A list answered without this upstream (`mag_aggregate_left_out_total`). */
  leftOut(upstream: string): void;
  /**
   * One request to this upstream, answered or failed, and why it failed
   * (`mag_aggregate_upstream_request_duration_seconds`, `mag_aggregate_upstream_errors_total`).
   */
  request?(upstream: string, seconds: number, failure: string | undefined): void;
}

export class UpstreamHealth {
  private downUntil = 0;

  constructor(
    private readonly route: string,
    readonly name: string,
    private readonly logger?: ProxyLogger,
    private readonly metrics?: AggregateMetrics,
    private readonly now: () => number = Date.now,
    /** `session`: one client session's own server (stdio), whose every failure is that session's alone. */
    private readonly scope: 'route' | 'session' = 'route',
  ) {
    metrics?.upstreamUp(name, true);
  }

  get down(): boolean {
    return this.now() < this.downUntil;
  }

  /** A failed request: marks the upstream down only when the failure says the server itself is down (saysUpstreamIsDown). */
  failedWith(method: string, err: unknown): void {
    if (err instanceof AggregateUpstreamError && err.reason === 'cancelled') return; // the client's doing, never the upstream's
    if (isCallersOwn(err)) return; // the caller's own account to connect or credential that failed, never the upstream's
    if (this.scope === 'session' || saysUpstreamIsDown(method, err)) this.failed(err);
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

  /** A request to this upstream took `seconds`; `failure` says why it failed, if it did (it marks nothing down: failedWith does). */
  measured(seconds: number, failure: string | undefined): void {
    this.metrics?.request?.(this.name, seconds, failure);
  }
}

/** Requests every caller makes alike: their failing says the server is down, not that one caller was refused. */
const SERVER_WIDE = new Set(['initialize', 'tools/list', 'prompts/list', 'resources/list', 'resources/templates/list']);

/**
 * Whether a failure says the upstream itself is down, for everyone. An HTTP
 * 4xx is an answer to this caller (its credential, its rights, its rate
 * limit), whatever the method: it never marks the upstream down, lest one user
 * take a shared server from all. A call's own timeout, cut (too large) or
 * unreadable answer, or 5xx, is that call's; only 502/503 (no connection, the
 * server says it is unavailable) say the server is down. A list or initialize
 * that fails otherwise (5xx, timeout, cut, unreadable) does, since every
 * caller sends the same.
 */
export function saysUpstreamIsDown(method: string, err: unknown): boolean {
  if (!(err instanceof AggregateUpstreamError)) return SERVER_WIDE.has(method);
  if (err.status !== undefined && err.status < 500) return false;
  if (SERVER_WIDE.has(method)) return true;
  return err.status === 502 || err.status === 503;
}
