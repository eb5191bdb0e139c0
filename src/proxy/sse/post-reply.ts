// The answer to one client POST of a legacy SSE session. The upstream answers
// on its GET stream, so the reply waits for the answers to its requests (by
// id) and writes them as Streamable HTTP does: as JSON when the answers are
// all it has to say and the client accepts JSON, otherwise as an event stream
// that also carries the progress of its requests. The head is written lazily,
// so a reply that never got anything can still be an honest 504 or 502.
import type { ServerResponse } from 'node:http';
import { GatewayError } from '../../errors/gateway-error.js';
import { writeError } from '../../errors/write-error.js';
import { privateCacheControl } from '../headers.js';
import type { BodyTransform, ResponseTransform } from '../response-transform.js';
import { EVENT_STREAM_HEAD, messageEvent, writeBounded } from './client-streams.js';
import { errorAnswer, type ClientRequest } from './messages.js';
import type { SseScope } from './sse-scope.js';

export interface ReplyOptions {
  requests: readonly ClientRequest[];
  /** The client's body was a batch: JSON answers go back as an array. */
  batch: boolean;
  acceptsJson: boolean;
  acceptsEventStream: boolean;
  transform?: ResponseTransform;
  /** Announced in the head: the session this POST (an initialize) created. */
  newSessionId?: string;
  /** The HTTP status of a single error answer, where the client's revision binds one (modern-error-status.ts); set for such a client only. */
  errorStatus?: (message: Record<string, unknown>) => number | undefined;
  /** The reply ended: `cancelled` when the client left before every answer came. */
  onEnd(reply: PostReply, cancelled: boolean): void;
  /** No answer within upstream_timeout. */
  onTimeout(reply: PostReply): void;
}

/** A filtered answer is this caller's alone, as on the other forwarders: no shared cache may keep it. */
const privateWhen = (body: BodyTransform | undefined) => (body?.perCaller ? { 'cache-control': privateCacheControl(EVENT_STREAM_HEAD['cache-control']) } : {});

/** JSON-RPC error code of a request that timed out (the MCP SDKs' RequestTimeout). */
export const REQUEST_TIMEOUT = -32001;

export class PostReply {
  /** idKey (of the id the upstream sees) → the requests still waiting for their answer. */
  readonly waiting = new Map<string, ClientRequest>();
  private head: 'none' | 'json' | 'events' = 'none';
  private body: BodyTransform | undefined;
  private readonly collected: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  private finished = false;
  /** Why it ended without every answer (the error's code, `cancelled_client`, `filter_refused`): its span's error.type. */
  failure: string | undefined;
  private resolveDone!: () => void;
  /** Resolves when the response is over. */
  readonly done = new Promise<void>((resolve) => (this.resolveDone = resolve));

  constructor(
    private readonly res: ServerResponse,
    private readonly scope: SseScope,
    private readonly opts: ReplyOptions,
  ) {
    for (const r of opts.requests) this.waiting.set(r.key, r);
    this.touch();
    res.once('close', () => this.finish(true));
  }

  /** The requests of its POST, answered or not. */
  get requests(): readonly ClientRequest[] {
    return this.opts.requests;
  }

  /** Something of the upstream's answer was written (so a new session's id reached the client). */
  get answered(): boolean {
    return this.head !== 'none';
  }

  get isOver(): boolean {
    return this.finished;
  }

  /** A listen's frame came (2026-07-28): the stream is acknowledged and held until the client leaves, with no answer to wait for. */
  listening(json: string): void {
    clearTimeout(this.timer);
    this.relay(json);
  }

