// One client session's session with one upstream of an aggregated route:
// opened with its own initialize when first needed, its Mcp-Session-Id and
// protocol version kept, its requests and answers read as JSON-RPC (a JSON
// body or an event stream whose answer to this id is taken). The upstream's
// forwarder binds that session to the client's principal (its session hook),
// as on a route of its own.
import type { AuthContext } from '../../auth/principal.js';
import type { GatewaySpan } from '../../observability/tracing.js';
import type { Forwarder } from '../forwarder.js';
import { callersOwnFailure } from './caller-answer.js';
import { AggregateUpstreamError, captureExchange, openStream, type CapturedAnswer } from './captured-exchange.js';
import { EventStreamReader } from './event-stream-reader.js';
import { discoveredAsInitialize, initializeRemoved, MODERN_REVISION, withModernMeta, withoutModernMeta } from './modern-wire.js';
import type { MessageChannel } from './session-streams.js';
import { reopenedListen } from './reopened-listen.js';
import { openUpstreamListen, type UpstreamListen } from './upstream-listen.js';
import { LISTENER_TIMINGS, UpstreamListener, type ListenerStream, type ListenerTimings, type ProbeOutcome } from './upstream-listener.js';
import type { Probeable, ProberTimings } from './upstream-prober.js';

/** The waits of a link's GET stream and of its upstream's slow probing; shortened by tests only (StartOptions.aggregateRecovery). */
export type RecoveryTimings = ListenerTimings & ProberTimings;

export interface AggregateUpstream {
  name: string;
  forwarder: Forwarder;
  /** The upstream's credential headers for this caller (lower-case names). */
  headersFor(auth: AuthContext): Readonly<Record<string, string>> | Promise<Readonly<Record<string, string>>>;
  timeoutMs: number;
  maxBytes: number;
  /** Each client session has a server of its own (stdio): its failures are that session's, never the route's. */
  perSession: boolean;
  /** The upstream answered 401 to `injected`: a credential that renews itself (a user's grant) does so once, and the request is sent again. */
  rejected?(auth: AuthContext, injected: Readonly<Record<string, string>>): Promise<void>;
  /** Shorter waits than upstream-listener's and upstream-prober's (tests only). */
  recovery?: Partial<RecoveryTimings>;
}

/** Where a link whose GET stream gave up waits to be probed: its upstream's one prober on the route (upstream-prober.ts). */
export interface ProberHandle {
  enlist(link: Probeable): void;
  withdraw(link: Probeable): void;
}

export interface JsonRpcAnswer {
  result?: Record<string, unknown>;
  error?: { code: number; message: string; data?: unknown };
}

/** What the client said in its initialize, passed on to every upstream. */
/** An answer and the size of the upstream's body it was read from (what merged lists are bounded by). */
export interface MeasuredAnswer {
  answer: JsonRpcAnswer;
  bytes: number;
}

export interface ClientHello {
  protocolVersion: string;
  capabilities: Record<string, unknown>;
  clientInfo: Record<string, unknown>;
  /** The revision the client speaks, when not `protocolVersion` (a 2026-07-28 client without a session: its links open sessions of an older one). */
  clientRevision?: string;
}

/**
 * A notification of the upstream's (no id), from its stream or an answer's. `related`: it came
 * with the answer to a request of the client's, whose POST may carry it (post-stream.ts).
 */
export type NotificationSink = (method: string, params: Record<string, unknown> | undefined, related?: MessageChannel) => void;

/** A request of the upstream's to the client (sampling, elicitation, roots), from its stream or an answer's (`related`, as above). */
export type RequestSink = (id: string | number, method: string, params: Record<string, unknown> | undefined, related?: MessageChannel) => void;

/**
 * Refusals of the upstream's own requests (to the client) in flight at once; beyond, a request is
 * left unanswered (the upstream's own wait ends it), so a flood of requests cannot open a POST each.
 */
export const MAX_REFUSALS_IN_FLIGHT = 8;

