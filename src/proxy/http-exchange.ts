// One request/response through the HTTP forwarder: undici's dispatch handler,
// writing straight into Node's ServerResponse. It writes the head (after the
// session hook binds a new session id), streams the body with backpressure
// through the response transform, and ends the response honestly when the
// exchange fails. Everything the exchanges of one route share is in their
// ExchangeScope, built once per forwarder.
import { maskedUrl, SaidOnce } from '../errors/diagnosis.js';
import type { ServerResponse } from 'node:http';
import type { Dispatcher } from 'undici';
import type { AuthContext } from '../auth/principal.js';
import type { GatewaySpan } from '../observability/tracing.js';
import { GatewayError } from '../errors/gateway-error.js';
import { writeError } from '../errors/write-error.js';
import type { ProxyLogger, ProxyMetrics, SessionHook } from './forwarder.js';
import type { ForwardedMethod } from './forwarded-methods.js';
import { filterResponseHeaders, privateCacheControl } from './headers.js';
import { IdleSweep, type IdleWatched } from './idle-sweep.js';
import type { BodyTransform, ResponseTransform } from './response-transform.js';
import { classifyUpstreamError, errorCode, upstreamErrorResponse, type UpstreamErrorKind } from './upstream-failure.js';

type Headers = Record<string, string | string[] | undefined>;

// A body transform refused the upstream's answer: the response is cut, never passed unfiltered.
class TransformFailed extends Error {}

// Reasons the gateway itself cancels an exchange; they are not upstream failures.
class Cancelled extends Error {
  constructor(readonly why: 'client' | 'shutdown' | 'idle') {
    super(`cancelled: ${why}`);
  }
}

/** The upstream's 401 went to ForwardContext.rejected: the caller answers (a retry, or its own error). */
class RetryRequested extends Error {}

const isEventStream = (contentType: string | string[] | undefined) =>
  typeof contentType === 'string' && contentType.trimStart().toLowerCase().startsWith('text/event-stream');

/** A header's value when sent once; a repeated one (an array) counts as absent. */
const soleHeader = (value: string | string[] | undefined) => (typeof value === 'string' ? value : undefined);

const DECIMAL = /^\d{1,15}$/;

/** What the exchanges of one forwarder share: its route, hooks, open streams and stall watch. */
export class ExchangeScope {
  readonly openStreams = new Set<Exchange>();
  /** Event streams may idle for as long as they like (SECURITY H40); other bodies are cut once stalled this long. */
  readonly stalledBodies: IdleSweep<Exchange>;

  private readonly diagnosed = new SaidOnce();
  /** The route's identity_headers: the gateway's word, so a client's copy never passes, even when the token has no such claim. */
  readonly identityNames: ReadonlySet<string> | undefined;

  constructor(
    readonly route: string,
    readonly session: SessionHook,
    bodyIdleMs: number,
    readonly logger?: ProxyLogger,
    readonly metrics?: ProxyMetrics,
    /** The configured upstream URL, for diagnoses (masked when logged). */
    readonly upstream = '',
    identityHeaders: readonly { name: string }[] = [],
  ) {
    this.stalledBodies = new IdleSweep<Exchange>(bodyIdleMs, (exchange) => exchange.cancel('idle'));
    this.identityNames = identityHeaders.length > 0 ? new Set(identityHeaders.map((h) => h.name)) : undefined;
  }

  /**
   * A POST without a session (initialize, or a stateless request) answered
   * 404 or 405: the URL is not an MCP endpoint. Said once per status, as
   * `check --online` says it; the client still gets the upstream's answer.
   */
  diagnoseNotMcp(status: number): void {
    if (!this.diagnosed.first(String(status))) return;
    const hint = status === 404 ? 'is the path right? The gateway forwards to exactly this URL (an MCP endpoint usually ends in /mcp)' : 'POST is refused, so this is not a Streamable HTTP MCP endpoint';
    this.logger?.error({ route: this.route, cause: 'upstream_not_mcp', configured: maskedUrl(this.upstream), seen: status }, `upstream answered initialize with ${status}: ${hint} (check --online says the same)`);
  }

  /** Counts and logs a failure that is the upstream's. */
  upstreamError(kind: UpstreamErrorKind, msg: string, fields?: object): void {
    this.metrics?.upstreamError(kind);
    this.logger?.warn({ route: this.route, kind, ...fields }, msg);
  }

  /** The client's answer to an exchange that failed before the upstream's head was sent. */
  failure(err: Error): GatewayError {
    if (err instanceof GatewayError) return err;
    const code = errorCode(err);
    if (typeof code !== 'string') {
      this.logger?.error({ route: this.route, err }, 'proxy failure');
      return new GatewayError(500, 'server_error', 'Internal error', { cause: err });
    }
    const kind = classifyUpstreamError(code);
    if (kind !== 'shutdown') this.upstreamError(kind, 'upstream request failed', { code });
    return upstreamErrorResponse(kind);
  }

