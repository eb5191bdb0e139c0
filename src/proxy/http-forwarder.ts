// The HTTP forwarder: one route's upstream reached over HTTP (Streamable HTTP
// MCP servers). It moves bytes: the request out through an undici pool, the
// answer back through an Exchange (http-exchange.ts). The proxy hop is on
// every request, so it is undici's dispatch API writing straight into Node's
// ServerResponse: no promise per chunk, no intermediate Readable, no
// AbortSignal, no web streams. Whose session an id is, and how a body is
// rewritten, are the hooks' business (forwarder.ts).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Pool } from 'undici';
import { userKey } from '../auth/principal.js';
import type { RouteConfig } from '../config/types.js';
import { writeError } from '../errors/write-error.js';
import type { ForwardContext, Forwarder, ProxyLogger, ProxyMetrics, SessionHook } from './forwarder.js';
import { isForwardedMethod, methodNotAllowed, type ForwardedMethod } from './forwarded-methods.js';
import { buildUpstreamHeaders } from './headers.js';
import { Exchange, ExchangeScope } from './http-exchange.js';
import { StreamQuota } from './stream-quota.js';

export interface HttpForwarderDeps {
  session: SessionHook;
  logger?: ProxyLogger;
  metrics?: ProxyMetrics;
}

/**
 * Below the 5 s idle timeout of common upstream servers (uvicorn, Node) that
 * do not announce it, so the pool never reuses a socket being closed.
 */
const IDLE_CONNECTION_MS = 4_000;
/** The longest an upstream's own `Keep-Alive: timeout=` is believed. */
const MAX_ANNOUNCED_IDLE_MS = 600_000;
/**
 * A connection not made by then is not coming: the client gets its 504 now
 * rather than after a long upstream timeout (or sooner, if that is shorter).
 */
const MAX_CONNECT_MS = 10_000;

export function createHttpForwarder(route: RouteConfig, deps: HttpForwarderDeps): Forwarder {
  const target = new URL(route.upstream);
  const upstreamPath = target.pathname + target.search;
  // Read once: URL's getters build a new string on every call, and this one ran per request.
  const hostHeader = target.host;
  const timeoutMs = route.upstreamTimeoutMs;
  const pool = createPool(target.origin, timeoutMs);
  const scope = new ExchangeScope(route.path, deps.session, timeoutMs, deps.logger, deps.metrics, route.upstream, route.identityHeaders);
  const streams = new StreamQuota(route.maxGetStreamsPerUser);
  // The upstream's address only: its URL's query may carry a credential.
  const spanAttributes = { 'server.address': target.hostname, 'server.port': Number(target.port || (target.protocol === 'https:' ? 443 : 80)) };

  // Not `async`: without a session id (every request before initialize's
  // answer, and every stateless one) the exchange's own promise is returned,
  // with no promise around it.
  function forward(req: IncomingMessage, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    const method = req.method;
    if (!isForwardedMethod(method)) {
      writeError(res, methodNotAllowed());
      return Promise.resolve();
    }
    // A GET or a `subscriptions/listen` is a stream held open: one user holds at most its share of them.
    if ((ctx.longLived ?? method === 'GET') && !streams.admit(userKey(ctx.auth), res)) return Promise.resolve();
    // Node joins repeated headers with ", ", which no valid session id contains.
    const raw = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(raw) ? raw.join(', ') : raw;
    if (sessionId === undefined) return dispatch(req, res, ctx, method, undefined);
    return scope.session.admit(sessionId, ctx.auth).then(
      () => dispatch(req, res, ctx, method, sessionId),
      (err: unknown) => writeError(res, scope.failure(err as Error)),
    );
  }

  function dispatch(req: IncomingMessage, res: ServerResponse, ctx: ForwardContext, method: ForwardedMethod, sessionId: string | undefined): Promise<void> {
    const span = ctx.span?.child(method, 'client', spanAttributes);
    return new Promise<void>((resolve) => {
      const exchange = new Exchange(scope, method, res, ctx.auth, sessionId, resolve, ctx.transform, span);
      exchange.onRejected = ctx.rejected;
      // A body to rewrite must arrive readable: no content coding.
      const injected = ctx.transform ? { ...ctx.injected, 'accept-encoding': 'identity' } : ctx.injected;
      pool.dispatch(
        {
          path: upstreamPath,
          method,
          headers: buildUpstreamHeaders(req.rawHeaders, { hostHeader, injected, trace: span?.traceHeaders(), strip: scope.identityNames }),
          body: ctx.body.length > 0 || method === 'POST' ? ctx.body : null,
        },
        exchange,
      );
    });
  }

  return {
    forward,
    async close() {
      scope.endStreams();
      await pool.close();
    },
  };
}

function createPool(origin: string, timeoutMs: number): Pool {
  return new Pool(origin, {
    // No cap: every open event stream holds one upstream connection, and a
    // capped pool would queue all later requests behind the open streams.
    // Idle connections close after keepAliveTimeout, so the pool stays small.
    connections: null,
    pipelining: 1,
    keepAliveTimeout: IDLE_CONNECTION_MS,
    keepAliveMaxTimeout: MAX_ANNOUNCED_IDLE_MS,
    connect: { timeout: Math.min(MAX_CONNECT_MS, timeoutMs) },
    headersTimeout: timeoutMs,
    // Event streams may idle for as long as they like (SECURITY H40); other
    // bodies are watched by the scope's stalledBodies.
    bodyTimeout: 0,
  });
}
