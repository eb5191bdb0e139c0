// The forwarder of a legacy HTTP+SSE route (`upstream: { sse: ... }`), a
// sibling of http-forwarder.ts behind the Forwarder interface. Clients speak
// Streamable HTTP to it: a POST carrying `initialize` starts a session (its
// own upstream GET stream), later POSTs and the GET stream go to the session
// named by `Mcp-Session-Id` once the session hook admitted it for this
// principal, and DELETE ends it. Any other POST without a session (a
// 2026-07-28 client) goes to the principal's own session, which the gateway
// opened (probed, and initialized if legacy) itself (../stateless-init.ts), as on stdio routes. Authentication, policy and the credential
// swap ran before, as for any route; `ctx.injected` goes on the GET and on
// every POST.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { principalKey, userKey } from '../../auth/principal.js';
import type { RouteConfig, SseUpstreamConfig } from '../../config/types.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { writeError } from '../../errors/write-error.js';
import type { ForwardContext, Forwarder, ProxyLogger, ProxyMetrics, SessionHook } from '../forwarder.js';
import { isForwardedMethod, methodNotAllowed } from '../forwarded-methods.js';
import { isModernRequest } from '../modern-error-status.js';
import { StreamQuota } from '../stream-quota.js';
import { readClientMessages } from './messages.js';
import { SseScope } from './sse-scope.js';
import type { ClientAccepts } from './sse-session.js';
import { SseSessions } from './sse-sessions.js';
import { sessionGone } from './upstream-connection.js';

export interface SseForwarderDeps {
  session: SessionHook;
  logger?: ProxyLogger;
  metrics?: ProxyMetrics;
}

/** What the client's Accept lets the reply be; neither is 406's business (Streamable HTTP clients send both). */
function accepts(req: IncomingMessage): ClientAccepts {
  const accept = (req.headers.accept ?? '*/*').toLowerCase();
  const any = accept.includes('*/*');
  return {
    json: any || accept.includes('application/json') || accept.includes('application/*'),
    eventStream: any || accept.includes('text/event-stream') || accept.includes('text/*'),
    modern: isModernRequest(req.headers),
  };
}

const sessionRequired = () => new GatewayError(400, 'invalid_request', 'Mcp-Session-Id header is required (a session starts with initialize)');

/** The route's `upstream` is the SSE URL. */
export function createSseForwarder(route: RouteConfig & { sse: SseUpstreamConfig }, deps: SseForwarderDeps): Forwarder {
  const limits = { timeoutMs: route.upstreamTimeoutMs, maxBytes: route.maxBodyBytes };
  const scope = new SseScope(route.path, limits, deps.session, deps.logger, deps.metrics);
  const sessions = new SseSessions(new URL(route.upstream), route.sse, scope);
  const streams = new StreamQuota(route.maxGetStreamsPerUser);

  async function dispatch(req: IncomingMessage, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    // Node joins repeated headers with ", ", which no session id minted here contains.
    const raw = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(raw) ? raw.join(', ') : raw;
    if (sessionId === undefined) {
      if (req.method !== 'POST') throw sessionRequired();
      const messages = readClientMessages(ctx.body);
      if (!messages.initialize) return sessions.statelessPost(res, ctx, messages, accepts(req));
      return sessions.start(res, ctx, messages, accepts(req));
    }
    await scope.session.admit(sessionId, ctx.auth);
    const session = sessions.get(sessionId);
    // Bound to this principal in the store, and (belt and braces) held here for it: else ended, or another replica's.
    if (session === undefined || session.owner !== principalKey(ctx.auth)) throw sessionGone();
    if (req.method === 'GET') return session.openStream(res, ctx.transform);
    if (req.method === 'DELETE') {
      session.end('deleted');
      res.writeHead(200).end();
      return;
    }
    return session.post(res, ctx, readClientMessages(ctx.body), accepts(req));
  }

  return {
    async forward(req, res, ctx) {
      if (!isForwardedMethod(req.method)) return writeError(res, methodNotAllowed());
      // A listen is a stream held open: one user holds at most its share of them (stream-quota.ts).
      if (ctx.longLived === true && req.method === 'POST' && !streams.admit(userKey(ctx.auth), res)) return;
      try {
        await dispatch(req, res, ctx);
      } catch (err) {
        writeError(res, scope.failure(err));
      }
    },
    // Shutdown, or the last route table holding it gone (gateway/shared-forwarders.ts): every session ends.
    close: () => sessions.close(),
  };
}