export class UpstreamLink implements Probeable {
  private opened?: Promise<Record<string, unknown>>;
  /** The upstream session's GET stream, reopened when it ends (upstream-listener.ts); parked with `prober` when it gives up. */
  private readonly listener: UpstreamListener;
  /** The route's prober of this upstream (none: a session's own process, or a link of its own, e.g. discover's). */
  prober?: ProberHandle;
  /** The upstream session the GET stream was last opened for (a 404 there means that one is forgotten). */
  private listenedSession?: string;
  /** A session with the upstream was opened before (or the client's session opened without it): the next one is a rejoin. */
  private joined = false;
  /** The client's session opened while the upstream was down: the route's prober opens this link when it answers again. */
  private leftOut = false;
  /** close() was called: nothing is opened any more. */
  private ended = false;
  /** Where the upstream's notifications go (the aggregated session's); none: dropped. */
  onNotification?: NotificationSink;
  /** Where the upstream's requests to the client go; none: left unanswered. */
  onRequest?: RequestSink;
  /** A session with the upstream opened afresh (it restarted, or forgot the old one), with its initialize result. */
  onRejoined?: (result: Record<string, unknown>) => void;
  /** The upstream ended its GET stream too often in a row: it is not reopened for this session. */
  onGaveUp?: () => void;
  private sessionId?: string;
  private protocolVersion: string;
  private nextId = 1;
  /** The upstream speaks 2026-07-28 alone (modern-wire.ts): no session, every request stamped with `_meta`. */
  private modern = false;
  private refusing = 0;

  constructor(
    readonly upstream: AggregateUpstream,
    /** The latest request's auth (the same principal throughout: the session is bound to it); DELETE uses it. */
    private auth: AuthContext,
    private readonly hello: ClientHello,
  ) {
    this.protocolVersion = hello.protocolVersion;
    const gaveUp = () => {
      this.onGaveUp?.();
      this.prober?.enlist(this);
    };
    this.listener = new UpstreamListener({ connect: () => this.getStream(), rejoin: () => this.rejoin(), gaveUp }, Date.now, { ...LISTENER_TIMINGS, ...upstream.recovery });
  }

  /** The upstream's initialize result (its capabilities), opening the session once. A failed opening is tried again next time. */
  open(span?: GatewaySpan): Promise<Record<string, unknown>> {
    this.opened ??= this.handshake(span).catch((err: unknown) => {
      this.opened = undefined;
      throw err;
    });
    return this.opened;
  }

  /**
   * One request: the upstream's JSON-RPC answer (a result or its own error). `name` goes into Mcp-Name.
   * `auth` is this request's own (its credential may be per request, e.g. token exchange), of the
   * principal the session is bound to.
   */
  async request(method: string, params: Record<string, unknown> | undefined, name: string | undefined, auth: AuthContext, span?: GatewaySpan, signal?: AbortSignal, related?: MessageChannel): Promise<MeasuredAnswer> {
    this.auth = auth;
    await this.open(span);
    const session = this.sessionId;
    try {
      return await this.send(method, params, name, span, signal, related);
    } catch (err) {
      if (!(await this.forgot(err, session))) throw err;
    }
    // The upstream forgot the session, so it did not act on the request: joined afresh (told again
    // what the client asked, the client told its lists changed) and the request sent once more there.
    if (this.sessionId === session) this.opened = undefined;
    await this.open(span);
    return this.send(method, params, name, span, signal, related);
  }

  /**
   * Whether a request's failure says the upstream forgot `session`: 404 (as MCP says), or 400 to
   * which a `ping` on that same session is answered 400 or 404 too (servers answering an unknown
   * session id 400, server-everything among them; a plain bad request leaves the ping answered).
   * Not for a session's own process (stdio: its next request starts it again) nor a session-less
   * upstream (2026-07-28 alone). A stdio or session-less link's 404 is opened afresh next time.
   */
  private async forgot(err: unknown, session: string | undefined): Promise<boolean> {
    if (!(err instanceof AggregateUpstreamError) || (err.status !== 404 && err.status !== 400)) return false;
    if (this.upstream.perSession || this.modern || session === undefined) {
      if (err.status === 404) this.opened = undefined;
      return false;
    }
    if (err.status === 404) return true;
    const ping = await this.exchange({ jsonrpc: '2.0', id: this.nextId++, method: 'ping' }, 'ping', undefined, undefined, undefined, undefined, session).then(
      () => undefined,
      (e: unknown) => e,
    );
    return ping instanceof AggregateUpstreamError && (ping.status === 400 || ping.status === 404);
  }

