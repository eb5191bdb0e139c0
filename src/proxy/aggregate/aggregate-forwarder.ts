// The forwarder of an aggregated route (DESIGN §8.2): the client sees one MCP
// server. The gateway answers initialize itself (the capabilities some
// upstream has), gives the client a session id of its own, bound to the
// principal by the route's session hook, and opens for that session one
// session with each upstream (through each upstream's own forwarder). Every
// later request of the session is answered by aggregate-methods.ts, as JSON,
// through the policy's response transform (tools/list filtering).
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { principalKey, userKey, type AuthContext } from '../../auth/principal.js';
import { ShownNames } from '../../config/shown-names.js';
import type { AggregateConfig } from '../../config/types.js';
import type { GatewaySpan } from '../../observability/tracing.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { writeError } from '../../errors/write-error.js';
import type { ForwardContext, Forwarder, ProxyLogger, SessionHook } from '../forwarder.js';
import { methodNotAllowed } from '../forwarded-methods.js';
import { isModernRequest } from '../modern-error-status.js';
import { GET_STREAMS_PER_USER, StreamQuota } from '../stream-quota.js';
import { AggregateMethods, rpcError, type SessionUpstream } from './aggregate-methods.js';
import { discoverFault } from './discover-request.js';
import { InputRounds } from './input-rounds.js';
import { capabilitiesOf } from './merged-capabilities.js';
import type { ListenStream } from './listen-stream.js';
import { ListenWatches } from './listen-watches.js';
import { MODERN_REVISION } from './modern-wire.js';
import { acceptsEventStream, PostStream, writeJson } from './post-stream.js';
import { UpstreamCapabilities } from './upstream-capabilities.js';
import { ServerRequests, type AnswerMessage } from './server-requests.js';
import { MAX_SUBSCRIPTIONS, SessionInterests } from './session-interests.js';
import { SessionLessRequests } from './session-less.js';
import { HIDDEN, shownParams, TASK_NOTIFICATION } from './shown-task-ids.js';
import { HEADER_MISMATCH, taskNameMismatch } from './task-name-header.js';
import { SessionSlots } from './session-slots.js';
import { SessionStreams, type MessageChannel, type ProgressTarget } from './session-streams.js';
import { LIST_CHANGES } from './subscription-filter.js';
import { UpstreamHealth, type AggregateMetrics } from './upstream-health.js';
import { UpstreamLink, type AggregateUpstream, type ClientHello } from './upstream-link.js';
import { PROBER_TIMINGS, UpstreamProber } from './upstream-prober.js';

/** The session-based revisions this route speaks to clients (initialize answers one of these). */
const SUPPORTED_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'];
/** Every revision served: 2026-07-28's requests come without a session (session-less.ts). */
const SERVED_VERSIONS = [MODERN_REVISION, ...SUPPORTED_VERSIONS];
/** The first revision whose clients take an event with an id and no data (a priming event). */
const PRIMING_REVISION = '2025-11-25';
/** What a session-less session's upstream sessions are opened with (a 2026-07-28 upstream is spoken to in its own revision). */
const HANDSHAKE_REVISION = '2025-11-25';
/**
 * The client capabilities a session-less session's upstream sessions may be told: the requests an
 * upstream can send with a call that 2026-07-28 carries as an input request (session-less-call.ts).
 * Each is told only where the request declared it in `_meta` (servers list tools by what their
 * client can answer, as they would for that client directly), so a principal has a session-less
 * session per set declared (at most eight, each one of the principal's slots).
 */
const ASKABLE_CAPABILITIES = ['elicitation', 'roots', 'sampling'] as const;
const GATEWAY_INFO = { name: 'mcp-auth-gateway', version: '0.1.0' };
/** What an upstream of 2026-07-28 is asked for while a client session's GET stream is open: every list change. */
const ALL_LIST_CHANGES = Object.fromEntries(Object.keys(LIST_CHANGES).map((k) => [k, true]));
/** Client sessions of one aggregated route at once, and of one user (issuer, subject: whatever its client); beyond: 503. */
const MAX_SESSIONS = 10_000;
const MAX_SESSIONS_PER_PRINCIPAL = 16;
/** A client session unused this long is ended (its upstream sessions too). */
const IDLE_MS = 30 * 60_000;

