// The answer to one client POST of an aggregated session (DESIGN §8.2): JSON,
// unless a message belonging to its requests (their progress, an upstream's
// request or notification sent with their answer) has to reach the client
// first and the client accepts an event stream. Then the answer becomes an
// event stream, its head written with the first such message, carrying them
// as they come and the JSON-RPC answers last, one event each; through the
// policy's transform like any answer. What it holds unread counts in the
// session's bound (session-streams.ts).
import type { ServerResponse } from 'node:http';
import { privateCacheControl } from '../headers.js';
import type { BodyTransform, ResponseTransform } from '../response-transform.js';
import { EVENT_STREAM_HEAD, messageEvent } from '../sse/client-streams.js';
import type { MessageChannel, SessionStreams } from './session-streams.js';

export class PostStream implements MessageChannel {
  private streaming = false;
  private body?: BodyTransform;
  private answered = false;

  constructor(
    private readonly res: ServerResponse,
    private readonly streams: SessionStreams,
    private readonly transform: ResponseTransform | undefined,
    /** The client's Accept names text/event-stream. */
    private readonly acceptsEvents: boolean,
  ) {
    streams.count(res);
  }

  get open(): boolean {
    return this.acceptsEvents && !this.answered && !this.res.writableEnded && !this.res.destroyed;
  }

  send(message: object): boolean {
    if (!this.open || !this.streams.hasRoom(this.res)) return false;
    if (!this.streaming) this.start();
    return this.emit(messageEvent(JSON.stringify(message)));
  }

  /** Whether the answer became an event stream (its head is written: its status can no longer change). */
  get started(): boolean {
    return this.streaming;
  }

  /** The POST's answers (an array for a batch): as JSON (with `status`) when nothing went before them, else as the stream's last events. */
  answer(payload: unknown, status = 200): void {
    this.answered = true;
    if (!this.streaming) return writeJson(this.res, this.transform, payload, status);
    for (const message of Array.isArray(payload) ? payload : [payload]) if (!this.emit(messageEvent(JSON.stringify(message)))) return;
    let tail: Buffer | undefined;
    try {
      tail = this.body?.end();
    } catch {
      return void this.res.destroy(); // the filter refused the answer: never passed unfiltered
    }
    this.res.end(tail);
  }

  private start(): void {
    this.streaming = true;
    this.body = this.transform?.({ 'content-type': EVENT_STREAM_HEAD['content-type'] });
    // A filtered stream is this caller's alone, as a filtered JSON answer is.
    const head = this.body?.perCaller ? { ...EVENT_STREAM_HEAD, 'cache-control': privateCacheControl(EVENT_STREAM_HEAD['cache-control']) } : EVENT_STREAM_HEAD;
    this.res.writeHead(200, head);
    this.res.flushHeaders();
  }

  /** One event through the transform; false when the transform refused it (the stream is then cut, fail closed). */
  private emit(event: Buffer): boolean {
    let out = event;
    try {
      if (this.body) out = this.body.push(event);
    } catch {
      this.res.destroy();
      return false;
    }
    if (out.length > 0 && !this.res.writableEnded && !this.res.destroyed) this.res.write(out);
    return true;
  }
}

/** An answer as JSON, through the policy's transform when it has one. */
export function writeJson(res: ServerResponse, transform: ResponseTransform | undefined, payload: unknown, status = 200): void {
  const head: Record<string, string> = { 'content-type': 'application/json' };
  const text = JSON.stringify(payload);
  let body = Buffer.from(text);
  const rewrite = transform?.(head);
  // A reader of the answer (the tools/list learner) takes the value it is made from, not its text read again.
  if (rewrite?.readValue) rewrite.readValue(payload, text);
  else if (rewrite) body = Buffer.concat([rewrite.push(body), rewrite.end()]);
  if (rewrite?.perCaller) head['cache-control'] = 'private';
  res.writeHead(status, { ...head, 'content-length': String(body.length) });
  res.end(body);
}

/** Whether a request's Accept header takes an event stream. */
export function acceptsEventStream(accept: string | string[] | undefined): boolean {
  const value = Array.isArray(accept) ? accept.join(',') : (accept ?? '');
  return value.split(',').some((type) => type.split(';')[0]!.trim().toLowerCase() === 'text/event-stream');
}
