// One client session of a legacy SSE route, and its own upstream connection
// (never shared: the gateway minted this session id and bound it to one
// principal). It routes what the upstream says: an answer to the POST that
// waits for it (by JSON-RPC id), progress to the POST whose request asked for
// it, and the server's own requests and notifications to the client's GET
// stream (or, while none is open, to a POST still waiting, else a bounded
// backlog). When the upstream stream drops, the session ends: waiting POSTs
// get an error and the id is unknown from then on. The per-user session of
// 2026-07-28 clients renames their requests upstream (upstream-ids.ts).
import type { ServerResponse } from 'node:http';
import type { Pool } from 'undici';
import { GatewayError, temporarilyUnavailable } from '../../errors/gateway-error.js';
import type { GatewaySpan } from '../../observability/tracing.js';
import type { ForwardContext } from '../forwarder.js';
import type { ResponseTransform } from '../response-transform.js';
import { modernErrorStatus } from '../modern-error-status.js';
import { carryTraceContext } from '../trace-meta.js';
import { upstreamErrorResponse } from '../upstream-failure.js';
import { ClientStream } from './client-streams.js';
import { HandshakeWait, handshakeRequest, INITIALIZED_NOTIFICATION, isModernAnswer, ProbeWait, probeRequest } from '../stateless-init.js';
import { cancelledNotification, classifyUpstreamMessage, errorAnswer, idKey, type ClientMessages, type ClientRequest } from './messages.js';
import { PostReply, REQUEST_TIMEOUT } from './post-reply.js';
import type { SseScope } from './sse-scope.js';
import { UpstreamConnection } from './upstream-connection.js';
import { forClient, renamed } from './upstream-ids.js';

/** Requests of one session waiting for their answers at once; beyond: 503. */
export const MAX_PENDING_REQUESTS = 100;
/** Server messages held while the client has no GET stream open; the oldest go first. */
export const MAX_BACKLOG = 100;
/**
 * And at most this many bytes of them in all (or the route's max_body_bytes, when lower): a
 * hundred messages each just under max_body_bytes (4 MiB) held 400 MiB per session, and a hostile
 * upstream's messages for five users' sessions exhausted the heap (review of issue 26).
 */
export const MAX_BACKLOG_BYTES = 1024 * 1024;
/** JSON-RPC error code of a request whose session ended before its answer came. */
const SESSION_ENDED = -32000;
/** JSON-RPC's "internal error", for a request the server said it gave up on (as on stdio routes). */
const SERVER_CANCELLED = -32603;

/** Why a session ended: DELETE, its upstream stream lost, shutdown, idle, or ended to make room for another session (session-admission.ts). */
export type SessionEnd = 'deleted' | 'lost' | 'shutdown' | 'idle' | 'evicted';

export interface ClientAccepts {
  json: boolean;
  eventStream: boolean;
  /** The request speaks 2026-07-28 or later: some error answers carry their HTTP status (modern-error-status.ts). */
  modern?: boolean;
}

/** The ids of the gateway's own probe and initialize: no client request waits on a session while they do. */
const PROBE_ID = 'mcp-auth-gateway-discover';
const HANDSHAKE_ID = 'mcp-auth-gateway-initialize';

/** A request in flight: the reply waiting for it, and how the client and the upstream name it. */
interface InFlight {
  reply: PostReply;
  request: ClientRequest;
}

/** One of the gateway's own requests on a stateless session, waiting for its answer. */
interface GatewayRequest {
  key: string | undefined;
  wait: { answer(message: object): void; fail(error: GatewayError): void };
}

/** The ids, as the upstream knows them, of the requests a reply still waits for. */
const upstreamIds = (reply: PostReply) => [...reply.waiting.values()].map((r) => r.upstreamId);

const UPSTREAM_SPAN = { 'mag.upstream.transport': 'sse' };
const errorType = (err: unknown) => (err instanceof GatewayError ? err.code : err instanceof Error ? err.name : 'error');

