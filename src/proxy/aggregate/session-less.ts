// 2026-07-28 clients of an aggregated route (DESIGN §8.2): requests without a
// session. Each principal (issuer, subject, client) has one session-less
// session of its own, made by the forwarder at its first such request and
// kept while it is used (the route's session slots bound it per user, and an
// idle one ends, its upstream sessions and processes with it): its upstream
// sessions are opened once and reused by every later request of that
// principal, never another's. A request is a call (session-less-call.ts)
// answered in rounds: its answer (lists merged, calls routed by shown name, as
// in a session), a refusal with the status the revision gives it, or, when an
// upstream of a session-based revision asks the client something, an
// InputRequiredResult whose retry (input-rounds.ts) resumes it; its progress is
// written to the round's POST as an event stream when the client takes one;
// closing a round's POST cancels the call upstream. A `subscriptions/listen`
// is a stream of its own (listen-stream.ts), counted in the user's stream
// share and fanned out to the upstreams (listen-fanout.ts).
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { userKey, type AuthContext } from '../../auth/principal.js';
import type { ForwardContext } from '../forwarder.js';
import { modernErrorStatus } from '../modern-error-status.js';
import type { StreamQuota } from '../stream-quota.js';
import type { AggregateMethods, SessionUpstream } from './aggregate-methods.js';
import { INVALID_PARAMS } from './discover-request.js';
import { isGatewayState, type InputRounds } from './input-rounds.js';
import { fanOutListen } from './listen-fanout.js';
import { ListenStream } from './listen-stream.js';
import type { ListenWatches } from './listen-watches.js';
import { PostStream } from './post-stream.js';
import type { ServerRequests } from './server-requests.js';
import { SessionLessCall, type RoundEnd } from './session-less-call.js';
import { capabilitiesOf, clientInfoOf, identityOf, modernAnswer, progressTokenOf, sessionLessFault, withProgressToken } from './session-less-request.js';
import type { ProgressTarget, SessionStreams } from './session-streams.js';
import { listenFilterOf } from './subscription-filter.js';

const LISTEN = 'subscriptions/listen';

/** What of a client session the session-less requests use (aggregate-forwarder.ts's ClientSession). */
export interface SessionLessSession {
  methods: AggregateMethods;
  upstreams: SessionUpstream[];
  /** Open listen streams: a session with one is not idle. */
  listens: Set<ListenStream>;
  /** Requests in flight (a call awaiting its client's retry too): a session with one is not ended to make room. */
  inFlight: Map<string, AbortController>;
  lastUsed: number;
  /** Its POSTs answered as event streams, their unread bytes bounded together (session-streams.ts). */
  streams: SessionStreams;
  /** Its calls' progress tokens (the gateway's, the ones the upstreams were given) → the call. */
  progressTokens: Map<string, ProgressTarget>;
  /** The upstreams' requests to its client awaiting an answer (server-requests.ts). */
  requests: ServerRequests;
  /** Its calls that asked the client something, and those awaiting its retry. */
  rounds: InputRounds;
  /** The subscriptions its listens hold at upstreams of session-based revisions. */
  watches: ListenWatches;
}

export interface SessionLessDeps {
  /** The principal's session-less session; made (its user's slot taken, or 503) when it has none. */
  /** The principal's session-less session for the client capabilities its request declared. */
  sessionOf(auth: AuthContext, clientInfo: Record<string, unknown> | undefined, declared: Record<string, unknown>): SessionLessSession;
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

/** One request of a round, as the call reads it. */
interface RoundRequest {
  id: string | number;
  method: string;
  params: Record<string, unknown> | undefined;
  /** The client's Accept takes an event stream: the round's progress may come first. */
  acceptsEvents: boolean;
}

export class SessionLessRequests {
  private nextKey = 0;

  constructor(private readonly deps: SessionLessDeps) {}

  async serve(message: Message, res: ServerResponse, ctx: ForwardContext, acceptsEvents: boolean): Promise<void> {
    const method = String(message.method);
    // A notification: nothing to answer (a request is cancelled by closing it).
    if (message.id === undefined) return void res.writeHead(202).end();
    const id = message.id as string | number;
    const filter = method === LISTEN ? listenFilterOf(message.params) : undefined;
    const fault = sessionLessFault(method, message.params, this.deps.served) ?? (method === LISTEN && filter === undefined ? { code: INVALID_PARAMS, message: 'subscriptions/listen needs params.notifications' } : undefined);
    if (fault) return this.deps.reply(res, ctx, { jsonrpc: '2.0', id, error: fault }, 400);
    // A listen is held open: one user holds at most its share of them (stream-quota.ts).
    if (filter && !this.deps.streams.admit(userKey(ctx.auth), res)) return;
    const session = this.deps.sessionOf(ctx.auth, clientInfoOf(message.params), capabilitiesOf(isRecord(message.params) ? message.params : undefined));
    session.lastUsed = Date.now();
    if (filter) return this.listen(new ListenStream(res, id, filter), session, ctx);
    const request = { id, method, params: isRecord(message.params) ? message.params : undefined, acceptsEvents };
    const state = request.params?.requestState;
    if (isGatewayState(state)) return this.resume(session, state, request, res, ctx);
    await this.call(session, request, res, ctx);
  }

