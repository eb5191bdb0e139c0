// The stdio forwarder: a route whose upstream is a process the gateway starts
// (upstream: { stdio: ... }), behind the same Forwarder interface as the HTTP
// forwarder, so authentication, policy, filtering, session binding, metrics
// and audit run before it unchanged. Clients speak Streamable HTTP: an
// `initialize` POST starts a process and a session (the gateway mints the
// `Mcp-Session-Id` and binds it to the principal through the session hook),
// later POSTs, the GET stream and DELETE name that id. A POST without a
// session that is not `initialize` (a 2026-07-28 client) goes to the
// principal's own stateless process (../stateless-init.ts).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { principalKey, userKey, type AuthContext } from '../../auth/principal.js';
import type { RouteConfig, StdioUpstreamConfig } from '../../config/types.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { writeError } from '../../errors/write-error.js';
import type { ForwardContext, Forwarder } from '../forwarder.js';
import { isForwardedMethod, methodNotAllowed } from '../forwarded-methods.js';
import { isModernRequest, modernErrorStatus } from '../modern-error-status.js';
import { StreamQuota } from '../stream-quota.js';
import { carryTraceContext } from '../trace-meta.js';
import { isObject, isRequest, type Message } from './messages.js';
import { PostAnswer } from './post-answer.js';
import { ProcessPool } from './process-pool.js';
import { SseSink } from './sse-sink.js';
import { initializeStdio } from './stdio-handshake.js';
import type { StdioForwarderDeps } from './stdio-deps.js';
import type { StdioSession } from './stdio-session.js';

const unknownSession = () => new GatewayError(404, 'not_found', 'Unknown session');

/** Resolves once the response is over (ended, or the client went away). */
const responseOver = (res: ServerResponse) =>
  new Promise<void>((resolve) => {
    if (res.closed) resolve();
    else res.once('close', () => resolve());
  });

export function createStdioForwarder(route: RouteConfig & { stdio: StdioUpstreamConfig }, deps: StdioForwarderDeps): Forwarder {
  return new StdioForwarder(route, deps);
}

class StdioForwarder implements Forwarder {
  private readonly pool: ProcessPool;
  private readonly timeoutMs: number;
  private readonly streams: StreamQuota;

  constructor(
    private readonly route: RouteConfig & { stdio: StdioUpstreamConfig },
    private readonly deps: StdioForwarderDeps,
  ) {
    this.pool = new ProcessPool(route.path, route.stdio, route.maxBodyBytes, deps);
    this.timeoutMs = route.upstreamTimeoutMs;
    this.streams = new StreamQuota(route.maxGetStreamsPerUser);
  }

  async forward(req: IncomingMessage, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    const method = req.method;
    if (!isForwardedMethod(method)) return writeError(res, methodNotAllowed());
    const raw = req.headers['mcp-session-id'];
    const sessionId = Array.isArray(raw) ? raw.join(', ') : raw;
    try {
      if (method === 'POST') await this.post(req, res, ctx, sessionId);
      else if (sessionId === undefined) throw new GatewayError(400, 'invalid_request', 'Mcp-Session-Id is required');
      else if (method === 'GET') this.get(res, ctx, await this.namedSession(sessionId, ctx.auth));
      else {
        await this.pool.stop(await this.namedSession(sessionId, ctx.auth), 'deleted');
        res.writeHead(200).end();
      }
    } catch (err) {
      if (!res.headersSent) writeError(res, err instanceof GatewayError ? err : internal(err, this.deps, this.route.path));
      else res.destroy();
    }
    return responseOver(res);
  }

  close(): Promise<void> {
    return this.pool.close();
  }

  /** The session a request names, after the session hook (the store binding) and the local owner both say it is this principal's. */
  private async namedSession(sessionId: string, auth: AuthContext): Promise<StdioSession> {
    await this.deps.session.admit(sessionId, auth);
    const session = this.pool.sessions.get(sessionId);
    // Bound but not here: its process ended, or it lives on another replica.
    if (!session || session.ended || session.owner !== principalKey(auth)) throw unknownSession();
    return session;
  }

  private statelessSession(auth: AuthContext): Promise<StdioSession> {
    const owner = principalKey(auth);
    return this.pool.stateless.get(owner, async () => {
      const started = await this.pool.start(owner, userKey(auth), true);
      try {
        await initializeStdio(started, this.timeoutMs);
      } catch (err) {
        void this.pool.stop(started, 'timeout');
        throw err;
      }
      return started;
    });
  }

