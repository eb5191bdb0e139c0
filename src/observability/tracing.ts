// What the request path knows of tracing: a span it can annotate, end and
// hand on, and the Tracing that opens one per request. No OpenTelemetry SDK
// here: it lives in tracing-sdk.ts, built by the wiring only when an endpoint
// is configured. Without one, nothing gets a Tracing at all, and every step
// skips its spans on `tracing === undefined` / `span === undefined`: no span
// object, no context, no provider (DESIGN §7.3: tracing off costs nothing).
import type { IncomingHttpHeaders } from 'node:http';

export type SpanValue = string | number | boolean;
export type SpanAttributes = Readonly<Record<string, SpanValue>>;

/** The W3C trace context of a span, for the outgoing request it stands for. */
export interface TraceHeaders {
  traceparent: string;
  tracestate?: string;
}

export interface GatewaySpan {
  set(key: string, value: SpanValue): void;
  /** The answer's HTTP status; 5xx marks the span failed. `errorType` (an error code) says why, for any status. */
  setStatus(httpStatus: number, errorType?: string): void;
  /** A failure without an HTTP status (a verifier, a store call, a cut upstream body). */
  fail(errorType: string): void;
  /** A child: `client` for a call that leaves the process (upstream, Redis), else `internal`. */
  child(name: string, kind: 'internal' | 'client', attributes?: SpanAttributes): GatewaySpan;
  /** This span as the parent of a request it makes: `traceparent`, and `tracestate` when the trace has one. */
  traceHeaders(): TraceHeaders;
  /** Runs `work` with this span as what `Tracing.current()` returns, across its awaits (store calls find their parent so). */
  within<T>(work: () => T): T;
  end(): void;
}

export interface Tracing {
  /**
   * One server span for an incoming request. A valid `traceparent` (and
   * `tracestate`) of the client continues: the span is its child.
   */
  serverSpan(name: string, headers: IncomingHttpHeaders, attributes: SpanAttributes): GatewaySpan;
  /** The open, recorded span whose `within` the caller runs in; undefined outside any, or once it ended. */
  current(): GatewaySpan | undefined;
  /** Flushes what is pending, within a bounded time, and stops exporting. */
  shutdown(): Promise<void>;
}

/**
 * `work` as a child span of the current request's span (a token
 * verification, a store call), ended when it settles; just `work` when there
 * is no tracing or no open span. A failure is named by the error's `code`
 * (GatewayError) or `name`, never its message.
 */
export function traced<T>(tracing: Tracing | undefined, name: string, kind: 'internal' | 'client', attributes: SpanAttributes, work: () => Promise<T>): Promise<T> {
  const span = tracing?.current()?.child(name, kind, attributes);
  if (span === undefined) return work();
  return work().then(
    (result) => {
      span.end();
      return result;
    },
    (err: unknown) => {
      span.fail(errorTypeOf(err));
      span.end();
      throw err;
    },
  );
}

function errorTypeOf(err: unknown): string {
  if (typeof err !== 'object' || err === null) return 'error';
  const { code, name } = err as { code?: unknown; name?: unknown };
  return typeof code === 'string' ? code : typeof name === 'string' ? name : 'error';
}