interface ClientSession {
  owner: string;
  /** The user's slot (SessionSlots), given back when the session ends. */
  user: string;
  methods: AggregateMethods;
  upstreams: SessionUpstream[];
  lastUsed: number;
  /** The client's GET stream (one at a time) and its POSTs' event streams, bounded together. */
  streams: SessionStreams;
  /** The client's requests in flight (by JSON of their id), for its notifications/cancelled. */
  inFlight: Map<string, AbortController>;
  /**
   * The progress tokens of those requests (JSON), each to its POST's stream, with the upstreams the
   * request was sent to: an upstream's progress on any other token, or on one it was not given, is not passed on.
   */
  progressTokens: Map<string, ProgressTarget>;
  /** The upstreams' requests to the client (sampling, elicitation, roots) awaiting its answer. */
  requests: ServerRequests;
  /** Which of those the client said it serves (its initialize's capabilities), and ping. */
  serves: ReadonlySet<string>;
  /** Its resource subscriptions (by upstream) and logging level. */
  interests: SessionInterests;
  /** A 2026-07-28 principal's session without an id (session-less.ts): bound to nothing in the store, never named by a client. */
  sessionLess: boolean;
  /** A session-less session's key among its principal's: the principal and the client capabilities its upstream sessions were told. */
  sessionLessKey?: string;
  /** Its clients' open `subscriptions/listen` streams (session-less sessions only). */
  listens: Set<ListenStream>;
  /** Its calls that asked the client something and await its retry (session-less sessions only). */
  rounds: InputRounds;
  /** The subscriptions its listens hold at upstreams of session-based revisions (session-less sessions only). */
  watches: ListenWatches;
  /** The gateway's list changes (a rejoin) the client could not be told yet (no GET stream, or no room): told on its next GET stream or POST answered as a stream. */
  untold: Set<string>;
}

/** The client capabilities passed on to the upstreams, and the requests each lets an upstream send the client. */
const CLIENT_CAPABILITIES: Record<string, string> = { sampling: 'sampling/createMessage', elicitation: 'elicitation/create', roots: 'roots/list' };

/** The upstreams' notifications a client is told of as they are (progress, cancellation and resources/updated are mapped first; others are not passed on). */
const LIST_CHANGED = new Set(['notifications/tools/list_changed', 'notifications/prompts/list_changed', 'notifications/resources/list_changed']);
const LISTS = ['tools', 'prompts', 'resources'];

interface Message {
  id?: unknown;
  method?: unknown;
  params?: unknown;
}

export interface AggregateForwarderDeps {
  session: SessionHook;
  upstreams: AggregateUpstream[];
  logger?: ProxyLogger;
  metrics?: AggregateMetrics;
}

/** An aggregated route's forwarder, which also tells the policy where a session serves resource URIs. */
export interface AggregateRouteForwarder extends Forwarder {
  servedBy(sessionId: string | undefined, auth: AuthContext, uris: readonly string[], span?: GatewaySpan): Promise<ReadonlyMap<string, string>>;
}

export function createAggregateForwarder(route: { path: string; aggregate: AggregateConfig; maxGetStreamsPerUser?: number }, deps: AggregateForwarderDeps): AggregateRouteForwarder {
  return new AggregateForwarder(route.path, new ShownNames(route.aggregate), deps, new StreamQuota(route.maxGetStreamsPerUser ?? GET_STREAMS_PER_USER));
}

class AggregateForwarder implements AggregateRouteForwarder {
  private readonly sessions = new Map<string, ClientSession>();
  private readonly slots = new SessionSlots(MAX_SESSIONS, MAX_SESSIONS_PER_PRINCIPAL);
  private readonly health: UpstreamHealth[];
  /** Per upstream (none for a stdio entry, each session's own): where links whose GET stream gave up wait for its slow probes. */
  private readonly probers: (UpstreamProber | undefined)[];
  private readonly capabilities: UpstreamCapabilities;
  private readonly loggedClashes = new Set<string>();
  private readonly loggedGiveUps = new Set<string>();
  /** Streams (by key) whose resume after lost events was logged. */
  private readonly loggedLosses = new Set<string>();
  private readonly sweep: NodeJS.Timeout;
  /** Each principal's session-less session (by principalKey → its id in `sessions`). */
  private readonly sessionLessIds = new Map<string, string>();
  private readonly sessionLess: SessionLessRequests;

