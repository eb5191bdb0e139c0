// Writing to the client in Streamable HTTP: the event-stream head, one
// JSON-RPC message per `message` event, and the session's GET stream. A client
// that reads slower than the upstream speaks is cut once it leaves more than
// max_body_bytes unread, rather than held in the gateway's memory.
import type { ServerResponse } from 'node:http';
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

/** A session's GET stream: the server's own requests and notifications. */
export class ClientStream {
  /** Resolves when the response is over (the client left, or end()). */
  readonly closed: Promise<void>;

  constructor(
    private readonly res: ServerResponse,
    private readonly scope: SseScope,
    onClose: () => void,
  ) {
    res.writeHead(200, EVENT_STREAM_HEAD);
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
    writeBounded(this.res, messageEvent(json), this.scope.limits.maxBytes);
  }

  /** Ends the stream cleanly (session over, shutdown). */
  end(): void {
    if (!this.res.writableEnded) this.res.end();
  }
}