  private async newSession(auth: AuthContext): Promise<StdioSession> {
    const session = await this.pool.start(principalKey(auth), userKey(auth), false);
    try {
      await this.deps.session.bind(session.id!, auth);
    } catch (err) {
      void this.pool.stop(session, 'fault');
      throw err;
    }
    return session;
  }

  private async post(req: IncomingMessage, res: ServerResponse, ctx: ForwardContext, sessionId: string | undefined): Promise<void> {
    const { messages, batch } = readMessages(ctx.body);
    const requests = messages.filter(isRequest).length;
    const initialize = sessionId === undefined && !batch && messages[0]?.method === 'initialize' && requests === 1;
    // A listen is a stream held open: one user holds at most its share of them (stream-quota.ts).
    if (ctx.longLived === true && !this.streams.admit(userKey(ctx.auth), res)) return;
    const session =
      sessionId !== undefined
        ? await this.namedSession(sessionId, ctx.auth)
        : initialize
          ? await this.newSession(ctx.auth)
          : await this.statelessSession(ctx.auth);
    // With tracing on: the exchange with the process is the request span's child, and its parent in the messages' _meta.
    const span = ctx.span?.child('stdio', 'client', { 'mag.stdio.command': this.route.stdio.command });
    if (span) carryTraceContext(messages, span.traceHeaders());
    if (requests === 0) {
      session.send(messages, undefined);
      res.writeHead(202).end();
      span?.end();
      return;
    }
    const pool = this.pool;
    const answer: PostAnswer = new PostAnswer({
      res,
      stream: acceptsEventStream(req),
      batch,
      transform: ctx.transform,
      headers: initialize ? { 'mcp-session-id': session.id! } : undefined,
      // A 2026-07-28 client reads some errors by their HTTP status.
      errorStatus: isModernRequest(req.headers) ? modernErrorStatus : undefined,
      timeoutMs: this.timeoutMs,
      maxUnreadBytes: this.route.maxBodyBytes,
      done(outcome) {
        if (outcome !== 'complete') span?.fail(outcome);
        span?.end();
        // A process that never answers its initialize is no use to anyone.
        if (initialize && outcome === 'timeout') void pool.stop(session, 'timeout');
        else if (outcome !== 'complete') session.abandon(answer, outcome === 'timeout' ? 'gateway timeout' : 'client disconnected');
      },
    });
    session.send(messages, answer);
  }

  private get(res: ServerResponse, ctx: ForwardContext, session: StdioSession): void {
    if (session.stream && !session.stream.closed) throw new GatewayError(409, 'invalid_request', 'This session already has an open GET stream');
    const sink = new SseSink(res, ctx.transform, this.route.maxBodyBytes);
    session.stream = sink;
    sink.open();
    const metrics = this.deps.metrics;
    metrics?.streamOpened();
    res.once('close', () => {
      metrics?.streamClosed();
      sink.closed = true;
      if (session.stream === sink) session.stream = undefined;
    });
  }
}

function internal(err: unknown, deps: StdioForwarderDeps, route: string): GatewayError {
  deps.logger.error({ route, err }, 'stdio forwarder failure');
  return new GatewayError(500, 'server_error', 'Internal error', { cause: err });
}

function acceptsEventStream(req: IncomingMessage): boolean {
  const accept = req.headers.accept;
  return typeof accept === 'string' && accept.toLowerCase().includes('text/event-stream');
}

/** The body's messages (a batch is 2025-03-26's array). The policy step has read it strictly already. */
function readMessages(body: Buffer): { messages: Message[]; batch: boolean } {
  let payload: unknown;
  try {
    payload = JSON.parse(body.toString('utf8'));
  } catch {
    throw new GatewayError(400, 'invalid_request', 'The body is not JSON');
  }
  const batch = Array.isArray(payload);
  const messages: unknown[] = batch ? (payload as unknown[]) : [payload];
  if (messages.length === 0 || !messages.every((m) => isObject(m) && m.jsonrpc === '2.0')) {
    throw new GatewayError(400, 'invalid_request', 'The body is not a JSON-RPC message');
  }
  return { messages: messages as Message[], batch };
}