export class SseSession {
  readonly upstream: UpstreamConnection;
  /** idKey of a waiting request's upstream id → the request and its reply. */
  private readonly answers = new Map<string, InFlight>();
  /** idKey of a progress token (as the upstream knows it) → the request that asked for it. */
  private readonly progress = new Map<string, InFlight>();
  private readonly replies = new Set<PostReply>();
  private stream: ClientStream | undefined;
  private readonly backlog: string[] = [];
  private backlogBytes = 0;
  /** Held server messages dropped since the last warning (one warning per session, not one per message). */
  private droppedFromBacklog = 0;
  private lastActive = Date.now();
  ended = false;
  /** The gateway's own probe or initialize (a stateless session's), while it waits for its answer. */
  private handshake: GatewayRequest | undefined;

  constructor(
    readonly id: string,
    /** principalKey of the principal it is bound to. */
    readonly owner: string,
    pool: Pool,
    sseUrl: URL,
    private readonly scope: SseScope,
    private readonly onEnded: (session: SseSession) => void,
    /** Its requests go upstream under ids of the gateway's (upstream-ids.ts): a 2026-07-28 user's session, which several of its clients share. */
    private readonly renames = false,
  ) {
    this.upstream = new UpstreamConnection(pool, sseUrl, scope, {
      message: (json, parsed) => this.fromUpstream(json, parsed),
      lost: (err) => this.end('lost', err),
    });
  }

  /** A request in flight, or the gateway's own initialize: never ended to make room. */
  get busy(): boolean {
    return this.replies.size > 0 || this.handshake !== undefined;
  }

  /** When something last happened (the least recent is ended first to make room). */
  get lastActivity(): number {
    return this.lastActive;
  }

  /**
   * The opening of a stateless (2026-07-28) session, made by the gateway
   * (../stateless-init.ts): the era probe (server/discover); a modern server is
   * left as it is, a legacy one gets initialize, its answer kept from any
   * client, then notifications/initialized. Rejects with the client's answer
   * (504 at upstream_timeout).
   */
  async initialize(injected: ForwardContext['injected']): Promise<void> {
    if (await this.probe(injected)) return;
    const wait = new HandshakeWait(this.scope.limits.timeoutMs);
    this.handshake = { key: idKey(HANDSHAKE_ID), wait };
    this.upstream.post(Buffer.from(JSON.stringify(handshakeRequest(HANDSHAKE_ID))), injected).catch((err: unknown) => wait.fail(this.scope.failure(err)));
    try {
      await wait.done;
    } finally {
      this.handshake = undefined;
    }
    await this.upstream.post(Buffer.from(JSON.stringify(INITIALIZED_NOTIFICATION)), injected);
  }

  /** Whether the upstream answers server/discover as a modern server does (a refused or unanswered probe: legacy). */
  private async probe(injected: ForwardContext['injected']): Promise<boolean> {
    const wait = new ProbeWait(this.scope.limits.timeoutMs);
    this.handshake = { key: idKey(PROBE_ID), wait };
    this.upstream.post(Buffer.from(JSON.stringify(probeRequest(PROBE_ID))), injected).catch(() => wait.refused());
    try {
      const answer = await wait.done;
      return answer !== undefined && isModernAnswer(answer);
    } finally {
      this.handshake = undefined;
    }
  }

  /** Milliseconds since anything happened, or 0 while a POST waits or the GET stream is open. */
  idleFor(now: number): number {
    return this.replies.size > 0 || this.stream !== undefined ? 0 : now - this.lastActive;
  }