  /**
   * The client's session opened without this upstream (it was down): the route's prober opens the
   * link when the upstream answers again, and its opening is told as a rejoin (the client told its
   * lists changed), so the client learns of the upstream's tools without a request of its own.
   * Nothing for a session's own process (stdio), which no prober serves.
   */
  leftOutAtOpening(): void {
    if (this.ended || this.opened !== undefined || !this.prober) return;
    this.leftOut = true;
    this.joined = true;
    this.prober.enlist(this);
  }

  /** One probe of the upstream for the route's prober (upstream-prober.ts): what this link's parked GET stream would do next, once. */
  probe(): Promise<ProbeOutcome> {
    if (this.ended) return Promise.resolve('gone');
    if (this.leftOut) return this.probeOpening();
    return this.listener.probe(this.upstream.timeoutMs);
  }

  /** A link left out at the session's opening, opened now (bounded by the upstream's timeout); a failure leaves it waiting. */
  private async probeOpening(): Promise<ProbeOutcome> {
    try {
      await this.open();
      return this.ended ? 'gone' : 'answered';
    } catch {
      // Opened meanwhile by a request of the client's (it listens itself), or closed: nothing waits here.
      return this.leftOut && !this.ended ? 'silent' : 'gone';
    }
  }

  /** Ends the upstream session (DELETE); never throws. */
  close(): void {
    const sessionId = this.sessionId;
    this.ended = true;
    this.listener.close();
    this.prober?.withdraw(this);
    if (this.opened === undefined || sessionId === undefined) return;
    this.opened = undefined;
    void this.credential(this.auth)
      .then((injected) => captureExchange(this.upstream.forwarder, { method: 'DELETE', headers: this.headers(undefined, undefined, sessionId), body: Buffer.alloc(0) }, { auth: this.auth, injected }, this.limits()))
      .catch(() => undefined);
  }

  private async handshake(span?: GatewaySpan): Promise<Record<string, unknown>> {
    this.sessionId = undefined;
    if (this.modern) return this.discovered(await this.discover(span));
    const params = { protocolVersion: this.hello.protocolVersion, capabilities: this.hello.capabilities, clientInfo: this.hello.clientInfo };
    const opened = await this.exchange({ jsonrpc: '2.0', id: this.nextId++, method: 'initialize', params }, 'initialize', undefined, span).catch(async (err: unknown) => {
      if (!initializeRemoved(err)) throw err;
      // No initialize: a server of 2026-07-28 alone answers its server/discover; any other keeps the initialize's failure.
      return { discovered: await this.discover(span).catch(() => Promise.reject(err)) };
    });
    if ('discovered' in opened) return this.discovered(opened.discovered);
    const { answer, sessionId } = opened;
    if (!answer.result) throw new AggregateUpstreamError('unreadable');
    this.sessionId = sessionId;
    if (typeof answer.result.protocolVersion === 'string') this.protocolVersion = answer.result.protocolVersion;
    // The GET stream first: a server that asks the client something once initialized (roots) sends it there.
    await this.listener.listen(this.upstream.timeoutMs);
    // A session opened afresh listens itself: the prober has nothing more to do for it.
    this.leftOut = false;
    this.prober?.withdraw(this);
    await this.exchange({ jsonrpc: '2.0', method: 'notifications/initialized' }, 'notifications/initialized', undefined, span);
    if (this.joined) this.onRejoined?.(answer.result);
    this.joined = true;
    return answer.result;
  }

  /**
   * An upstream of 2026-07-28 alone answered: it has no session to rejoin, but one left out at the
   * client session's opening comes in now, told as a rejoin (the client told its lists changed).
   */
  private discovered(result: Record<string, unknown>): Record<string, unknown> {
    if (!this.leftOut) return result;
    this.leftOut = false;
    this.prober?.withdraw(this);
    this.onRejoined?.(result);
    return result;
  }

  /** 2026-07-28's server/discover, its answer read as an initialize's; from then on the link speaks that revision. */
  private async discover(span?: GatewaySpan): Promise<Record<string, unknown>> {
    const previous = this.protocolVersion;
    this.protocolVersion = MODERN_REVISION;
    try {
      const { answer } = await this.exchange({ jsonrpc: '2.0', id: this.nextId++, method: 'server/discover', params: withModernMeta(undefined, this.hello) }, 'server/discover', undefined, span);
      const result = discoveredAsInitialize(answer);
      this.modern = true;
      return result;
    } catch (err) {
      if (!this.modern) this.protocolVersion = previous;
      throw err;
    }
  }

