// The sessions of one legacy SSE route: its undici pool to the upstream's
// origin, the sessions by id, how one starts (admitted under max_sessions and
// max_sessions_per_principal by ../session-admission.ts, then the upstream's
// GET stream and its endpoint, then a session id minted here and bound to the
// principal before the client sees it), the per-principal sessions of
// 2026-07-28 clients without one (../stateless-init.ts), and idle sessions ended.
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { Pool } from 'undici';
import { principalKey, userKey } from '../../auth/principal.js';
import type { SseUpstreamConfig } from '../../config/types.js';
import type { ForwardContext } from '../forwarder.js';
import { admit, SessionAdmission, type AdmissionContext } from '../session-admission.js';
import { StatelessSessions } from '../stateless-init.js';
import { upstreamErrorResponse } from '../upstream-failure.js';
import type { ClientMessages } from './messages.js';
import { SseSession, type ClientAccepts } from './sse-session.js';
import type { SseScope } from './sse-scope.js';

/** A session with no POST waiting and no GET stream open this long is ended (its upstream stream closed). */
export const IDLE_SESSION_MS = 10 * 60_000;
/** Below the 5 s idle timeout of common upstream servers, as in http-forwarder.ts. */
const IDLE_CONNECTION_MS = 4_000;
const MAX_CONNECT_MS = 10_000;

export class SseSessions {
  private readonly pool: Pool;
  /** Sessions by the `Mcp-Session-Id` minted here. */
  private readonly sessions = new Map<string, SseSession>();
  /** The per-principal sessions of stateless (2026-07-28) clients; they have no id a client knows. */
  private readonly stateless = new StatelessSessions<SseSession>();
  private readonly admission: SessionAdmission<SseSession>;
  private readonly admissionContext: AdmissionContext;
  /** Sessions whose upstream stream is opening: not usable yet, but ended by close(). */
  private readonly starting = new Set<SseSession>();
  private closing = false;
  private readonly sweep: NodeJS.Timeout;

  constructor(
    private readonly sseUrl: URL,
    bounds: SseUpstreamConfig,
    readonly scope: SseScope,
  ) {
    const { timeoutMs } = scope.limits;
    this.pool = new Pool(sseUrl.origin, {
      // Every session holds one connection for its GET stream: no cap here (max_sessions is the cap).
      connections: null,
      pipelining: 1,
      keepAliveTimeout: IDLE_CONNECTION_MS,
      connect: { timeout: Math.min(MAX_CONNECT_MS, timeoutMs) },
      headersTimeout: timeoutMs,
      // The GET stream may idle for as long as it likes; a POST's answer is small and comes with its head.
      bodyTimeout: 0,
    });
    this.admission = new SessionAdmission({ perRoute: bounds.maxSessions, perPrincipal: bounds.maxSessionsPerPrincipal });
    this.admissionContext = { route: scope.route, logger: scope.logger, settings: { route: 'max_sessions', principal: 'max_sessions_per_principal' } };
    this.sweep = setInterval(() => this.endIdle(), IDLE_SESSION_MS / 4).unref();
  }

  get(id: string): SseSession | undefined {
    return this.sessions.get(id);
  }

  /** A POST without a session id that carries `initialize`: a new session, and this POST's answer. */
  async start(res: ServerResponse, ctx: ForwardContext, messages: ClientMessages, accepts: ClientAccepts): Promise<void> {
    const session = await this.open(ctx, true);
    this.sessions.set(session.id, session);
    return session.post(res, ctx, messages, accepts, session.id);
  }

  /** A POST without a session id that is not `initialize` (a 2026-07-28 client): the principal's own session, initialized by the gateway. */
  async statelessPost(res: ServerResponse, ctx: ForwardContext, messages: ClientMessages, accepts: ClientAccepts): Promise<void> {
    const session = await this.stateless.get(principalKey(ctx.auth), async () => {
      const opened = await this.open(ctx, false);
      try {
        await opened.initialize(ctx.injected);
      } catch (err) {
        opened.end('lost');
        throw err;
      }
      return opened;
    });
    return session.post(res, ctx, messages, accepts);
  }

  /**
   * Admits a session (ending an idle one to make room: its upstream stream
   * closes at once), opens its upstream stream, and with `bound` binds its id
   * to the principal. Throws the client's answer (503 when nothing can make room).
   */
  private async open(ctx: ForwardContext, bound: boolean): Promise<SseSession> {
    if (this.closing) throw upstreamErrorResponse('shutdown');
    const owner = principalKey(ctx.auth);
    // Counted per user (all its clients one share); only the user's own idle session makes room.
    let admitted: ReturnType<typeof admit<SseSession>>;
    try {
      admitted = admit(this.admission, userKey(ctx.auth), this.admissionContext);
    } catch (err) {
      ctx.admissionRefused?.();
      throw err;
    }
    const { slot, evict } = admitted;
    evict?.end('evicted');
    await slot.vacant;
    // 192 random bits, visible ASCII: unguessable, and valid as an Mcp-Session-Id.
    const id = randomBytes(24).toString('base64url');
    const session = new SseSession(id, owner, this.pool, this.sseUrl, this.scope, (ended) => this.ended(ended, bound), !bound);
    this.starting.add(session);
    try {
      await session.upstream.open(ctx.injected);
      if (bound) await this.scope.session.bind(id, ctx.auth);
      if (this.closing) throw upstreamErrorResponse('shutdown');
    } catch (err) {
      session.upstream.close();
      this.admission.abandon(slot);
      throw err;
    } finally {
      this.starting.delete(session);
    }
    this.admission.open(slot, session);
    return session;
  }

  private ended(session: SseSession, bound: boolean): void {
    this.admission.release(session);
    if (!bound) return this.stateless.forget(session.owner, session);
    if (this.sessions.get(session.id) !== session) return;
    this.sessions.delete(session.id);
    this.scope.session.release(session.id);
  }

  private endIdle(): void {
    const now = Date.now();
    for (const session of this.admission.occupants(true)) if (session.idleFor(now) >= IDLE_SESSION_MS) session.end('idle');
  }

  /** Shutdown: every session ended (its upstream stream closed, the client's streams ended cleanly), then the pool closed. */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.sweep);
    for (const session of [...this.starting, ...this.admission.occupants()]) session.end('shutdown');
    await this.pool.close();
  }
}