  /** One POST of the client. Resolves when its response is over; throws a GatewayError before anything was written. */
  async post(res: ServerResponse, ctx: ForwardContext, sent: ClientMessages, accepts: ClientAccepts, newSessionId?: string): Promise<void> {
    this.lastActive = Date.now();
    const messages = this.renames ? renamed(sent, (id) => this.upstreamIdOf(id)) : sent;
    if (messages.requests.length === 0) return this.notify(res, ctx, messages);
    for (const r of messages.requests) {
      if (this.answers.has(r.key)) throw new GatewayError(400, 'invalid_request', 'A request with this id is still waiting in this session');
    }
    if (this.answers.size + messages.requests.length > MAX_PENDING_REQUESTS) throw temporarilyUnavailable('Too many requests waiting in this session');
    // With tracing on, the exchange — the POST and the wait for its answers on the upstream stream — is the request span's child.
    const span = ctx.span?.child('POST', 'client', UPSTREAM_SPAN);
    const reply = new PostReply(res, this.scope, {
      requests: messages.requests,
      batch: messages.batch,
      acceptsJson: accepts.json,
      acceptsEventStream: accepts.eventStream,
      transform: ctx.transform,
      newSessionId,
      errorStatus: accepts.modern ? modernErrorStatus : undefined,
      onEnd: (ended, cancelled) => this.replyEnded(ended, cancelled, ctx.injected),
      onTimeout: (late) => this.timedOut(late, ctx.injected),
    });
    // Registered before the POST: the answer may come on the stream before the upstream's 202 does.
    this.replies.add(reply);
    for (const request of messages.requests) {
      this.answers.set(request.key, { reply, request });
      if (request.progressKey !== undefined) this.progress.set(request.progressKey, { reply, request });
    }
    try {
      await this.postUpstream(ctx, messages, span);
    } catch (err) {
      reply.fail(this.scope.failure(err), SESSION_ENDED);
    }
    await reply.done;
    if (span) {
      if (reply.failure !== undefined) span.fail(reply.failure);
      span.end();
    }
    // An initialize that got no answer never told the client its session id: nobody can use or end the session.
    if (newSessionId !== undefined && !reply.answered) this.end('deleted');
  }

  /** The upstream id of the one request in flight the client names `clientId` (none, or more than one: undefined). */
  private upstreamIdOf(clientId: unknown): string | number | undefined {
    const named = [...this.answers.values()].filter((f) => f.request.id === clientId);
    return named.length === 1 ? named[0]!.request.upstreamId : undefined;
  }

  /** Notifications and answers (to the server's own requests): accepted once the upstream took them. */
  private async notify(res: ServerResponse, ctx: ForwardContext, messages: ClientMessages): Promise<void> {
    // Nothing left to send (a cancellation that named no request of the client's): accepted, as the upstream would.
    if (messages.all.length === 0) return void res.writeHead(202).end();
    const span = ctx.span?.child('POST', 'client', UPSTREAM_SPAN);
    try {
      await this.postUpstream(ctx, messages, span);
    } catch (err) {
      span?.fail(errorType(err));
      throw err;
    } finally {
      span?.end();
    }
    res.writeHead(202).end();
  }

  /**
   * The client's body to the endpoint, its bytes as sent. With tracing on,
   * the span's trace context goes in the POST's headers and in each message's
   * `params._meta`, and the body is serialised again (the client's own headers
   * never reach a legacy upstream, and the answer comes on the stream, not on
   * this POST).
   */
  private postUpstream(ctx: ForwardContext, messages: ClientMessages, span: GatewaySpan | undefined): Promise<void> {
    if (span === undefined && messages.renamed !== true) return this.upstream.post(ctx.body, ctx.injected);
    const trace = span?.traceHeaders();
    if (trace !== undefined) carryTraceContext(messages.all, trace);
    const body = Buffer.from(JSON.stringify(messages.batch ? messages.all : messages.all[0]));
    return this.upstream.post(body, { ...ctx.injected, ...trace });
  }

  /** The client's GET stream; one at a time (409 for a second, as Streamable HTTP servers answer). */
  openStream(res: ServerResponse, transform?: ResponseTransform): Promise<void> {
    if (this.stream) throw new GatewayError(409, 'invalid_request', 'This session already has an open GET stream');
    const stream = new ClientStream(res, this.scope, () => {
      if (this.stream === stream) this.stream = undefined;
      this.lastActive = Date.now();
    }, transform);
    this.stream = stream;
    this.backlogBytes = 0;
    for (const json of this.backlog.splice(0)) stream.send(json);
    return stream.closed;
  }

  private fromUpstream(json: string, parsed: unknown): void {
    const message = classifyUpstreamMessage(parsed);
    if (message.kind === 'answer' && this.handshake !== undefined && message.key === this.handshake.key) return this.handshake.wait.answer(parsed as object);
    const object = parsed as Record<string, unknown>;
    // A listen's frame goes to that listen's POST alone; once it is over, nowhere.
    if (message.kind === 'subscription') {
      const listen = this.answers.get(message.subscriptionKey);
      return listen?.reply.listening(forClient(json, object, listen.request, 'subscriptionId'));
    }
    if (message.kind === 'answer') {
      // An id never given to this session (or answered already): never another request's answer.
      const waiting = this.answers.get(message.key);
      if (waiting === undefined) return this.scope.logger?.warn({ route: this.scope.route }, 'upstream answered no waiting request; dropped');
      this.answers.delete(message.key);
      return waiting.reply.answer(message.key, forClient(json, object, waiting.request, 'id'));
    }
    if (message.kind === 'progress') {
      const asked = this.progress.get(message.progressKey);
      asked?.reply.touch();
      if (asked?.reply.relay(forClient(json, object, asked.request, 'progressToken'))) return;
      // Progress on no request of a shared session's: its token means nothing to any client there.
      if (this.renames) return;
    }
    if (message.kind === 'cancelled' && this.renames) return this.serverCancelled(message.requestKey);
    this.toClient(json);
  }

