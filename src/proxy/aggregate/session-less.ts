// 2026-07-28 clients of an aggregated route (DESIGN §8.2): requests without a
// session. Each principal (issuer, subject, client) has one session-less
// session of its own, made by the forwarder at its first such request and
// kept while it is used (the route's session slots bound it per user, and an
// idle one ends, its upstream sessions and processes with it): its upstream
// sessions are opened once and reused by every later request of that
// principal, never another's. A request is answered as one JSON message (lists
// merged, calls routed by shown name, as in a session), a refusal with the
// status the revision gives it; closing the request cancels it upstream. A
// `subscriptions/listen` is a stream of its own (listen-stream.ts), counted in
// the user's stream share and fanned out to the upstreams (listen-fanout.ts).
import type { ServerResponse } from 'node:http';
import { userKey, type AuthContext } from '../../auth/principal.js';
import type { ForwardContext } from '../forwarder.js';
import { modernErrorStatus } from '../modern-error-status.js';
import type { StreamQuota } from '../stream-quota.js';
import type { AggregateMethods, SessionUpstream } from './aggregate-methods.js';
import { INVALID_PARAMS } from './discover-request.js';
import { fanOutListen } from './listen-fanout.js';
import { ListenStream } from './listen-stream.js';
import { clientInfoOf, modernAnswer, sessionLessFault } from './session-less-request.js';
import { listenFilterOf } from './subscription-filter.js';

const LISTEN = 'subscriptions/listen';

/** What of a client session the session-less requests use (aggregate-forwarder.ts's ClientSession). */
export interface SessionLessSession {
  methods: AggregateMethods;
  upstreams: SessionUpstream[];
  /** Open listen streams: a session with one is not idle. */
  listens: Set<ListenStream>;
  /** Requests in flight: a session with one is not ended to make room. */
  inFlight: Map<string, AbortController>;
  lastUsed: number;
}

export interface SessionLessDeps {
  /** The principal's session-less session; made (its user's slot taken, or 503) when it has none. */
  sessionOf(auth: AuthContext, clientInfo: Record<string, unknown> | undefined): SessionLessSession;
  /** The route's per-user share of long-lived streams (GET and listen). */
  streams: StreamQuota;
  /** The revisions the route serves, named in a refusal of another. */
  served: readonly string[];
  /** Writes one JSON answer through the policy's transform. */
  reply(res: ServerResponse, ctx: ForwardContext, payload: object, status: number): void;
}

interface Message {
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

export class SessionLessRequests {
  private nextKey = 0;

  constructor(private readonly deps: SessionLessDeps) {}

  async serve(message: Message, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    const method = String(message.method);
    // A notification: nothing to answer (a request is cancelled by closing it).
    if (message.id === undefined) return void res.writeHead(202).end();
    const id = message.id as string | number;
    const filter = method === LISTEN ? listenFilterOf(message.params) : undefined;
    const fault = sessionLessFault(method, message.params, this.deps.served) ?? (method === LISTEN && filter === undefined ? { code: INVALID_PARAMS, message: 'subscriptions/listen needs params.notifications' } : undefined);
    if (fault) return this.deps.reply(res, ctx, { jsonrpc: '2.0', id, error: fault }, 400);
    // A listen is held open: one user holds at most its share of them (stream-quota.ts).
    if (filter && !this.deps.streams.admit(userKey(ctx.auth), res)) return;
    const session = this.deps.sessionOf(ctx.auth, clientInfoOf(message.params));
    session.lastUsed = Date.now();
    if (filter) return this.listen(new ListenStream(res, id, filter), session, ctx);
    await this.answer(session, id, method, message.params, res, ctx);
  }

  /** One request, answered as JSON; the client closing it cancels it at the upstream. */
  private async answer(session: SessionLessSession, id: string | number, method: string, params: unknown, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    const key = `session-less ${this.nextKey++}`;
    const controller = new AbortController();
    const left = () => controller.abort('the client closed its request');
    res.once('close', left);
    session.inFlight.set(key, controller);
    try {
      const answer = modernAnswer(method, await session.methods.answer(method, isRecord(params) ? params : undefined, { auth: ctx.auth, span: ctx.span, signal: controller.signal, servedBy: ctx.servedBy }));
      if (res.destroyed) return;
      const payload = { jsonrpc: '2.0', id, ...answer };
      this.deps.reply(res, ctx, payload, modernErrorStatus(payload) ?? 200);
    } finally {
      res.off('close', left);
      session.inFlight.delete(key);
    }
  }

  private async listen(listen: ListenStream, session: SessionLessSession, ctx: ForwardContext): Promise<void> {
    session.listens.add(listen);
    listen.onEnd(() => {
      session.listens.delete(listen);
      session.lastUsed = Date.now();
    });
    listen.begin();
    try {
      await fanOutListen(listen, session, { auth: ctx.auth, span: ctx.span, servedBy: ctx.servedBy });
    } catch {
      // An upstream that cannot be listened to ends this listen, nothing else; the client listens again.
      listen.end();
    }
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
