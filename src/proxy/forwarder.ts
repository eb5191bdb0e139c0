// What a protected route hands an authorised request to, as types only. The
// HTTP forwarder (http-forwarder.ts) is one implementation; the other upstream
// transports (stdio, legacy SSE: docs/architecture.md) are meant to be its siblings
// behind this same interface, taking the same hooks.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AuthContext } from '../auth/principal.js';
import type { GatewaySpan } from '../observability/tracing.js';
import type { ResponseTransform } from './response-transform.js';
import type { UpstreamErrorKind } from './upstream-failure.js';

export interface Forwarder {
  /** Answers `res` in every case (upstream response or JSON error); never rejects. Resolves when the response is over. */
  forward(req: IncomingMessage, res: ServerResponse, ctx: ForwardContext): Promise<void>;
  /** Shutdown: ends open event streams now, lets other requests finish, closes the upstream connections. */
  close(): Promise<void>;
}

/**
 * A response answering into memory (an aggregated route's request to one upstream:
 * aggregate/captured-exchange.ts) also takes the JSON value a forwarder serialised into it, so its
 * reader does not parse the text again. A forwarder hands it only a value whose JSON.stringify is
 * exactly the body it wrote.
 */
export interface AnswerValueSink {
  keepAnswerValue(value: unknown): void;
}

export interface ForwardContext {
  auth: AuthContext;
  /** The whole request body, already read (and checked) by the caller. */
  body: Buffer;
  /** The upstream credential headers (lower-case names). */
  injected: Readonly<Record<string, string>>;
  /** Rewrites a 2xx response body on its way back (tools/list filtering). */
  transform?: ResponseTransform;
  /**
   * The request's server span, with tracing on: the upstream call is its
   * child, and that child is the parent the upstream learns of (`traceparent`,
   * in place of the client's).
   */
  span?: GatewaySpan;
  /**
   * The upstream answered 401 to the credential. Given, nothing is written to the client for that
   * answer: the caller renews the credential and forwards again, or answers itself.
   */
  rejected?: () => void;
  /**
   * The gateway refused the request at its own bound on upstream sessions (session admission: the
   * caller's share, or the route's), before anything reached the upstream: its 503 says nothing of
   * the upstream's health (an aggregated route's link tells it from the upstream's own 503).
   */
  admissionRefused?: () => void;
  /** The request opens a stream meant to stay open (long-lived-request.ts); unset: a GET only. */
  longLived?: boolean;
  /**
   * An aggregated route: the upstream each resource URI of the request was judged as served by
   * (policy `match.upstream`); the request goes there, whatever the session learns meanwhile.
   */
  servedBy?: ReadonlyMap<string, string>;
}

/**
 * The session hook: the forwarder knows where a transport carries a session
 * id (for HTTP, `Mcp-Session-Id`); this says whose session it is (SECURITY H42).
 */
export interface SessionHook {
  /** Before anything is sent upstream: rejects (a GatewayError) unless the session is this principal's. */
  admit(sessionId: string, auth: AuthContext): Promise<void>;
  /** The upstream issued a new session id: bound before the client sees it; rejects (502) to refuse the answer. */
  bind(sessionId: string, auth: AuthContext): Promise<void>;
  /** The upstream accepted the session's DELETE. Never throws: the binding expires on its own. */
  release(sessionId: string): void;
}

export interface ProxyLogger {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Per forwarder, so per route: the caller binds the route label. */
export interface ProxyMetrics {
  upstreamError(kind: UpstreamErrorKind): void;
  streamOpened(): void;
  streamClosed(): void;
}