  /** Progress came: the request is alive, its timeout starts again (as the SDKs' resetTimeoutOnProgress). */
  touch(): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.opts.onTimeout(this), this.scope.limits.timeoutMs).unref();
  }

  /** The answer to one of its requests. */
  answer(key: string, json: string): void {
    if (this.finished || !this.waiting.delete(key)) return;
    if (this.head === 'events') this.emit(json);
    else this.collected.push(json);
    if (this.waiting.size > 0) {
      if (this.head === 'none' && !this.opts.acceptsJson) this.startEvents();
      return;
    }
    if (this.head === 'none' && this.opts.acceptsJson) return this.writeJson();
    if (this.head === 'none') this.startEvents();
    this.endEvents();
  }

  /** Whether the server's messages unrelated to its requests may ride on it: never a 2026-07-28 client's (that revision forbids them there). */
  get carriesUnrelated(): boolean {
    return this.opts.errorStatus === undefined;
  }

  /** A message related to this POST (progress, or a server request while it waits). False when this reply cannot carry it. */
  relay(json: string): boolean {
    if (this.finished || !this.opts.acceptsEventStream) return false;
    if (this.head === 'none') this.startEvents();
    this.emit(json);
    return true;
  }

  /** No answer will come: an HTTP error while nothing was sent, else a JSON-RPC error answer per waiting request. */
  fail(err: GatewayError, code: number): void {
    if (this.finished) return;
    this.failure ??= err.code;
    if (this.head === 'none' && this.collected.length === 0) {
      writeError(this.res, err);
      return this.finish(false);
    }
    if (this.head === 'none') this.startEvents();
    for (const r of this.waiting.values()) this.emit(errorAnswer(r.id, code, err.description));
    this.waiting.clear();
    this.endEvents();
  }

  private writeJson(): void {
    const json = this.opts.batch ? `[${this.collected.join(',')}]` : this.collected[0]!;
    let out = Buffer.from(json);
    const body = this.opts.transform?.({ 'content-type': 'application/json' });
    if (body) {
      try {
        out = Buffer.concat([body.push(out), body.end()]);
      } catch (err) {
        return this.refused(err as Error);
      }
    }
    this.head = 'json';
    this.res.writeHead(this.jsonStatus(json), { ...this.sessionHeader(), ...privateWhen(body), 'content-type': 'application/json', 'content-length': out.length });
    this.res.end(out);
    this.finish(false);
  }

  /** 200, or the status the client's revision binds to a single error answer. */
  private jsonStatus(json: string): number {
    if (this.opts.batch || this.opts.errorStatus === undefined) return 200;
    return this.opts.errorStatus(JSON.parse(json) as Record<string, unknown>) ?? 200;
  }

  private startEvents(): void {
    this.head = 'events';
    this.body = this.opts.transform?.({ 'content-type': 'text/event-stream' });
    this.res.writeHead(200, { ...this.sessionHeader(), ...EVENT_STREAM_HEAD, ...privateWhen(this.body) });
    this.res.flushHeaders();
    this.scope.metrics?.streamOpened();
    for (const json of this.collected.splice(0)) this.emit(json);
  }

  private emit(json: string): void {
    if (this.finished) return;
    let event = messageEvent(json);
    if (this.body) {
      try {
        event = this.body.push(event);
      } catch (err) {
        return this.refused(err as Error);
      }
    }
    if (event.length > 0) writeBounded(this.res, event, this.scope.limits.maxBytes);
  }

  private endEvents(): void {
    if (this.finished) return;
    let tail: Buffer | undefined;
    try {
      tail = this.body?.end();
    } catch (err) {
      return this.refused(err as Error);
    }
    if (!this.res.writableEnded) this.res.end(tail);
    this.finish(false);
  }

  /** The response filter refused the upstream's answer: never passed unfiltered (fail closed). */
  private refused(err: Error): void {
    this.failure ??= 'filter_refused';
    this.scope.logger?.warn({ route: this.scope.route, reason: err.message }, 'upstream response refused by the response filter');
    if (this.head === 'events') this.res.destroy();
    else writeError(this.res, new GatewayError(502, 'bad_gateway', 'Upstream response could not be filtered'));
    this.finish(false);
  }

  private sessionHeader(): Record<string, string> {
    return this.opts.newSessionId === undefined ? {} : { 'mcp-session-id': this.opts.newSessionId };
  }

  private finish(clientLeft: boolean): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.timer);
    if (clientLeft && this.waiting.size > 0) this.failure ??= 'cancelled_client';
    if (this.head === 'events') this.scope.metrics?.streamClosed();
    this.opts.onEnd(this, clientLeft && this.waiting.size > 0);
    this.resolveDone();
  }
}