  /** The upstream session's GET stream, where a server sends what no request asked (list_changed, logging, its own requests). */
  private async getStream(): Promise<ListenerStream> {
    if (this.ended) throw new AggregateUpstreamError('down');
    const sessionId = this.sessionId;
    this.listenedSession = sessionId;
    const injected = await this.credential(this.auth);
    const reader = new EventStreamReader(this.upstream.maxBytes, (m) => this.notified(m));
    const headers = { ...this.headers(undefined, undefined, sessionId), accept: 'text/event-stream' };
    delete (headers as Record<string, string>)['content-type'];
    return openStream(this.upstream.forwarder, { method: 'GET', headers, body: Buffer.alloc(0) }, { auth: this.auth, injected }, (chunk) => reader.push(chunk));
  }

  /**
   * The upstream forgot the session its GET stream was for (it restarted): a new one is opened
   * now, not at the client's next request, so what the upstream says from then on reaches the
   * client. Never for a session's own process (stdio), which its next request starts again.
   */
  private async rejoin(): Promise<void> {
    if (this.ended || this.upstream.perSession || this.modern) return;
    if (this.sessionId === this.listenedSession) this.opened = undefined;
    await this.open();
    // Ended meanwhile: the session just opened is not left behind.
    if (this.ended) this.close();
  }

  /**
   * Requests the client made earlier, told again to a session opened afresh (its level, its
   * subscriptions), one after another; never throws. Sent on that session only: a failure never
   * opens another (an upstream that forgets every session at once cannot make this loop).
   */
  retell(requests: readonly { method: string; params: Record<string, unknown> }[]): void {
    const session = this.sessionId;
    void (async () => {
      for (const { method, params } of requests) {
        if (this.ended || this.sessionId !== session) return;
        await this.send(method, params, undefined).catch(() => undefined);
      }
    })();
  }

  private notified(m: unknown, related?: MessageChannel): void {
    if (!isRecord(m) || typeof m.method !== 'string') return;
    const params = isRecord(m.params) ? m.params : undefined;
    if (m.id === undefined) this.onNotification?.(m.method, params, related);
    else if (typeof m.id === 'string' || (typeof m.id === 'number' && Number.isSafeInteger(m.id))) this.onRequest?.(m.id, m.method, params, related);
  }

  /**
   * The client's answer to a request of this upstream's, sent to the upstream session that asked
   * (`sessionId`, as it was then): a session opened since then never sees it.
   */
  async respond(sessionId: string | undefined, message: { jsonrpc: '2.0'; id: string | number; error?: object }): Promise<void> {
    if (this.opened === undefined || sessionId !== this.sessionId) throw new AggregateUpstreamError('down');
    await this.exchange(message, undefined, undefined);
  }

  /** Refuses a request of the upstream's (an error to the session that asked); never throws; dropped past MAX_REFUSALS_IN_FLIGHT. */
  refuse(sessionId: string | undefined, id: string | number, error: { code: number; message: string }): void {
    if (this.refusing >= MAX_REFUSALS_IN_FLIGHT) return;
    this.refusing++;
    void this.respond(sessionId, { jsonrpc: '2.0', id, error })
      .catch(() => undefined)
      .finally(() => this.refusing--);
  }

  /** A notification of the client's to the upstream (roots/list_changed), when its session is open; never throws. */
  notify(method: string): void {
    if (this.opened === undefined || this.sessionId === undefined) return;
    void this.exchange({ jsonrpc: '2.0', method }, method, undefined).catch(() => undefined);
  }

  /** The protocol revision the client speaks (what an answer made for it follows). */
  get clientVersion(): string {
    return this.hello.clientRevision ?? this.hello.protocolVersion;
  }

  /** Whether the upstream speaks 2026-07-28 alone (known once the link is open): its notifications come on listens of its own. */
  get speaksModern(): boolean {
    return this.modern;
  }

