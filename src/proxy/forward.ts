// Forwards one authorised request to the route's upstream and streams the
// answer back. The proxy hop is on every request, so it is undici's dispatch
// API writing straight into Node's ServerResponse: no promise per chunk, no
// intermediate Readable, no AbortSignal, no web streams.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Pool, type Dispatcher } from 'undici';
import type { AuthContext } from '../auth/principal.js';
import type { RouteConfig } from '../config/types.js';
import { GatewayError } from '../errors/gateway-error.js';
import { buildUpstreamHeaders, filterResponseHeaders } from './headers.js';
import type { SessionBinding } from './session-binding.js';
import { IdleSweep, type IdleWatched } from './idle-sweep.js';
import { writeError } from '../errors/write-error.js';

export type UpstreamErrorKind = 'unreachable' | 'timeout' | 'reset';

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

export interface ForwarderDeps {
  sessions: SessionBinding;
  logger?: ProxyLogger;
  metrics?: ProxyMetrics;
}

export interface ForwardContext {
  auth: AuthContext;
  /** The whole request body, already read (and checked) by the caller. */
  body: Buffer;
  /** The upstream credential headers (lower-case names). */
  injected: Readonly<Record<string, string>>;
  /** Rewrites a 2xx response body on its way back (tools/list filtering). */
  transform?: ResponseTransform;
}

/** A rewrite of one response body, chunk by chunk. Throwing cuts the response (fail closed). */
export interface BodyTransform {
  /** The bytes to send now for this upstream chunk (empty: held back for now). */
  push(chunk: Buffer): Buffer;
  /** Whatever is still held back, once the upstream body is complete. */
  end(): Buffer;
}

/** Picks the body transform for a 2xx response from its headers, or none. */
export type ResponseTransform = (headers: Readonly<Record<string, string | string[] | undefined>>) => BodyTransform | undefined;

export interface Forwarder {
  /** Answers `res` in every case (upstream response or JSON error); never rejects. Resolves when the response is over. */
  forward(req: IncomingMessage, res: ServerResponse, ctx: ForwardContext): Promise<void>;
  /** Shutdown: ends open event streams now, lets other requests finish, closes the upstream connections. */
  close(): Promise<void>;
}

type Method = 'GET' | 'POST' | 'DELETE';
const METHODS = new Set<string>(['GET', 'POST', 'DELETE']);
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH']);
const TIMEOUT = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);
const SHUT_DOWN = new Set(['UND_ERR_CLOSED', 'UND_ERR_DESTROYED']);

// A body transform refused the upstream's answer: the response is cut, never passed unfiltered.
class TransformFailed extends Error {}

// Reasons the gateway itself cancels an exchange; they are not upstream failures.
class Cancelled extends Error {
  constructor(readonly why: 'client' | 'shutdown' | 'idle') {
    super(`cancelled: ${why}`);
  }
}

const isEventStream = (contentType: string | string[] | undefined) =>
  typeof contentType === 'string' && contentType.trimStart().toLowerCase().startsWith('text/event-stream');

const single = (value: string | string[] | undefined) => (typeof value === 'string' ? value : undefined);

const DECIMAL = /^\d{1,15}$/;

