// One MCP session on one child process, of one principal. The bridge between
// Streamable HTTP and the child's stdin/stdout: client requests get ids of the
// gateway's own (so the answers of concurrent POSTs, batches or a client that
// repeats ids can never be confused), responses go back to the POST that asked
// with the client's id restored, and the server's own messages go to the POST
// they relate to (progress by token, a listen's frames by subscription id) or
// else an open POST stream (never a 2026-07-28 client's), else the session's
// GET stream. A server request no client stream can carry is
// answered with an error at once, so the server never waits for nothing.
import { GatewayError } from '../../errors/gateway-error.js';
import { errorResponse, isObject, isRequest, isResponse, progressToken, UPSTREAM_GONE, type JsonRpcId, type Message } from './messages.js';
import type { SseSink } from './sse-sink.js';
import type { StdioChild } from './stdio-child.js';
import type { ProcessEndReason } from './stdio-deps.js';

/** Where the responses to some requests go: a client's POST (post-answer.ts), or the gateway's own initialize. */
export interface Answer {
  /** Requests still waiting for their response. */
  outstanding: number;
  /** An event stream that may carry the server's messages unrelated to its requests (never a 2026-07-28 client's: that revision forbids them there). */
  readonly streaming: boolean;
  respond(message: Message): void;
  /** A related server message; false when this answer cannot carry it. */
  relay(message: Message): boolean;
  fail(error: GatewayError, waiting: JsonRpcId[], rpcMessage: string): void;
}

interface Pending {
  answer: Answer;
  clientId: JsonRpcId;
  progress?: JsonRpcId;
}

/** Where a listen stream's frames name the listen (the `subscriptions/listen` request's id). */
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

/** The listen a server message belongs to, as the process knows it (the gateway's id), if it names one. */
function subscriptionIdOf(message: Message): number | undefined {
  const params = message.params;
  if (!isObject(params) || !isObject(params._meta)) return undefined;
  const id = params._meta[SUBSCRIPTION_ID];
  return typeof id === 'number' ? id : undefined;
}

export class StdioSession {
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private used = false;
  /** The session's GET stream, when the client holds one open. */
  stream: SseSink | undefined;
  lastActivity = Date.now();
  ended = false;
  /** Why it ended (the error its requests get). */
  private endedWhy = 'Upstream process exited';
  child!: StdioChild;
  /** Stops the process, recording why (set by the pool). */
  stopWith!: (why: ProcessEndReason) => Promise<void>;

  constructor(
    /** The `Mcp-Session-Id` the gateway minted; undefined for the per-principal process of stateless (2026-07-28) clients. */
    readonly id: string | undefined,
    /** principalKey of the owner: no other principal is ever let in. */
    readonly owner: string,
  ) {}

  /** Whether the session has work in flight, or is still being set up (nothing sent yet): such a process is never idle. */
  get busy(): boolean {
    return !this.used || this.pending.size > 0;
  }

  /** Writes client messages to the process; the requests among them are answered through `answer`. */
  send(messages: Message[], answer: Answer | undefined): void {
    // Ended before anything was sent (a process that could not start, e.g. out of descriptors): said now, not after a timeout.
    if (this.ended) return void answer?.fail(new GatewayError(502, 'bad_gateway', this.endedWhy), messages.filter(isRequest).map((m) => m.id as JsonRpcId), this.endedWhy);
    this.used = true;
    this.lastActivity = Date.now();
    for (const message of messages) {
      if (answer && isRequest(message)) {
        const id = this.nextId++;
        this.pending.set(id, { answer, clientId: message.id as JsonRpcId, progress: progressToken(message) });
        answer.outstanding++;
        this.child.send({ ...message, id });
      } else if (message.method === 'notifications/cancelled') {
        this.child.send(this.cancelledForChild(message));
      } else {
        this.child.send(message);
      }
    }
  }

  /** The client's cancellation names its own id: the process knows ours. */
  private cancelledForChild(message: Message): Message {
    const params = isObject(message.params) ? message.params : {};
    for (const [id, p] of this.pending) {
      if (p.clientId === params.requestId) {
        this.pending.delete(id);
        return { ...message, params: { ...params, requestId: id } };
      }
    }
    return message;
  }