  /** A new call: sent where it is routed (the upstream given a progress token of the gateway's), then its first round. */
  private async call(session: SessionLessSession, request: RoundRequest, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    const { method, params } = request;
    const call = new SessionLessCall(method, identityOf(method, params), capabilitiesOf(params), (c) => session.rounds.admit(c));
    const key = `session-less ${this.nextKey++}`;
    // Each round's POST has its own token: the upstream's progress on this one is written with it.
    const token = progressTokenOf(params) === undefined ? undefined : `mag-progress-${randomBytes(12).toString('base64url')}`;
    session.inFlight.set(key, call.controller);
    const given = new Set<string>();
    if (token !== undefined) session.progressTokens.set(JSON.stringify(token), { channel: call, upstreams: given });
    call.onSettled(() => {
      session.inFlight.delete(key);
      if (token !== undefined) session.progressTokens.delete(JSON.stringify(token));
      session.requests.forget(call);
    });
    const routed = (upstream: string) => {
      call.upstream = upstream;
      given.add(upstream);
      ctx.span?.set('mag.upstream.name', upstream);
    };
    const answer = session.methods.answer(method, withProgressToken(params, token), { auth: ctx.auth, span: ctx.span, signal: call.controller.signal, related: call, servedBy: ctx.servedBy, routed });
    call.run(answer);
    await this.round(session, call, request, res, ctx);
  }

  /**
   * A retry naming a state of the gateway's: the call it names, if it awaits this principal's retry
   * of this very request, gets the client's answers (each to the upstream that asked) and its next
   * round; anything else is -32602 and leaves the call waiting.
   */
  private async resume(session: SessionLessSession, state: string, request: RoundRequest, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    const call = session.rounds.peek(state);
    const uri = request.params?.uri;
    // Judged where it was sent: a rule naming the upstream of a URI saw where this session serves it.
    const judgedElsewhere = ctx.servedBy !== undefined && typeof uri === 'string' && ctx.servedBy.get(uri) !== call?.upstream;
    const responses = request.params?.inputResponses ?? {};
    const refusal = call === undefined || call.identity !== identityOf(request.method, request.params) || judgedElsewhere ? 'requestState names no request of this client awaiting its input (answered, expired, or another request): send the request again without it' : !isRecord(responses) ? 'inputResponses must be an object' : undefined;
    if (refusal !== undefined || call === undefined) return this.deps.reply(res, ctx, { jsonrpc: '2.0', id: request.id, error: { code: INVALID_PARAMS, message: refusal } }, 400);
    session.rounds.take(state);
    try {
      await session.requests.answered(call.answers(responses as Record<string, unknown>));
    } catch {
      // The upstream session that asked is gone: the call cannot go on there.
      call.abort('the upstream that asked did not take the answer');
    }
    // Requests held while the call had no room for them may be taken now.
    session.requests.flush();
    await this.round(session, call, request, res, ctx);
  }

  /**
   * One round of a call, on this POST: answered with the call's outcome, or with an
   * InputRequiredResult naming what the upstreams asked (the call then awaits the retry). The
   * client closing the POST first cancels the call.
   */
  private async round(session: SessionLessSession, call: SessionLessCall, request: RoundRequest, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    const post = new PostStream(res, session.streams, ctx.transform, request.acceptsEvents);
    const left = () => call.abort('the client closed its request');
    res.once('close', left);
    // Its close may have come already (during a retry's answers to the upstream): the client left.
    if (res.destroyed) left();
    let end: RoundEnd;
    try {
      end = await call.attend({ post, progressToken: progressTokenOf(request.params), capabilities: capabilitiesOf(request.params) });
    } finally {
      res.off('close', left);
    }
    if (res.destroyed) return session.rounds.done(call);
    if ('asked' in end) return post.answer({ jsonrpc: '2.0', id: request.id, result: { resultType: 'input_required', inputRequests: end.asked, requestState: session.rounds.suspend(call) } });
    session.rounds.done(call);
    if ('failed' in end) {
      if (!post.started) throw end.failed;
      return post.answer({ jsonrpc: '2.0', id: request.id, error: { code: -32603, message: 'Internal error' } });
    }
    const payload = { jsonrpc: '2.0', id: request.id, ...modernAnswer(request.method, end.answer) };
    post.answer(payload, modernErrorStatus(payload) ?? 200);
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