export function createForwarder(route: RouteConfig, deps: ForwarderDeps): Forwarder {
  const target = new URL(route.upstream);
  const upstreamPath = target.pathname + target.search;
  const routeName = route.path;
  const timeoutMs = route.upstreamTimeoutMs;
  const { sessions, logger, metrics } = deps;
  const pool = new Pool(target.origin, {
    // No cap: every open event stream holds one upstream connection, and a
    // capped pool would queue all later requests behind the open streams.
    // Idle connections close after keepAliveTimeout, so the pool stays small.
    connections: null,
    pipelining: 1,
    // Below the 5 s idle timeout of common upstream servers (uvicorn, Node)
    // that do not announce it, so the pool never reuses a socket being closed.
    keepAliveTimeout: 4_000,
    keepAliveMaxTimeout: 600_000,
    connect: { timeout: Math.min(10_000, timeoutMs) },
    headersTimeout: timeoutMs,
    // Event streams may idle for as long as they like (SECURITY H40); other
    // bodies are watched by stalledBodies below.
    bodyTimeout: 0,
  });
  const openStreams = new Set<Exchange>();
  const stalledBodies = new IdleSweep<Exchange>(timeoutMs, (exchange) => exchange.cancel('idle'));

  function upstreamFailure(err: Error): GatewayError {
    if (err instanceof GatewayError) return err;
    const code = (err as { code?: unknown }).code;
    if (typeof code !== 'string') {
      logger?.error({ route: routeName, err }, 'proxy failure');
      return new GatewayError(500, 'server_error', 'Internal error', { cause: err });
    }
    if (SHUT_DOWN.has(code)) return new GatewayError(503, 'temporarily_unavailable', 'Gateway is shutting down');
    const kind: UpstreamErrorKind = TIMEOUT.has(code) ? 'timeout' : UNREACHABLE.has(code) ? 'unreachable' : 'reset';
    metrics?.upstreamError(kind);
    logger?.warn({ route: routeName, kind, code }, 'upstream request failed');
    return kind === 'timeout'
      ? new GatewayError(504, 'gateway_timeout', 'Upstream did not answer in time')
      : new GatewayError(502, 'bad_gateway', kind === 'unreachable' ? 'Upstream unreachable' : 'Upstream connection failed');
  }

  /** One request/response through the proxy: undici's handler, writing to `res`. */
  class Exchange implements Dispatcher.DispatchHandler, IdleWatched {
    controller: Dispatcher.DispatchController | undefined;
    cancelled: Cancelled | undefined;
    headSent = false;
    stream = false;
    finished = false;
    lastActivity = 0;
    idleSlot = -1;
    /** Bytes of a body of declared length still to come; -1 when unknown. */
    untilEnd = -1;
    /** The last bytes of such a body, held for end(): one write to the client instead of two. */
    lastChunk: Buffer | undefined;
    body: BodyTransform | undefined;

    constructor(
      readonly method: Method,
      readonly res: ServerResponse,
      readonly auth: AuthContext,
      readonly sessionId: string | undefined,
      readonly done: () => void,
      readonly transform?: ResponseTransform,
    ) {
      // The client went away, or the response was ended from outside (drain).
      // `on`, not `once`: 'close' comes once, and once() would wrap the listener per request.
      res.on('close', this.onClientGone);
    }

    readonly onClientGone = (): void => this.cancel('client');

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

    onResponseStart(controller: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
      // Informational answers (103 Early Hints) are not relayed; the final one follows.
      if (statusCode < 200) return;
      if (statusCode === 401) {
        // The upstream refused the gateway's own credential: a gateway
        // misconfiguration, and its challenge names an AS the client must not
        // be sent to (SECURITY H36).
        logger?.warn({ route: routeName, status: statusCode }, 'upstream rejected the gateway credential');
        controller.abort(new GatewayError(502, 'bad_gateway', "Upstream rejected the gateway's credential"));
        return;
      }
      if (statusCode < 300) {
        if (this.method === 'DELETE' && this.sessionId !== undefined) void release(this.sessionId);
        const issued = single(headers['mcp-session-id']);
        if (issued !== undefined && issued !== this.sessionId) {
          // Bound before the client sees the id, so it is never usable unbound;
          // the upstream body waits (paused) meanwhile.
          controller.pause();
          sessions.bind(routeName, issued, this.auth).then(
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
          return;
        }
      }
      this.writeHead(statusCode, headers);
    }

    writeHead(statusCode: number, headers: Record<string, string | string[] | undefined>): void {
      const res = this.res;
      // Ended from outside meanwhile (shutdown drain): nothing more to write.
      if (res.writableEnded) return this.cancel('client');
      const out = filterResponseHeaders(headers);
      if (this.transform && statusCode >= 200 && statusCode < 300) {
        this.body = this.transform(headers);
        // The rewritten body has another length: sent chunked instead.
        if (this.body) delete out['content-length'];
      }
      const stream = isEventStream(headers['content-type']);
      if (stream) {
        // Tell buffering proxies in front of us to pass events through at once.
        out['x-accel-buffering'] = 'no';
        out['cache-control'] ??= 'no-cache';
      }
      res.writeHead(statusCode, out);
      this.headSent = true;
      if (stream) {
        this.stream = true;
        res.flushHeaders();
        openStreams.add(this);
        metrics?.streamOpened();
      } else {
        stalledBodies.watch(this);
        const declared = single(headers['content-length']);
        if (!this.body && declared !== undefined && DECIMAL.test(declared)) this.untilEnd = Number(declared);
      }
    }

    onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
      const res = this.res;
      if (res.writableEnded) return this.cancel('client');
      stalledBodies.touch(this);
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
      // Backpressure: a slow client pauses the upstream read, not our memory.
      if (!res.write(chunk)) {
        controller.pause();
        res.once('drain', () => {
          stalledBodies.touch(this);
          controller.resume();
        });
      }
    }

    onResponseEnd(controller: Dispatcher.DispatchController): void {
      let tail = this.lastChunk;
      if (this.body && !this.res.writableEnded) {
        try {
          tail = this.body.end();
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
      this.finish();
      if (!first || res.destroyed) return;
      if (err instanceof Cancelled && err.why === 'client') return;
      if (err instanceof TransformFailed) {
        logger?.warn({ route: routeName, reason: err.message }, 'upstream response refused by the response filter');
        if (this.headSent) res.destroy();
        else writeError(res, new GatewayError(502, 'bad_gateway', 'Upstream response could not be filtered'));
        return;
      }
      if (err instanceof Cancelled && err.why === 'idle') {
        metrics?.upstreamError('timeout');
        logger?.warn({ route: routeName, kind: 'timeout' }, 'upstream body stalled');
      } else if (this.headSent && !(err instanceof Cancelled)) {
        metrics?.upstreamError('reset');
        logger?.warn({ route: routeName, kind: 'reset', errno: (err as { code?: unknown }).code }, 'upstream body cut short');
      }
      if (!this.headSent) writeError(res, upstreamFailure(err));
      // An event stream cut short ends cleanly (the client reconnects with
      // Last-Event-ID); any other body is destroyed, so the client cannot take
      // a truncated body for a whole one.
      else if (this.stream && !res.writableEnded) res.end();
      else res.destroy();
    }

    finish(): void {
      if (this.finished) return;
      this.finished = true;
      stalledBodies.unwatch(this);
      if (this.stream) {
        openStreams.delete(this);
        metrics?.streamClosed();
      }
      this.done();
    }
  }

  async function release(sessionId: string): Promise<void> {
    try {
      await sessions.release(routeName, sessionId);
    } catch (err) {
      // The binding expires with its TTL; the client's DELETE did succeed.
      logger?.warn({ route: routeName, err }, 'could not release a session binding');
    }
  }

  async function forward(req: IncomingMessage, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    const method = req.method ?? '';
    if (!METHODS.has(method)) {
      writeError(res, new GatewayError(405, 'method_not_allowed', 'Method not allowed', { headers: { allow: 'GET, POST, DELETE' } }));
      return;
    }
    // Node joins repeated headers with ", ", which no valid session id contains.
    const raw = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(raw) ? raw.join(', ') : raw;
    if (sessionId !== undefined) {
      try {
        await sessions.check(routeName, sessionId, ctx.auth);
      } catch (err) {
        writeError(res, err instanceof GatewayError ? err : upstreamFailure(err as Error));
        return;
      }
    }
    return new Promise<void>((resolve) => {
      const exchange = new Exchange(method as Method, res, ctx.auth, sessionId, resolve, ctx.transform);
      // A body to rewrite must arrive readable: no content coding.
      const injected = ctx.transform ? { ...ctx.injected, 'accept-encoding': 'identity' } : ctx.injected;
      pool.dispatch(
        {
          path: upstreamPath,
          method: method as Method,
          headers: buildUpstreamHeaders(req.rawHeaders, { hostHeader: target.host, injected }),
          body: ctx.body.length > 0 || method === 'POST' ? ctx.body : null,
        },
        exchange,
      );
    });
  }

  return {
    forward,
    async close() {
      for (const exchange of openStreams) exchange.cancel('shutdown');
      await pool.close();
    },
  };
}
