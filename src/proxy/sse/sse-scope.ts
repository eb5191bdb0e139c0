// What every session of one legacy SSE route shares: its limits, hooks,
// logger and metrics, and the one place that counts and logs an upstream
// failure and turns it into the client's answer.
import { GatewayError } from '../../errors/gateway-error.js';
import type { ProxyLogger, ProxyMetrics, SessionHook } from '../forwarder.js';
import { classifyUpstreamError, errorCode, upstreamErrorResponse, type UpstreamErrorKind } from '../upstream-failure.js';

export interface SseLimits {
  /** The route's `upstream_timeout`: for the endpoint event, and for each request's answer. */
  timeoutMs: number;
  /** The route's `max_body_bytes`: the largest upstream event, and what one client may leave unread. */
  maxBytes: number;
}

export class SseScope {
  constructor(
    readonly route: string,
    readonly limits: SseLimits,
    readonly session: SessionHook,
    readonly logger?: ProxyLogger,
    readonly metrics?: ProxyMetrics,
  ) {}

  /** Counts and logs a failure that is the upstream's; returns the client's answer to it. */
  upstreamError(kind: UpstreamErrorKind, msg: string, fields?: object): GatewayError {
    this.metrics?.upstreamError(kind);
    this.logger?.warn({ route: this.route, kind, ...fields }, msg);
    return kind === 'protocol' ? new GatewayError(502, 'bad_gateway', msg) : upstreamErrorResponse(kind);
  }

  /** The client's answer to anything an upstream exchange threw. */
  failure(err: unknown): GatewayError {
    if (err instanceof GatewayError) return err;
    const code = errorCode(err as Error);
    if (typeof code !== 'string') {
      this.logger?.error({ route: this.route, err }, 'proxy failure');
      return new GatewayError(500, 'server_error', 'Internal error', { cause: err });
    }
    const kind = classifyUpstreamError(code);
    if (kind === 'shutdown') return upstreamErrorResponse(kind);
    return this.upstreamError(kind, 'upstream request failed', { code });
  }
}