  constructor(
    private readonly route: string,
    private readonly names: ShownNames,
    private readonly deps: AggregateForwarderDeps,
    /** The user's share of long-lived streams on this route: session GET streams, session-less listens, and POST streams resumed while their calls run. */
    private readonly streamQuota: StreamQuota,
  ) {
    this.health = deps.upstreams.map((u) => new UpstreamHealth(route, u.name, deps.logger, deps.metrics));
    this.capabilities = new UpstreamCapabilities(deps.upstreams, this.health);
    this.probers = deps.upstreams.map((u, i) => (u.perSession ? undefined : new UpstreamProber(() => this.health[i]!.served(), { ...PROBER_TIMINGS, ...u.recovery })));
    this.sweep = setInterval(() => this.endIdle(), 60_000).unref();
    this.sessionLess = new SessionLessRequests({ sessionOf: (auth, info, declared) => this.sessionLessOf(auth, info, declared), streams: streamQuota, served: SERVED_VERSIONS, reply: (res, ctx, payload, status) => writeJson(res, ctx.transform, payload, status) });
  }

  async forward(req: IncomingMessage, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    try {
      const sessionId = headerOf(req, 'mcp-session-id');
      if (req.method === 'GET') return await this.listen(sessionId, headerOf(req, 'last-event-id'), res, ctx);
      if (req.method === 'DELETE') return await this.end(sessionId, ctx.auth, res);
      if (req.method !== 'POST') throw methodNotAllowed();
      const parsed = JSON.parse(ctx.body.toString('utf8')) as Message | Message[];
      const messages = Array.isArray(parsed) ? parsed : [parsed];
      const first = messages[0];
      // The task id of a tasks/* request goes upstream rewritten in body and header alike: a mismatch is refused here.
      if (!Array.isArray(parsed) && taskNameMismatch(req.headers, ctx.injected, parsed)) return this.refuseHeader(res, parsed);
      if (sessionId === undefined && messages.length === 1 && first?.method === 'initialize') return await this.initialize(first, res, ctx);
      if (sessionId === undefined && messages.length === 1 && first?.method === 'server/discover') return await this.discover(first, res, ctx);
      if (sessionId === undefined && isRecord(parsed) && isModernRequest(req.headers)) return await this.sessionLess.serve(parsed, res, ctx, acceptsEventStream(req.headers.accept));
      if (sessionId === undefined) throw new GatewayError(400, 'invalid_request', 'Mcp-Session-Id header is required (a session starts with initialize)');
      const session = await this.sessionOf(sessionId, ctx.auth);
      session.lastUsed = Date.now();
      // The client's answers to the upstreams' requests: all checked before anything is forwarded.
      const replies = messages.filter((m) => typeof m.method !== 'string');
      if (replies.length > 0) await session.requests.answered(replies as AnswerMessage[]);
      // What the upstreams send with their answers goes on this POST's own stream (JSON when nothing does).
      const post = new PostStream(res, session.streams, ctx.transform, acceptsEventStream(req.headers.accept));
      // A POST that will be answered carries first what the client was not told (a rejoin while it had no GET stream).
      if (session.untold.size > 0 && messages.some((m) => typeof m.method === 'string' && m.id !== undefined)) this.tellUntold(session, post);
      const answers = (await Promise.all(messages.map((m) => this.answer(session, m, ctx, post, !Array.isArray(parsed))))).filter((a) => a !== undefined);
      if (answers.length === 0) return void res.writeHead(202).end();
      post.answer(Array.isArray(parsed) ? answers : answers[0]);
    } catch (err) {
      writeError(res, err instanceof GatewayError ? err : new GatewayError(err instanceof SyntaxError ? 400 : 500, err instanceof SyntaxError ? 'invalid_request' : 'server_error', err instanceof SyntaxError ? 'The body is not JSON' : 'Internal error', { cause: err }));
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sweep);
    for (const prober of this.probers) prober?.close();
    for (const id of [...this.sessions.keys()]) this.drop(id);
    await Promise.allSettled(this.deps.upstreams.map((u) => u.forwarder.close()));
  }