  /**
   * A `subscriptions/listen` of this link's own at an upstream of 2026-07-28 alone, asking for
   * `notifications`; its notifications go to `onNotification`. Held until stopped: reopened when it
   * ends (reopened-listen.ts), `reopened` called once a reopened one is acknowledged. Undefined for
   * any other upstream (its session's GET stream carries them); rejects when it cannot be opened.
   */
  async subscribe(notifications: Record<string, unknown>, onNotification: NotificationSink, reopened: () => void = () => undefined): Promise<UpstreamListen | undefined> {
    await this.open();
    if (!this.modern) return undefined;
    return reopenedListen(() => this.listenOnce(notifications, onNotification), { ...LISTENER_TIMINGS, ...this.upstream.recovery }, reopened);
  }

  /** One `subscriptions/listen` at the upstream, with this caller's credential as it is now. */
  private async listenOnce(notifications: Record<string, unknown>, onNotification: NotificationSink): Promise<UpstreamListen> {
    if (this.ended) throw new AggregateUpstreamError('down');
    const injected = await this.credential(this.auth);
    const message = { jsonrpc: '2.0', id: this.nextId++, method: 'subscriptions/listen', params: withModernMeta({ notifications }, this.hello) };
    const request = { method: 'POST' as const, headers: this.headers('subscriptions/listen', undefined, undefined), body: Buffer.from(JSON.stringify(message)) };
    return openUpstreamListen(this.upstream, request, { auth: this.auth, injected }, onNotification);
  }

  /** The upstream session's id now (the one a request of the upstream's came from). */
  get session(): string | undefined {
    return this.sessionId;
  }

  private async send(method: string, params: Record<string, unknown> | undefined, name: string | undefined, span?: GatewaySpan, signal?: AbortSignal, related?: MessageChannel): Promise<MeasuredAnswer> {
    const stamped = this.modern ? withModernMeta(params, this.hello) : withoutModernMeta(params);
    const message = { jsonrpc: '2.0', id: this.nextId++, method, ...(stamped && { params: stamped }) };
    // The client's cancellation, told to the upstream with the id this link gave the request.
    const cancel = () => void this.exchange({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: message.id, reason: String(signal?.reason ?? 'cancelled by the client') } }, 'notifications/cancelled', undefined, span).catch(() => undefined);
    signal?.addEventListener('abort', cancel, { once: true });
    try {
      const { answer, bytes } = await this.exchange(message, method, name, span, signal, related);
      return { answer, bytes };
    } finally {
      signal?.removeEventListener('abort', cancel);
    }
  }

  private async exchange(message: { jsonrpc: string; id?: number | string; method?: string; params?: unknown }, method: string | undefined, name: string | undefined, span?: GatewaySpan, signal?: AbortSignal, related?: MessageChannel, session = this.sessionId): Promise<MeasuredAnswer & { sessionId?: string }> {
    const auth = this.auth;
    let injected = await this.credential(auth);
    const request = { method: 'POST' as const, headers: this.headers(method, name, session), body: Buffer.from(JSON.stringify(message)) };
    // An answer that is an event stream is read as it comes and never kept whole: its messages
    // (progress, requests, notifications) go on at once, each event at most max_body_bytes (a
    // larger one is dropped unread), the whole at most that too; the answer ends the exchange.
    let answered: JsonRpcAnswer | undefined;
    let reader: EventStreamReader;
    const tap = (chunk: Buffer) => (reader.push(chunk), answered !== undefined);
    const send = () => {
      reader = new EventStreamReader(this.upstream.maxBytes, (m) => {
        if (message.id !== undefined && message.method !== undefined) answered ??= answerIn(m, message.id);
        this.notified(m, related);
      });
      return captureExchange(this.upstream.forwarder, request, { auth, injected, span }, { ...this.limits(), signal, tap, renews: this.upstream.rejected !== undefined }).then((captured) => {
        // A last event without its blank line counts too.
        if (answered === undefined && isEventStream(captured)) reader.push(EVENT_END);
        return captured;
      });
    };
    let captured = await send();
    if (captured.status === 401 && this.upstream.rejected) {
      // The user's grant refused: renewed once (or gone: the caller's connect link) and the request sent again.
      await this.upstream.rejected(auth, injected).catch((err: unknown) => Promise.reject(callersOwnFailure(err)));
      injected = await this.credential(auth);
      answered = undefined;
      captured = await send();
    }
    // A server of 2026-07-28 gives some JSON-RPC errors an HTTP status (404 with -32601, 400 with -32602 or -32022): its answer still.
    const refusal = this.modern && captured.status >= 400 && captured.status < 500 && message.id !== undefined ? errorAnswerOf(captured, message.id) : undefined;
    if (refusal) return { answer: refusal, bytes: captured.bytes };
    // Refused at the gateway's own bound on this caller's upstream sessions: the caller's failure, not the upstream's health.
    if (captured.refusedHere) throw callersOwnFailure(new AggregateUpstreamError('status', captured.status));
    if (captured.status < 200 || captured.status > 299) throw new AggregateUpstreamError('status', captured.status);
    const sessionId = captured.headers['mcp-session-id'];
    const bytes = captured.bytes;
    if (message.id === undefined || message.method === undefined) return { answer: {}, bytes, sessionId };
    // An event stream was read live (never kept); a JSON body is read as JSON, whatever lines it holds.
    if (isEventStream(captured)) {
      if (!answered) throw new AggregateUpstreamError('unreadable');
      return { answer: answered, bytes, sessionId };
    }
    return { answer: answerOf(captured, message.id), bytes, sessionId };
  }

  /** The upstream's credential for this caller; its failure is the caller's own (caller-answer.ts), never the upstream's health. */
  private async credential(auth: AuthContext): Promise<Readonly<Record<string, string>>> {
    try {
      return await this.upstream.headersFor(auth);
    } catch (err) {
      throw callersOwnFailure(err);
    }
  }

  private headers(method: string | undefined, name: string | undefined, sessionId: string | undefined): Record<string, string> {
    return {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': this.protocolVersion,
      ...(sessionId !== undefined && { 'mcp-session-id': sessionId }),
      ...(method !== undefined && { 'mcp-method': method }),
      ...(name !== undefined && { 'mcp-name': name }),
    };
  }

  private limits() {
    return { timeoutMs: this.upstream.timeoutMs, maxBytes: this.upstream.maxBytes };
  }
}