  /** The server gave up on a request of a shared session: it ends as an error answer under the client's id (as on stdio routes); any other is dropped. */
  private serverCancelled(key: string): void {
    const cancelled = this.answers.get(key);
    if (cancelled === undefined) return;
    this.answers.delete(key);
    cancelled.reply.answer(key, errorAnswer(cancelled.request.id, SERVER_CANCELLED, 'The server cancelled the request'));
  }

  /** The server's own message: the GET stream, else a POST still waiting (an event stream, not a 2026-07-28 client's), else the backlog. */
  private toClient(json: string): void {
    if (this.stream) return this.stream.send(json);
    for (const reply of [...this.replies].reverse()) if (reply.carriesUnrelated && reply.relay(json)) return;
    this.hold(json);
  }

  /** Held for the client's next GET stream, within the backlog's bounds (count and bytes): the oldest go first, one too big for them is not held. */
  private hold(json: string): void {
    const maxBytes = Math.min(MAX_BACKLOG_BYTES, this.scope.limits.maxBytes);
    let dropped = 0;
    if (json.length > maxBytes) dropped++;
    else {
      while (this.backlog.length >= MAX_BACKLOG || this.backlogBytes + json.length > maxBytes) {
        this.backlogBytes -= this.backlog.shift()!.length;
        dropped++;
      }
      this.backlog.push(json);
      this.backlogBytes += json.length;
    }
    if (dropped === 0) return;
    if (this.droppedFromBacklog === 0) {
      this.scope.logger?.warn({ route: this.scope.route, limit: MAX_BACKLOG, maxBytes }, 'no GET stream open: held server messages past their bound are dropped, the oldest first (said once per session)');
    }
    this.droppedFromBacklog += dropped;
  }

  private replyEnded(reply: PostReply, cancelled: boolean, injected: ForwardContext['injected']): void {
    this.replies.delete(reply);
    this.lastActive = Date.now();
    for (const r of reply.requests) {
      if (this.answers.get(r.key)?.reply === reply) this.answers.delete(r.key);
      if (r.progressKey !== undefined && this.progress.get(r.progressKey)?.reply === reply) this.progress.delete(r.progressKey);
    }
    // The client closed the response: the upstream stops working on what it no longer waits for.
    if (cancelled) this.cancelUpstream(upstreamIds(reply), 'The client closed the response', injected);
  }

  private timedOut(reply: PostReply, injected: ForwardContext['injected']): void {
    const ids = upstreamIds(reply);
    reply.fail(this.scope.upstreamError('timeout', 'upstream did not answer in time', { requests: ids.length }), REQUEST_TIMEOUT);
    this.cancelUpstream(ids, 'Timed out at the gateway', injected);
  }

  private cancelUpstream(ids: Array<string | number>, reason: string, injected: ForwardContext['injected']): void {
    if (this.ended) return;
    for (const id of ids) this.upstream.post(cancelledNotification(id, reason), injected).catch(() => undefined);
  }

  /** Ends the session: the upstream stream closed, waiting POSTs answered with an error, the GET stream ended. */
  end(why: SessionEnd, err?: GatewayError): void {
    if (this.ended) return;
    this.ended = true;
    this.upstream.close();
    const answer =
      why === 'shutdown' ? upstreamErrorResponse('shutdown') : (err ?? new GatewayError(404, 'not_found', 'The session has ended'));
    for (const reply of [...this.replies]) reply.fail(answer, SESSION_ENDED);
    this.handshake?.wait.fail(answer);
    this.stream?.end();
    this.backlog.length = 0;
    this.backlogBytes = 0;
    this.onEnded(this);
  }
}