  /** 400 with -32020: the request's routing header disagrees with its body. */
  private refuseHeader(res: ServerResponse, message: Message): void {
    const error = { code: HEADER_MISMATCH, message: 'Mcp-Name header does not match the task id in the body' };
    res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id ?? null, error }));
  }

  /** The gateway's own initialize answer; the user's slot is taken before any await and given back if it fails. */
  private async initialize(message: Message, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    const user = this.slots.take(ctx.auth, (u) => this.endLeastRecentIdle(u));
    try {
      await this.openSession(message, user, res, ctx);
    } catch (err) {
      this.slots.give(user);
      throw err;
    }
  }

  /** Opens the session's upstream sessions (those that answer) and answers initialize. */
  private async openSession(message: Message, user: string, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    const params = isRecord(message.params) ? message.params : {};
    const requested = typeof params.protocolVersion === 'string' ? params.protocolVersion : SUPPORTED_VERSIONS[0]!;
    const protocolVersion = SUPPORTED_VERSIONS.includes(requested) ? requested : SUPPORTED_VERSIONS[0]!;
    const capabilities = clientCapabilities(params.capabilities);
    const hello: ClientHello = { protocolVersion, capabilities, clientInfo: isRecord(params.clientInfo) ? params.clientInfo : { name: 'mcp-auth-gateway', version: '0.1.0' } };
    const id = randomBytes(24).toString('base64url');
    const session = this.newSession(ctx.auth, user, hello, new Set(['ping', ...Object.keys(capabilities).map((c) => CLIENT_CAPABILITIES[c]!)]), false);
    const upstreams = session.upstreams;
    const results = await Promise.all(upstreams.map((u) => (u.health.down ? undefined : u.link.open(ctx.span).then((r) => (u.health.served(), r), (err: unknown) => void u.health.failedWith('initialize', err)))));
    // An upstream down now is probed with the others (upstream-prober.ts): when it answers, this session joins it and the client is told.
    for (const [i, u] of upstreams.entries()) if (results[i] === undefined && u.health.down) u.link.leftOutAtOpening();
    try {
      await this.deps.session.bind(id, ctx.auth);
    } catch (err) {
      // No client session will ever end what was opened for it: its upstream sessions end now.
      for (const u of upstreams) u.link.close();
      throw err;
    }
    this.sessions.set(id, session);
    res.setHeader('mcp-session-id', id);
    const result = { protocolVersion, capabilities: capabilitiesOf(results), serverInfo: this.serverInfo() };
    this.reply(res, ctx, { jsonrpc: '2.0', id: message.id ?? null, result });
  }

  /** A client session with its links to every upstream (not opened yet), wired to it. */
  private newSession(auth: AuthContext, user: string, hello: ClientHello, serves: ReadonlySet<string>, sessionLess: boolean): ClientSession {
    const upstreams = this.deps.upstreams.map((u, i) => ({ link: new UpstreamLink(u, auth, hello), health: u.perSession ? this.sessionHealth(u.name) : this.health[i]! }));
    // Priming events are 2025-11-25's: a client of an older revision is sent none. A session-less
    // session's clients (2026-07-28) have no GET to resume with: their streams carry no ids.
    const streams = new SessionStreams(() => session.requests.flush(), !sessionLess && hello.protocolVersion >= PRIMING_REVISION, !sessionLess);
    const methods = new AggregateMethods(this.route, upstreams, this.names, this.loggedClashes, this.deps.logger, Date.now, sessionLess);
    const interests = new SessionInterests();
    const session: ClientSession = { owner: principalKey(auth), user, upstreams, methods, lastUsed: Date.now(), streams, inFlight: new Map(), progressTokens: new Map(), serves, requests: new ServerRequests(streams.listening), interests, sessionLess, listens: new Set(), rounds: new InputRounds(), watches: new ListenWatches(methods, interests), untold: new Set() };
    methods.onSubscription = (method, uri, upstream) => session.interests.accepted(method, uri, upstream);
    for (const u of upstreams) this.wire(session, u);
    return session;
  }

  /**
   * A 2026-07-28 principal's session-less session, made at its first request (the user's slot taken
   * before anything else, as for initialize): its upstream sessions open as its requests need them,
   * told the capabilities whose requests a call's rounds carry; it serves none on a stream of its
   * own (only a call's client is asked, in an InputRequiredResult).
   */
  private sessionLessOf(auth: AuthContext, clientInfo: Record<string, unknown> | undefined, declared: Record<string, unknown> = {}): ClientSession {
    const askable = ASKABLE_CAPABILITIES.filter((name) => isRecord(declared[name]));
    const key = `${principalKey(auth)}\n${askable.join(',')}`;
    const known = this.sessions.get(this.sessionLessIds.get(key) ?? '');
    if (known) return known;
    const user = this.slots.take(auth, (u) => this.endLeastRecentIdle(u));
    const capabilities = Object.fromEntries(askable.map((name) => [name, {}]));
    const hello: ClientHello = { protocolVersion: HANDSHAKE_REVISION, capabilities, clientInfo: clientInfo ?? GATEWAY_INFO, clientRevision: MODERN_REVISION };
    const id = randomBytes(24).toString('base64url');
    const session = this.newSession(auth, user, hello, new Set(), true);
    session.sessionLessKey = key;
    this.sessions.set(id, session);
    this.sessionLessIds.set(key, id);
    return session;
  }

  /**
   * 2026-07-28's `server/discover`, without a session: what some upstream
   * announced (as initialize answers), and the revisions this route serves:
   * 2026-07-28 without a session, the older ones after initialize.
   */
  private async discover(message: Message, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    const fault = discoverFault(message.params, SERVED_VERSIONS);
    if (fault) return void res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id ?? null, error: fault }));
    const hello: ClientHello = { protocolVersion: SUPPORTED_VERSIONS[0]!, capabilities: {}, clientInfo: { name: 'mcp-auth-gateway', version: '0.1.0' } };
    const known = await this.capabilities.all(ctx.auth, hello);
    const serverInfo = this.serverInfo();
    const result = { resultType: 'complete', supportedVersions: SERVED_VERSIONS, capabilities: capabilitiesOf(known, 'modern'), serverInfo, ttlMs: 0, cacheScope: 'private', _meta: { 'io.modelcontextprotocol/serverInfo': serverInfo } };
    this.reply(res, ctx, { jsonrpc: '2.0', id: message.id ?? null, result });
  }

  private serverInfo() {
    return { name: 'mcp-auth-gateway', title: `${this.route} (${this.deps.upstreams.map((u) => u.name).join(', ')})`, version: '0.1.0' };
  }

  /**
   * The client's GET stream of this session: held open, written to with what the upstreams say
   * unasked; with `Last-Event-ID`, the stream that id belongs to (this GET stream or a POST's),
   * resumed after it. The id was checked to be this principal's by the route's policy (the store's
   * event-id records); a stream of this session is looked up here.
   */
  private async listen(id: string | undefined, lastEventId: string | undefined, res: ServerResponse, ctx: ForwardContext): Promise<void> {
    if (id === undefined) throw new GatewayError(400, 'invalid_request', 'Mcp-Session-Id is required');
    const session = await this.sessionOf(id, ctx.auth);
    session.lastUsed = Date.now();
    if (lastEventId !== undefined) return this.resume(session, lastEventId, res, ctx);
    if (session.streams.hasListener) throw new GatewayError(409, 'invalid_request', 'This session already has a GET stream');
    // Counted in the user's share (429 beyond), as a GET stream of any route is.
    if (!this.streamQuota.admit(userKey(ctx.auth), res)) return;
    if (!session.streams.listen(res, ctx.transform)) throw new GatewayError(409, 'invalid_request', 'This session already has a GET stream');
    this.tellUntold(session, session.streams.listening);
    this.holdModernListens(session, res);
  }

  /**
   * A stream resumed: 400 when the id names no event of a stream this session keeps, 409 for a GET
   * stream while another is read. A resumed GET stream, and a POST's stream whose answers are still to come (held open
   * like a GET stream), count in the user's share of long-lived streams (429 beyond).
   */
  private resume(session: ClientSession, lastEventId: string, res: ServerResponse, ctx: ForwardContext): void {
    const named = session.streams.named(lastEventId);
    if (!named) throw new GatewayError(400, 'invalid_request', 'Last-Event-ID names no event of a stream this session keeps');
    if ((named.stream.kind === 'get' || !named.stream.done) && !this.streamQuota.admit(userKey(ctx.auth), res)) return;
    const resumed = session.streams.resume(named, res, ctx.transform);
    if (resumed === 'busy') throw new GatewayError(409, 'invalid_request', 'This session already has a GET stream');
    if (named.stream.kind === 'get') {
      this.tellUntold(session, session.streams.listening);
      this.holdModernListens(session, res);
    }
    if (resumed.lost && !this.loggedLosses.has(named.stream.key)) {
      // Once per stream: a client resuming again and again from an old id is not a log line each time.
      if (this.loggedLosses.size >= 1024) this.loggedLosses.clear();
      this.loggedLosses.add(named.stream.key);
      this.deps.logger?.warn({ route: this.route, stream: named.stream.kind, replayed: resumed.replayed }, "aggregated stream resumed after events that fell out of its session's replay buffer: lost answers answered as errors, pending requests sent again");
    }
  }

  /** Upstreams of 2026-07-28 have no GET stream: each listens for list changes while the client's GET stream is open. */
  private holdModernListens(session: ClientSession, res: ServerResponse): void {
    // A listen reopened after it ended: what the upstream announced meanwhile is lost, so every list may have changed.
    const missed = (link: UpstreamLink) => () => LISTS.forEach((kind) => this.notified(session, link, `notifications/${kind}/list_changed`, undefined));
    const held = session.upstreams
      .filter((u) => u.link.speaksModern && !u.health.down)
      .map((u) => u.link.subscribe(ALL_LIST_CHANGES, (method, params) => this.notified(session, u.link, method, params), missed(u.link)).catch(() => undefined));
    res.once('close', () => void Promise.all(held).then((listens) => listens.forEach((l) => l?.stop())));
  }

  /**
   * An upstream's notification, to the stream of the client's POST it came
   * with while that is open, else to the GET stream (none open, or no room:
   * dropped). A changed list is re-read by the session next time it is asked,
   * and the client is told; progress on a token of the client's requests in
   * flight goes to that request's POST (tokens go to the upstream unchanged,
   * and each upstream session is this client session's); logging messages as
   * they are; a resource's update only when the client subscribed to it
   * through that upstream.
   */
  private notified(session: ClientSession, link: UpstreamLink, method: string, given: Record<string, unknown> | undefined, related?: MessageChannel, gatewaysOwn = false): void {
    // Task ids shown as the client knows them; a task notification of a task not the session's is not passed on.
    const params = shownParams(method, given, link.upstream.name, session.methods.tasks);
    if (params === HIDDEN) return;
    const to = related?.open ? related : session.streams.listening;
    if (LIST_CHANGED.has(method)) {
      if (method === 'notifications/resources/list_changed') session.methods.forgetResources();
      const changed = { jsonrpc: '2.0', method };
      // The gateway's own (a rejoin) not written (no GET stream open, no room): told with the client's next stream, never lost.
      // An upstream's is dropped then, as that server reached directly would drop it. Either, written and then fallen out of
      // the replay buffer before the client read it, is told again on a resume.
      if (!to.send(changed, { lost: () => changed }) && gatewaysOwn && !session.sessionLess) session.untold.add(method);
      // A session-less session's listens (an upstream of 2026-07-28 reaches each on a listen of its own instead).
      for (const listen of session.listens) listen.deliver(link.upstream.name, method, undefined);
    } else if (method === 'notifications/progress') {
      // Tokens are the client's and guessable: only the upstream a request was sent to speaks on its progress.
      const request = session.progressTokens.get(JSON.stringify(params?.progressToken));
      if (request?.upstreams.has(link.upstream.name)) (request.channel.open ? request.channel : session.streams.listening).send({ jsonrpc: '2.0', method, params });
    } else if (method === 'notifications/cancelled') session.requests.cancelled(link, params?.requestId, params?.reason);
    else if (method === 'notifications/message' || TASK_NOTIFICATION.test(method)) to.send({ jsonrpc: '2.0', method, ...(params && { params }) });
    else if (method === 'notifications/resources/updated' && session.interests.wants(link.upstream.name, params?.uri)) {
      to.send({ jsonrpc: '2.0', method, params });
      // A session-less session subscribed for its listens (listen-watches.ts): each watching that URI there is told.
      for (const listen of session.listens) listen.deliver(link.upstream.name, method, params);
    }
  }

  /** An upstream link's messages to the client, wired to this session: notifications, requests the client serves, and a rejoin. */
  private wire(session: ClientSession, u: SessionUpstream): void {
    const link = u.link;
    link.onNotification = (method, params, related) => this.notified(session, link, method, params, related);
    link.onRequest = (id, method, given, related) => {
      const asked = link.session;
      // A request made for a task (its related task) names it as the client knows it.
      const shown = shownParams(method, given, link.upstream.name, session.methods.tasks);
      const params = shown === HIDDEN ? given : shown;
      const sink = (upstreamId: string | number, answer: object) => link.respond(asked, { jsonrpc: '2.0', id: upstreamId, ...answer });
      // A session-less call takes what its own client declared; a session's clients what their initialize announced.
      const served = related?.takes ? related.takes(method) : session.serves.has(method);
      if (!served) link.refuse(asked, id, { code: -32601, message: `Method not found: ${method}` });
      else if (!session.requests.asked(link, id, method, params, sink, related)) link.refuse(asked, id, { code: -32603, message: 'Too many requests to the client are pending' });
    };
    link.onRejoined = (result) => this.rejoined(session, u, result);
    link.onGaveUp = () => this.gaveUp(u.health.name);
    link.prober = this.probers[this.health.indexOf(u.health)];
  }

  /**
   * A session with an upstream opened afresh (it restarted, or forgot the old
   * one): it is up; it is told again the client's logging level and
   * subscriptions there; the client is told its lists may have changed.
   */
  private rejoined(session: ClientSession, u: SessionUpstream, result: Record<string, unknown>): void {
    u.health.served();
    u.link.retell(session.interests.replay(u.health.name));
    session.methods.forgetResources();
    const offered = isRecord(result.capabilities) ? result.capabilities : {};
    // On the GET stream (kept for the client's next stream when it cannot be written), and to a session-less session's listens.
    for (const kind of LISTS) if (isRecord(offered[kind])) this.notified(session, u.link, `notifications/${kind}/list_changed`, undefined, undefined, true);
  }

  /** The list changes the client was not told yet, written to `to` (its GET stream just opened, or a POST answered as a stream). */
  private tellUntold(session: ClientSession, to: MessageChannel): void {
    for (const method of session.untold) if (to.send({ jsonrpc: '2.0', method })) session.untold.delete(method);
  }

  /** Logged once per upstream of the route: its GET stream ends too often to be reopened. */
  private gaveUp(upstream: string): void {
    if (this.loggedGiveUps.has(upstream)) return;
    this.loggedGiveUps.add(upstream);
    this.deps.logger?.warn({ route: this.route, upstream }, 'aggregated upstream ends its GET stream again and again: probed slowly from now on (one probe at a time for the route), its sessions joined again when it answers');
  }

  /**
   * A process of this session's own failing says nothing of other sessions': a
   * caller who crashes or wedges its process must not take the upstream from
   * everyone else. Counted in the left-out metric, not in up/down.
   */
  private sessionHealth(name: string): UpstreamHealth {
    const metrics = this.deps.metrics;
    return new UpstreamHealth(this.route, name, undefined, metrics && { upstreamUp: () => undefined, leftOut: metrics.leftOut.bind(metrics), request: metrics.request?.bind(metrics) }, undefined, 'session');
  }

  /**
   * For the policy, before it judges `match.upstream`: the upstream each URI (of a read, a
   * subscription or a completion's `ref/resource`) is routed to in this caller's session, as the
   * request will be (the forwarder then sends it there: `servedBy`). Nothing for a session that is
   * not this caller's here (the request is refused as it is forwarded).
   */
  async servedBy(sessionId: string | undefined, auth: AuthContext, uris: readonly string[], span?: GatewaySpan): Promise<ReadonlyMap<string, string>> {
    // A 2026-07-28 request without a session is served (and so placed) by its principal's session-less session.
    const session = sessionId === undefined ? this.sessionLessOf(auth, undefined) : this.sessions.get(sessionId);
    const served = new Map<string, string>();
    if (!session || session.owner !== principalKey(auth)) return served;
    for (const uri of uris) {
      const upstream = await session.methods.upstreamOf(uri, { auth, span });
      if (upstream !== undefined) served.set(uri, upstream);
    }
    return served;
  }

  /** One message's answer; `single`: the request's only message, whose upstream its span names. */
  private async answer(session: ClientSession, m: Message, ctx: ForwardContext, post: PostStream, single: boolean): Promise<object | undefined> {
    if (typeof m.method !== 'string') return undefined; // an answer from the client: nothing to say back
    const params = isRecord(m.params) ? m.params : undefined;
    if (m.id === undefined) {
      // The client's cancellation of a request in flight reaches the upstream serving it (other notifications are not passed on).
      if (m.method === 'notifications/cancelled') session.inFlight.get(JSON.stringify(params?.requestId))?.abort(typeof params?.reason === 'string' ? params.reason : undefined);
      // The client's roots changed: every upstream session is told (each asks again if it wants them).
      if (m.method === 'notifications/roots/list_changed' && session.serves.has('roots/list')) for (const u of session.upstreams) u.link.notify(m.method);
      return undefined;
    }
    if (m.method === 'initialize') return { jsonrpc: '2.0', id: m.id, ...rpcError(-32600, 'Already initialized') };
    if (m.method === 'resources/subscribe' && !session.interests.admits(params?.uri)) return { jsonrpc: '2.0', id: m.id, ...rpcError(-32603, `At most ${MAX_SUBSCRIPTIONS} resource subscriptions per session`) };
    if (m.method === 'logging/setLevel') session.interests.setLevel(params);
    const key = JSON.stringify(m.id);
    const token = isRecord(params?._meta) ? params._meta.progressToken : undefined;
    const controller = new AbortController();
    session.inFlight.set(key, controller);
    const given = new Set<string>();
    if (token !== undefined) session.progressTokens.set(JSON.stringify(token), { channel: post, upstreams: given });
    try {
      const span = single ? ctx.span : undefined;
      // The upstream the request is sent to: its span names it, and it alone may speak on the request's progress token.
      const routed = (upstream: string) => (given.add(upstream), span?.set('mag.upstream.name', upstream));
      return { jsonrpc: '2.0', id: m.id, ...(await session.methods.answer(m.method, params, { auth: ctx.auth, span: ctx.span, signal: controller.signal, related: post, servedBy: ctx.servedBy, routed })) };
    } finally {
      session.inFlight.delete(key);
      if (token !== undefined) session.progressTokens.delete(JSON.stringify(token));
    }
  }

  /** The answer, as JSON, through the policy's transform when it has one. */
  private reply(res: ServerResponse, ctx: ForwardContext, payload: unknown): void {
    writeJson(res, ctx.transform, payload);
  }

  /** The session a request names: bound to this principal (the hook, across replicas) and held here. */
  private async sessionOf(id: string, auth: AuthContext): Promise<ClientSession> {
    await this.deps.session.admit(id, auth);
    const session = this.sessions.get(id);
    if (!session || session.owner !== principalKey(auth)) throw new GatewayError(404, 'not_found', 'Unknown session');
    return session;
  }

  private async end(id: string | undefined, auth: AuthContext, res: ServerResponse): Promise<void> {
    if (id === undefined) throw new GatewayError(400, 'invalid_request', 'Mcp-Session-Id is required');
    await this.sessionOf(id, auth);
    this.retire(id);
    res.writeHead(200).end();
  }

  private drop(id: string): void {
    const session = this.sessions.get(id);
    if (session) this.slots.give(session.user);
    this.sessions.delete(id);
    session?.streams.end();
    for (const listen of session?.listens ?? []) listen.end();
    session?.rounds.endAll();
    if (session?.sessionLessKey !== undefined && this.sessionLessIds.get(session.sessionLessKey) === id) this.sessionLessIds.delete(session.sessionLessKey);
    for (const u of session?.upstreams ?? []) u.link.close();
  }

  /** Ends a session and its binding in the store (a session-less one has none). */
  private retire(id: string): void {
    const bound = this.sessions.get(id)?.sessionLess !== true;
    this.drop(id);
    if (bound) this.deps.session.release(id);
  }

  /** Room for a user at a bound: their own session with no request in flight that was used least recently ends. */
  private endLeastRecentIdle(user: string): void {
    let oldest: [string, ClientSession] | undefined;
    for (const entry of this.sessions) {
      const s = entry[1];
      if (s.user === user && s.inFlight.size === 0 && s.listens.size === 0 && (oldest === undefined || s.lastUsed < oldest[1].lastUsed)) oldest = entry;
    }
    if (oldest === undefined) return;
    this.retire(oldest[0]);
  }

  private endIdle(): void {
    const before = Date.now() - IDLE_MS;
    // Its binding in the store goes too: left, it would outlive the session by the binding's TTL.
    for (const [id, s] of this.sessions) {
      // A listen open keeps its session (the listen ends with its token).
      if (s.lastUsed >= before || s.listens.size > 0) continue;
      this.retire(id);
    }
  }
}

/** The client's capabilities the upstreams are told of: sampling, elicitation and roots, as the client gave them. */
function clientCapabilities(given: unknown): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  if (!isRecord(given)) return out;
  for (const key of Object.keys(CLIENT_CAPABILITIES)) if (isRecord(given[key])) out[key] = given[key];
  return out;
}

function headerOf(req: IncomingMessage, name: string): string | undefined {
  const raw = req.headers[name];
  return Array.isArray(raw) ? raw.join(', ') : raw;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
