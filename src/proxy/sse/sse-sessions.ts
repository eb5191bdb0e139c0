// The sessions of one legacy SSE route: its undici pool to the upstream's
// origin, the sessions by id, how one starts (the upstream's GET stream and
// its endpoint first, then a session id minted here and bound to the
// principal before the client sees it), and the bounds: sessions per route,
// idle sessions ended.
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { Pool } from 'undici';
import { principalKey } from '../../auth/principal.js';
import { temporarilyUnavailable } from '../../errors/gateway-error.js';
import type { ForwardContext } from '../forwarder.js';
import { upstreamErrorResponse } from '../upstream-failure.js';
import type { ClientMessages } from './messages.js';
import { SseSession, type ClientAccepts } from './sse-session.js';
import type { SseScope } from './sse-scope.js';

/** Upstream sessions (each an open GET stream) one route holds at once; beyond: 503. */
export const MAX_SESSIONS_PER_ROUTE = 1_000;
/** A session with no POST waiting and no GET stream open this long is ended (its upstream stream closed). */
export const IDLE_SESSION_MS = 10 * 60_000;
/** Below the 5 s idle timeout of common upstream servers, as in http-forwarder.ts. */
const IDLE_CONNECTION_MS = 4_000;
const MAX_CONNECT_MS = 10_000;

export class SseSessions {
  private readonly pool: Pool;
  private readonly sessions = new Map<string, SseSession>();
  /** Sessions whose upstream stream is opening: not usable yet, but ended by close(). */
  private readonly starting = new Set<SseSession>();
  private closing = false;
  private readonly sweep: NodeJS.Timeout;

  constructor(
    private readonly sseUrl: URL,
    readonly scope: SseScope,
  ) {
    const { timeoutMs } = scope.limits;
    this.pool = new Pool(sseUrl.origin, {
      // Every session holds one connection for its GET stream: no cap here (MAX_SESSIONS_PER_ROUTE is the cap).
      connections: null,
      pipelining: 1,
      keepAliveTimeout: IDLE_CONNECTION_MS,
      connect: { timeout: Math.min(MAX_CONNECT_MS, timeoutMs) },
      headersTimeout: timeoutMs,
      // The GET stream may idle for as long as it likes; a POST's answer is small and comes with its head.
      bodyTimeout: 0,
    });
    this.sweep = setInterval(() => this.endIdle(), IDLE_SESSION_MS / 4).unref();
  }

  get(id: string): SseSession | undefined {
    return this.sessions.get(id);
  }

  /** A POST without a session id that carries `initialize`: a new session, and this POST's answer. */
  async start(res: ServerResponse, ctx: ForwardContext, messages: ClientMessages, accepts: ClientAccepts): Promise<void> {
    if (this.closing) throw upstreamErrorResponse('shutdown');
    if (this.sessions.size + this.starting.size >= MAX_SESSIONS_PER_ROUTE) throw temporarilyUnavailable('Too many sessions on this route');
    // 192 random bits, visible ASCII: unguessable, and valid as an Mcp-Session-Id.
    const id = randomBytes(24).toString('base64url');
    const session = new SseSession(id, principalKey(ctx.auth), this.pool, this.sseUrl, this.scope, (ended) => this.ended(ended));
    this.starting.add(session);
    try {
      await session.upstream.open(ctx.injected);
      await this.scope.session.bind(id, ctx.auth);
    } catch (err) {
      session.upstream.close();
      throw err;
    } finally {
      this.starting.delete(session);
    }
    if (this.closing) {
      session.upstream.close();
      throw upstreamErrorResponse('shutdown');
    }
    this.sessions.set(id, session);
    return session.post(res, ctx, messages, accepts, id);
  }

  private ended(session: SseSession): void {
    if (this.sessions.get(session.id) !== session) return;
    this.sessions.delete(session.id);
    this.scope.session.release(session.id);
  }

  private endIdle(): void {
    const now = Date.now();
    for (const session of this.sessions.values()) if (session.idleFor(now) >= IDLE_SESSION_MS) session.end('idle');
  }

  /** Shutdown: every session ended (its upstream stream closed, the client's streams ended cleanly), then the pool closed. */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.sweep);
    for (const session of [...this.starting, ...this.sessions.values()]) session.end('shutdown');
    await this.pool.close();
  }
}
