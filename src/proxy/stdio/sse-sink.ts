// Writes JSON-RPC messages to a client as an event stream (the response of a
// POST, or the session's GET stream), through the route's response transform
// (tools/list filtering) exactly as the HTTP forwarder applies it. The head is
// written with the first message, so a sink that never gets one can still
// answer with an HTTP error. A client that reads slower than the process
// speaks is cut once it leaves more than `maxUnreadBytes` unread, rather than
// held in the gateway's memory (as the legacy SSE bridge does).
import type { ServerResponse } from 'node:http';
import { privateCacheControl } from '../headers.js';
import type { BodyTransform, ResponseTransform } from '../response-transform.js';
import { serialised } from './messages.js';

export const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' } as const;

export class SseSink {
  private body: BodyTransform | undefined;
  headSent = false;
  closed = false;

  constructor(
    readonly res: ServerResponse,
    private readonly transform: ResponseTransform | undefined,
    /** The route's max_body_bytes. */
    private readonly maxUnreadBytes: number,
    private readonly extraHeaders: Record<string, string> = {},
  ) {}

  /** Sends the head now (a GET stream opens at once). */
  open(flush = true): void {
    if (this.headSent || this.res.writableEnded) return;
    this.headSent = true;
    const headers: Record<string, string> = { ...SSE_HEADERS, ...this.extraHeaders };
    this.body = this.transform?.(headers);
    // A filtered answer is this caller's alone, as on the HTTP forwarder.
    if (this.body?.perCaller) headers['cache-control'] = privateCacheControl(headers['cache-control']);
    this.res.writeHead(200, headers);
    if (flush) this.res.flushHeaders();
  }

  /**
   * One message as one event; `last` ends the stream with it, in the same write. A transform that
   * refuses it cuts the stream (fail closed). False, with nothing written and nothing ended, when
   * the message cannot be serialised (a child's answer nested deeper than JSON.stringify goes): the
   * caller says so to the client in its place.
   */
  write(message: unknown, last = false): boolean {
    if (this.closed || this.res.writableEnded) return true;
    if (this.res.writableLength > this.maxUnreadBytes) {
      this.closed = true;
      this.res.destroy();
      return true;
    }
    const data = serialised(message);
    if (data === undefined) return false;
    // A POST's answer sends its head with the first event: one packet, not two (two small writes
    // meet Nagle and the client's delayed ACK, about 40 ms per answer).
    this.open(false);
    let bytes: Buffer = Buffer.from(`event: message\ndata: ${data}\n\n`);
    try {
      if (this.body) bytes = this.body.push(bytes);
    } catch {
      this.closed = true;
      this.res.destroy();
      return true;
    }
    if (!last) {
      if (bytes.length > 0) this.res.write(bytes);
      return true;
    }
    this.closed = true;
    try {
      const tail = this.body?.end();
      if (tail && tail.length > 0) bytes = Buffer.concat([bytes, tail]);
    } catch {
      this.res.destroy();
      return true;
    }
    this.res.end(bytes);
    return true;
  }

  end(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.res.writableEnded) return;
    try {
      const tail = this.body?.end();
      if (tail && tail.length > 0) this.res.write(tail);
    } catch {
      this.res.destroy();
      return;
    }
    this.res.end();
  }
}