/** The JSON-RPC error answering `id` in a refused request's body, if it holds one. */
function errorAnswerOf(captured: CapturedAnswer, id: number | string): JsonRpcAnswer | undefined {
  try {
    const answer = answerOf(captured, id);
    return answer.error ? answer : undefined;
  } catch {
    return undefined;
  }
}

/** The answer to `id` in a JSON body or a kept event stream. */
function answerOf(captured: CapturedAnswer, id: number | string): JsonRpcAnswer {
  const messages: unknown[] = [];
  // The forwarder handed the value it serialised (stdio): the same messages, not parsed again.
  if (captured.value !== undefined && !isEventStream(captured)) messages.push(...(Array.isArray(captured.value) ? (captured.value as unknown[]) : [captured.value]));
  else if (isEventStream(captured)) {
    // A refused (non-2xx) stream is kept whole (bounded by max_body_bytes); a last event without its blank line counts too.
    new EventStreamReader(Infinity, (m) => messages.push(m)).push(Buffer.concat([captured.body, Buffer.from('\n\n')]));
  } else {
    try {
      const parsed: unknown = JSON.parse(captured.body.toString('utf8'));
      messages.push(...(Array.isArray(parsed) ? (parsed as unknown[]) : [parsed]));
    } catch {
      // not JSON: no answer in it
    }
  }
  for (const m of messages) {
    const answer = answerIn(m, id);
    if (answer) return answer;
  }
  throw new AggregateUpstreamError('unreadable');
}

/** Ends an event a stream left without its blank line. */
const EVENT_END = Buffer.from('\n\n');

const isEventStream = (captured: CapturedAnswer) => (captured.headers['content-type'] ?? '').includes('text/event-stream');

/** `m` as the answer to `id`: a result, or an error as JSON-RPC shapes it; undefined for anything else. */
function answerIn(m: unknown, id: number | string): JsonRpcAnswer | undefined {
  if (!isRecord(m) || m.id !== id || !('result' in m || 'error' in m)) return undefined;
  if (isRecord(m.result)) return { result: m.result };
  if (isRecord(m.error) && typeof m.error.code === 'number' && typeof m.error.message === 'string') return { error: m.error as JsonRpcAnswer['error'] };
  return undefined;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