  /** A POST answer ended before all its responses came (client gone, timeout): the process is told to stop working on them. */
  abandon(answer: Answer, reason: string): void {
    for (const [id, p] of this.pending) {
      if (p.answer !== answer) continue;
      this.pending.delete(id);
      this.child.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason } });
    }
  }

  /** One message (or batch) from the process's stdout. */
  receive(payload: unknown): void {
    if (this.ended) return;
    for (const message of Array.isArray(payload) ? payload : [payload]) {
      if (isObject(message)) this.route(message);
    }
  }

  // Only what reaches a client counts as activity: a server that keeps talking
  // to no one (periodic logging, resource updates) is idle, else one left
  // behind without a DELETE would hold its process, and max_processes, forever.
  private route(message: Message): void {
    if (isResponse(message)) {
      const pending = typeof message.id === 'number' ? this.pending.get(message.id) : undefined;
      if (!pending) return; // an answer to a request already abandoned, or to nothing
      this.pending.delete(message.id as number);
      this.lastActivity = Date.now();
      pending.answer.respond({ ...message, id: pending.clientId });
      return;
    }
    const subscription = subscriptionIdOf(message);
    if (subscription !== undefined) return this.toSubscription(message, subscription);
    const target = this.relatedAnswer(message);
    if (target?.relay(message)) {
      this.lastActivity = Date.now();
      return;
    }
    if (this.stream && !this.stream.closed) {
      this.lastActivity = Date.now();
      // A message too deep to serialise is dropped, as one no stream can carry.
      this.stream.write(message);
      return;
    }
    // No stream to carry it: a request is refused now (the server would wait forever), a notification dropped.
    if (isRequest(message)) this.child.send(errorResponse(message.id as JsonRpcId, UPSTREAM_GONE, 'No client stream is open to carry this request'));
  }

  /**
   * A frame of a `subscriptions/listen` stream (2026-07-28) goes to that listen's POST alone, naming
   * it by the client's id; one whose listen is over (the client left, the process was told) is dropped.
   */
  private toSubscription(message: Message, subscription: number): void {
    const pending = this.pending.get(subscription);
    if (!pending) return;
    const params = message.params as Message;
    const relayed = { ...message, params: { ...params, _meta: { ...(params._meta as Message), [SUBSCRIPTION_ID]: pending.clientId } } };
    if (pending.answer.relay(relayed)) this.lastActivity = Date.now();
  }

  /** The POST a server message belongs to: by progress token or cancelled id, else the oldest open event stream. */
  private relatedAnswer(message: Message): Answer | undefined {
    const params = isObject(message.params) ? message.params : {};
    if (message.method === 'notifications/progress' || message.method === 'notifications/cancelled') {
      for (const [id, p] of this.pending) {
        if (p.progress !== undefined && p.progress === params.progressToken) return p.answer;
        if (message.method === 'notifications/cancelled' && id === params.requestId) {
          // The server gave up on a request: it ends as an error response to the client's id.
          this.pending.delete(id);
          p.answer.respond(errorResponse(p.clientId, UPSTREAM_GONE, 'The server cancelled the request'));
          return undefined;
        }
      }
      if (message.method === 'notifications/cancelled') return undefined;
    }
    for (const p of this.pending.values()) if (p.answer.streaming) return p.answer;
    return undefined;
  }

  /** The process is gone: every waiting request fails, the GET stream ends. */
  end(why: string): void {
    if (this.ended) return;
    this.ended = true;
    this.endedWhy = why;
    const byAnswer = new Map<Answer, JsonRpcId[]>();
    for (const p of this.pending.values()) byAnswer.set(p.answer, [...(byAnswer.get(p.answer) ?? []), p.clientId]);
    this.pending.clear();
    const error = new GatewayError(502, 'bad_gateway', why);
    for (const [answer, ids] of byAnswer) answer.fail(error, ids, why);
    this.stream?.end();
    this.stream = undefined;
  }
}
