// The answer to one client POST of an aggregated session (DESIGN §8.2): JSON,
// unless a message belonging to its requests (their progress, an upstream's
// request or notification sent with their answer) has to reach the client
// first and the client accepts an event stream. Then the answer becomes an
// event stream of the session's (client-event-stream.ts), its head written
// with the first such message, carrying them as they come and the JSON-RPC
// answers last, one event each, every event with an id; through the policy's
// transform like any answer. A client that loses it resumes it with
// `Last-Event-ID`: until its answers are written, what belongs to it is kept
// for that. What it holds unread counts in the session's bound
// (session-streams.ts).
import type { ServerResponse } from 'node:http';
import type { ResponseTransform } from '../response-transform.js';
import type { ClientEventStream, SendOptions } from './client-event-stream.js';
import type { MessageChannel, SessionStreams } from './session-streams.js';

export class PostStream implements MessageChannel {
  /** Its event stream, from the first message that goes before the answers. */
  private stream?: ClientEventStream;
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

  /** Until its answers are written: while its client reads it, or, once it is a stream, may resume it. */
  get open(): boolean {
    if (!this.acceptsEvents || this.answered) return false;
    if (this.stream?.resumable) return !this.stream.forgotten;
    return !this.res.writableEnded && !this.res.destroyed;
  }

  get connected(): boolean {
    return this.open && (this.stream ? this.stream.attached : true);
  }

  /** Whether the answer became an event stream (its head is written: its status can no longer change). */
  get started(): boolean {
    return this.stream !== undefined;
  }

  send(message: object, how?: SendOptions): boolean {
    if (!this.open) return false;
    if (!this.stream) {
      if (!this.streams.hasRoom(this.res)) return false;
      this.stream = this.streams.stream('post');
      this.stream.attach(this.res, this.transform);
    }
    return this.stream.send(message, how);
  }

  /**
   * The POST's answers (an array for a batch): as JSON (with `status`) when nothing went before
   * them, else as the stream's last events (kept for a resume; one lost from the buffer is answered
   * as an error).
   */
  answer(payload: unknown, status = 200): void {
    this.answered = true;
    if (!this.stream) return writeJson(this.res, this.transform, payload, status);
    for (const message of Array.isArray(payload) ? payload : [payload]) {
      const id = isRecord(message) ? message.id : undefined;
      if (!this.stream.send(message as object, { force: true, lost: () => lostAnswer(id) })) break;
    }
    this.stream.finish();
  }
}

/** What a client resuming a stream gets for an answer that fell out of the session's replay buffer before it read it. */
export const lostAnswer = (id: unknown) => ({
  jsonrpc: '2.0',
  id: id ?? null,
  error: { code: -32603, message: 'The answer was lost: the client left its stream, and the answer fell out of what this session keeps to resume it' },
});

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

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