  /** Shutdown: event streams never end on their own, so they are ended cleanly now. */
  endStreams(): void {
    for (const exchange of this.openStreams) exchange.cancel('shutdown');
  }
}

/** `error.type` of a failed upstream call's span: why the gateway cancelled it, or the socket error's code. */
function failureType(err: Error): string {
  if (err instanceof Cancelled) return `cancelled_${err.why}`;
  if (err instanceof TransformFailed) return 'filter_refused';
  const code = errorCode(err);
  return typeof code === 'string' ? code : err.name;
}

const EXCHANGE = Symbol('exchange');
type Exchanged = ServerResponse & { [EXCHANGE]?: Exchange };

function cancelOnClientGone(this: Exchanged): void {
  this[EXCHANGE]?.cancel('client');
}

export class Exchange implements Dispatcher.DispatchHandler, IdleWatched {
  controller: Dispatcher.DispatchController | undefined;
  /** Told when the upstream answers 401 to the credential (ForwardContext.rejected); nothing is written to the client then. */
  onRejected: (() => void) | undefined;
  cancelled: Cancelled | undefined;
  headSent = false;
  stream = false;
  /** An event stream's head written but not yet sent (flushHead). */
  headPending = false;
  finished = false;
  lastActivity = 0;
  idleSlot = -1;
  /** Bytes of a body of declared length still to come; -1 when unknown. */
  untilEnd = -1;
  /** The last bytes of such a body, held for end(): one write to the client instead of two. */
  lastChunk: Buffer | undefined;
  body: BodyTransform | undefined;

  constructor(
    readonly scope: ExchangeScope,
    readonly method: ForwardedMethod,
    readonly res: ServerResponse,
    readonly auth: AuthContext,
    readonly sessionId: string | undefined,
    readonly done: () => void,
    readonly transform?: ResponseTransform,
    /** The upstream call's client span (tracing on): its status, failure and end are this exchange's. */
    readonly span?: GatewaySpan,
  ) {
    // The client went away, or the response was ended from outside (drain). One listener for every
    // response, which finds its exchange on it, not a closure per exchange; `on`, not `once`:
    // 'close' comes once, and once() would wrap the listener per request.
    (res as Exchanged)[EXCHANGE] = this;
    res.on('close', cancelOnClientGone);
  }

