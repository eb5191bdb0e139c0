// The answer to one POST that carried requests: the responses to those
// requests (and, on an event stream, the server's messages related to them)
// go back to this client. JSON when the client does not accept an event
// stream: one body once every response is in. A client that accepts both
// gets an event stream only once there is more than its one response to
// carry (a related server message, or a response of a batch with more to
// come): a lone response goes back as JSON, which the transport allows and
// which costs the gateway and the client less than an event stream (no
// chunked framing, no event parsing: issue 23). Until the first byte is
// written, an HTTP error is still possible: a process that does not answer
// within the route's upstream_timeout gets the client a 504, one that exits
// a 502. After that, a failure is a JSON-RPC error per unanswered request.
import type { ServerResponse } from 'node:http';
import { GatewayError } from '../../errors/gateway-error.js';
import { writeError } from '../../errors/write-error.js';
import { privateCacheControl } from '../headers.js';
import type { AnswerValueSink } from '../forwarder.js';
import type { ResponseTransform } from '../response-transform.js';
import { errorResponse, serialised, type JsonRpcId, type Message } from './messages.js';
import { SseSink } from './sse-sink.js';
import type { Answer } from './stdio-session.js';

export interface PostAnswerOptions {
  res: ServerResponse;
  /** The client accepts `text/event-stream`. */
  stream: boolean;
  /** The body was a batch: a JSON answer is an array. */
  batch: boolean;
  transform?: ResponseTransform;
  /** Headers of the answer (the new session's `Mcp-Session-Id`). */
  headers?: Record<string, string>;
  timeoutMs: number;
  /** The route's max_body_bytes: what an event-stream client may leave unread before it is cut. */
  maxUnreadBytes: number;
  /**
   * The HTTP status of an error answer, where the client's revision binds one (2026-07-28:
   * modern-error-status.ts); set for such a client, whose stream carries only its request's own messages.
   */
  errorStatus?: (message: Message) => number | undefined;
  /** The answer is complete, failed or abandoned by the client. */
  done(outcome: 'complete' | 'timeout' | 'client_gone'): void;
}

/** A child's answer the gateway cannot write back (nested too deep to serialise). */
const UNWRITABLE = new GatewayError(502, 'bad_gateway', 'The upstream answer could not be forwarded');

export class PostAnswer implements Answer {
  /** The event stream, opened by the first message that needs one (none: the answer is JSON). */
  private sink: SseSink | undefined;
  private readonly collected: Message[] = [];
  private readonly timer: NodeJS.Timeout;
  /** Requests of this POST still waiting for their response, by the client's id. */
  outstanding = 0;
  finished = false;

  constructor(private readonly options: PostAnswerOptions) {
    this.timer = setTimeout(() => this.timeout(), options.timeoutMs);
    this.timer.unref();
    options.res.on('close', () => {
      if (!this.finished) this.finish('client_gone');
    });
  }

  get streaming(): boolean {
    return this.options.stream && this.options.errorStatus === undefined;
  }

  /** The event stream, opened now if it is not yet (for a client that accepts one). */
  private stream(): SseSink {
    this.sink ??= new SseSink(this.options.res, this.options.transform, this.options.maxUnreadBytes, this.options.headers);
    return this.sink;
  }

  /**
   * The response to one of this POST's requests. One that cannot be written (too deep to serialise)
   * ends the answer all the same: a 502 while nothing is written, else an error response in its place.
   */
  respond(message: Message): void {
    if (this.finished) return;
    this.outstanding--;
    const status = this.options.batch || this.sink?.headSent ? undefined : this.options.errorStatus?.(message);
    if (status !== undefined) {
      clearTimeout(this.timer);
      this.collected.push(message);
      return this.writeJson(status);
    }
    const last = this.outstanding <= 0;
    // A stream already open carries the rest; one is opened for a response with more to come.
    if (this.sink || (this.options.stream && !last)) {
      const sink = this.stream();
      clearTimeout(this.timer);
      if (!sink.write(message, last)) {
        if (!sink.headSent) return this.fail(UNWRITABLE, [], UNWRITABLE.message);
        sink.write(errorResponse(message.id as JsonRpcId, -32603, UNWRITABLE.message), last);
      }
      if (last) this.finish('complete');
      return;
    }
    this.collected.push(message);
    if (this.outstanding <= 0) this.writeJson();
  }

  /** A server message related to this POST (progress, sampling, elicitation): event streams only. */
  relay(message: Message): boolean {
    if (this.finished || !this.options.stream) return false;
    clearTimeout(this.timer);
    this.stream().write(message);
    return true;
  }

  /** The process is gone: an HTTP error if nothing was written yet, else a JSON-RPC error per request still waiting. */
  fail(error: GatewayError, waiting: JsonRpcId[], rpcMessage: string): void {
    if (this.finished) return;
    if (!this.sink?.headSent) {
      this.finish('complete');
      writeError(this.options.res, error);
      return;
    }
    for (const id of waiting) this.sink.write(errorResponse(id, -32603, rpcMessage));
    this.sink.end();
    this.finish('complete');
  }

  private writeJson(status = 200): void {
    const { res, batch, transform, headers } = this.options;
    const payload = batch ? this.collected : this.collected[0];
    const head: Record<string, string> = { 'content-type': 'application/json', ...headers };
    const text = serialised(payload);
    if (text === undefined) return this.fail(UNWRITABLE, [], UNWRITABLE.message);
    let bytes: Buffer = Buffer.from(text);
    let asSerialised = true;
    try {
      const body = transform?.(head);
      // A reader of the answer (the tools/list learner) takes the value the text was made from, not the text read again.
      if (body?.readValue) body.readValue(payload, text);
      else if (body) {
        bytes = Buffer.concat([body.push(bytes), body.end()]);
        asSerialised = false;
      }
      // A filtered answer is this caller's alone, as on the HTTP forwarder.
      if (body?.perCaller) head['cache-control'] = privateCacheControl(head['cache-control']);
    } catch {
      this.finish('complete');
      writeError(res, new GatewayError(502, 'bad_gateway', 'Upstream response could not be filtered'));
      return;
    }
    this.finish('complete');
    if (res.writableEnded) return;
    res.writeHead(status, { ...head, 'content-length': String(bytes.length) });
    // Answering into memory (an aggregated route's upstream): the value too, so it is not parsed again.
    if (asSerialised) (res as Partial<AnswerValueSink>).keepAnswerValue?.(payload);
    res.end(bytes);
  }

  private timeout(): void {
    if (this.finished) return;
    if (this.sink?.headSent) return;
    this.finish('timeout');
    writeError(this.options.res, new GatewayError(504, 'gateway_timeout', 'Upstream did not answer in time'));
  }

  private finish(outcome: 'complete' | 'timeout' | 'client_gone'): void {
    if (this.finished) return;
    this.finished = true;
    clearTimeout(this.timer);
    this.options.done(outcome);
  }
}
