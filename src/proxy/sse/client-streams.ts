// Writing to the client in Streamable HTTP: the event-stream head, one
// JSON-RPC message per `message` event, and the session's GET stream. A client
// that reads slower than the upstream speaks is cut once it leaves more than
// max_body_bytes unread, rather than held in the gateway's memory.
import type { ServerResponse } from 'node:http';
import { privateCacheControl } from '../headers.js';
import type { BodyTransform, ResponseTransform } from '../response-transform.js';
import type { SseScope } from './sse-scope.js';

export const EVENT_STREAM_HEAD = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' } as const;

/** One message as an SSE `message` event (a JSON text has no CR; an LF starts another data line). */
export const messageEvent = (json: string): Buffer => Buffer.from(`event: message\ndata: ${json.replaceAll('\n', '\ndata: ')}\n\n`);

/** Writes unless the client already leaves `maxBytes` unread; then the response is cut. False when it was not written. */
export function writeBounded(res: ServerResponse, chunk: Buffer, maxBytes: number): boolean {
  if (res.writableEnded || res.destroyed) return false;
  if (res.writableLength > maxBytes) {
    res.destroy();
    return false;
  }
  res.write(chunk);
  return true;
}

/**
 * A session's GET stream: the server's own requests and notifications, through
 * the route's response transform like any answer (a tool list the server puts
 * here is filtered as on a POST); a transform that refuses an event cuts the
 * stream (fail closed).
 */
export class ClientStream {
  /** Resolves when the response is over (the client left, or end()). */
  readonly closed: Promise<void>;
  private readonly body: BodyTransform | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly scope: SseScope,
    onClose: () => void,
    transform?: ResponseTransform,
  ) {
    this.body = transform?.(EVENT_STREAM_HEAD);
    // A filtered stream is this caller's alone, as on the other forwarders.
    const head = this.body?.perCaller ? { ...EVENT_STREAM_HEAD, 'cache-control': privateCacheControl(EVENT_STREAM_HEAD['cache-control']) } : EVENT_STREAM_HEAD;
    res.writeHead(200, head);
    res.flushHeaders();
    scope.metrics?.streamOpened();
    this.closed = new Promise((resolve) =>
      res.once('close', () => {
        scope.metrics?.streamClosed();
        onClose();
        resolve();
      }),
    );
  }

  send(json: string): void {
    let event = messageEvent(json);
    try {
      if (this.body) event = this.body.push(event);
    } catch (err) {
      this.scope.logger?.warn({ route: this.scope.route, reason: (err as Error).message }, 'upstream message refused by the response filter; GET stream cut');
      this.res.destroy();
      return;
    }
    if (event.length > 0) writeBounded(this.res, event, this.scope.limits.maxBytes);
  }

  /** Ends the stream cleanly (session over, shutdown). */
  end(): void {
    if (this.res.writableEnded) return;
    let tail: Buffer | undefined;
    try {
      tail = this.body?.end();
    } catch {
      this.res.destroy();
      return;
    }
    this.res.end(tail);
  }
}