  cancel(why: Cancelled['why']): void {
    if (this.finished || this.cancelled) return;
    this.cancelled = new Cancelled(why);
    // A request still queued in the pool is aborted when it gets a connection.
    this.controller?.abort(this.cancelled);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.cancelled) controller.abort(this.cancelled);
  }

  onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: Headers): void {
    // Informational answers (103 Early Hints) are not relayed; the final one follows.
    if (statusCode < 200) return;
    this.span?.setStatus(statusCode);
    if (statusCode === 401) {
      // The upstream refused the gateway's own credential: a gateway
      // misconfiguration, and its challenge names an AS the client must not
      // be sent to (SECURITY H36).
      this.scope.logger?.warn({ route: this.scope.route, status: statusCode }, 'upstream rejected the gateway credential');
      // A credential that can renew itself (a user's own grant) is asked to, and the caller sends the request again: nothing is written here.
      if (this.onRejected) {
        this.onRejected();
        controller.abort(new RetryRequested());
        return;
      }
      controller.abort(new GatewayError(502, 'bad_gateway', "Upstream rejected the gateway's credential"));
      return;
    }
    if ((statusCode === 404 || statusCode === 405) && this.sessionId === undefined && this.method === 'POST') this.scope.diagnoseNotMcp(statusCode);
    if (statusCode < 300) {
      if (this.method === 'DELETE' && this.sessionId !== undefined) this.scope.session.release(this.sessionId);
      const issued = soleHeader(headers['mcp-session-id']);
      if (issued !== undefined && issued !== this.sessionId) return this.bindThenWriteHead(controller, issued, statusCode, headers);
    }
    this.writeHead(statusCode, headers);
  }

  /** A new session id is bound before the client sees it, so it is never usable unbound; the upstream body waits (paused) meanwhile. */
  bindThenWriteHead(controller: Dispatcher.DispatchController, issued: string, statusCode: number, headers: Headers): void {
    controller.pause();
    // undici calls back in the context of whichever request opened the socket: the span is named, not inherited.
    const bound = this.span ? this.span.within(() => this.scope.session.bind(issued, this.auth)) : this.scope.session.bind(issued, this.auth);
    bound.then(
      () => {
        if (this.finished) return;
        try {
          this.writeHead(statusCode, headers);
        } catch (err) {
          return controller.abort(err as Error);
        }
        if (!this.finished) controller.resume();
      },
      (err: Error) => controller.abort(err),
    );
  }

  writeHead(statusCode: number, headers: Headers): void {
    const res = this.res;
    // Ended from outside meanwhile (shutdown drain): nothing more to write.
    if (res.writableEnded) return this.cancel('client');
    const out = filterResponseHeaders(headers);
    if (this.transform) {
      this.body = this.transform(headers, statusCode);
      // The rewritten body has another length: sent chunked instead.
      if (this.body && !this.body.readsOnly) delete out['content-length'];
    }
    const stream = isEventStream(headers['content-type']);
    if (stream) {
      // Tell buffering proxies in front of us to pass events through at once.
      out['x-accel-buffering'] = 'no';
      out['cache-control'] ??= 'no-cache';
    }
    // A filtered answer is this caller's alone (tools/list filtering).
    if (this.body?.perCaller) out['cache-control'] = privateCacheControl(out['cache-control']);
    res.writeHead(statusCode, out);
    this.headSent = true;
    if (stream) {
      this.stream = true;
      // The head is not held back for a stream that says nothing yet, nor sent on its own when the
      // upstream's first event came in the same read: it goes out with that event (one write, one
      // read for the client), else alone once this read is handled.
      this.headPending = true;
      queueMicrotask(() => this.flushHead());
      this.scope.openStreams.add(this);
      this.scope.metrics?.streamOpened();
    } else {
      this.scope.stalledBodies.watch(this);
      const declared = soleHeader(headers['content-length']);
      if ((!this.body || this.body.readsOnly) && declared !== undefined && DECIMAL.test(declared)) this.untilEnd = Number(declared);
    }
  }

  /** An event stream's head, unless a write carried it already. */
  flushHead(): void {
    if (!this.headPending) return;
    this.headPending = false;
    if (!this.res.writableEnded && !this.res.destroyed) this.res.flushHeaders();
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    const res = this.res;
    if (res.writableEnded) return this.cancel('client');
    this.scope.stalledBodies.touch(this);
    if (this.body) {
      try {
        chunk = this.body.push(chunk);
      } catch (err) {
        return controller.abort(new TransformFailed((err as Error).message));
      }
      if (chunk.length === 0) return;
    }
    if (chunk.length === this.untilEnd) {
      this.lastChunk = chunk;
      return;
    }
    if (this.untilEnd > 0) this.untilEnd -= chunk.length;
    // This write carries the head, if it is still pending.
    this.headPending = false;
    // Backpressure: a slow client pauses the upstream read, not our memory.
    if (!res.write(chunk)) {
      controller.pause();
      res.once('drain', () => {
        this.scope.stalledBodies.touch(this);
        controller.resume();
      });
    }
  }

  onResponseEnd(controller: Dispatcher.DispatchController): void {
    let tail = this.lastChunk;
    if (this.body && !this.res.writableEnded) {
      try {
        // A reader's end() comes before the last bytes go out; they are the held chunk.
        const rest = this.body.end();
        if (!this.body.readsOnly) tail = rest;
      } catch (err) {
        return this.onResponseError(controller, new TransformFailed((err as Error).message));
      }
    }
    this.finish();
    if (this.res.writableEnded) return;
    if (tail !== undefined && tail.length > 0) this.res.end(tail);
    else this.res.end();
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, err: Error): void {
    const res = this.res;
    const first = !this.finished;
    if (first) this.span?.fail(failureType(err));
    this.finish();
    if (!first || res.destroyed || err instanceof RetryRequested) return;
    if (err instanceof Cancelled && err.why === 'client') return;
    if (err instanceof TransformFailed) {
      this.scope.logger?.warn({ route: this.scope.route, reason: err.message }, 'upstream response refused by the response filter');
      if (this.headSent) res.destroy();
      else writeError(res, new GatewayError(502, 'bad_gateway', 'Upstream response could not be filtered'));
      return;
    }
    if (err instanceof Cancelled && err.why === 'idle') this.scope.upstreamError('timeout', 'upstream body stalled');
    else if (this.headSent && !(err instanceof Cancelled)) this.scope.upstreamError('reset', 'upstream body cut short', { errno: errorCode(err) });
    if (!this.headSent) writeError(res, this.scope.failure(err));
    // An event stream cut short ends cleanly (the client reconnects with
    // Last-Event-ID); any other body is destroyed, so the client cannot take
    // a truncated body for a whole one.
    else if (this.stream && !res.writableEnded) res.end();
    else res.destroy();
  }

  finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.scope.stalledBodies.unwatch(this);
    this.span?.end();
    if (this.stream) {
      this.scope.openStreams.delete(this);
      this.scope.metrics?.streamClosed();
    }
    this.done();
  }
}
