// The Node HTTP server with the gateway's own limits: Node's defaults keep
// slow clients open for minutes and accept any header size.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { GatewayConfig } from './config/types.js';
import type { NodeListener } from './app.js';
import { temporarilyUnavailable } from './errors/gateway-error.js';
import { writeError } from './errors/write-error.js';
import { allowHeader } from './proxy/forwarded-methods.js';
import { SlotSet } from './proxy/slot-set.js';

export interface HttpServerHandle {
  server: Server;
  /** Responses currently being served, so a drain can end open streams cleanly (not a Set: slot-set.ts says why). */
  inFlight: SlotSet<ServerResponse>;
  /**
   * Set when draining: every response from then on says `Connection: close`,
   * and a keep-alive socket is closed as soon as its response is done, so
   * clients move to another replica instead of reusing this one.
   */
  draining: boolean;
}

export function createHttpServer(config: GatewayConfig, listener: () => NodeListener): HttpServerHandle {
  const inFlight = new SlotSet<ServerResponse>();
  // One function for every response, not a closure each: this runs per request.
  function onResponseClose(this: ServerResponse): void {
    inFlight.delete(this);
    // Node keeps an idle keep-alive socket open after server.close(); a drained
    // server lets it go. Not before: during drain_delay a balancer may just
    // have written its next request onto that socket (it would see a reset).
    if (handle.draining && !server.listening) setImmediate(() => server.closeIdleConnections());
  }
  const server = createServer(
    {
      headersTimeout: config.headerTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      // Node only enforces the two timeouts above when it sweeps connections,
      // every 30 s by default: a 1 s header timeout would hold a slow-drip
      // socket for up to 31 s. Sweep at a fraction of the shorter timeout.
      connectionsCheckingInterval: connectionsCheckingInterval(config),
      keepAliveTimeout: config.keepAliveTimeoutMs,
      maxHeaderSize: config.maxHeaderBytes,
      joinDuplicateHeaders: false,
      requireHostHeader: false, // app.ts answers a missing Host with a JSON 400
    },
    (req, res) => {
      inFlight.add(res);
      res.on('close', onResponseClose);
      if (handle.draining) res.setHeader('connection', 'close');
      listener()(req, res);
    },
  );
  // Idle sockets with no request at all (slowloris before the first byte).
  server.on('connection', (socket: Socket) => socket.setNoDelay(true));
  // Never an open proxy: CONNECT is answered, not tunnelled.
  server.on('connect', (_req, socket: Socket) => {
    const body = JSON.stringify({ error: 'method_not_allowed', error_description: 'CONNECT is not supported' });
    socket.end(
      `HTTP/1.1 405 Method Not Allowed\r\ncontent-type: application/json\r\nallow: ${allowHeader(['OPTIONS'])}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
    );
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    if (!socket.writable) return socket.destroy();
    const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
    const timeout = err.code === 'ERR_HTTP_REQUEST_TIMEOUT';
    const status = tooLarge ? '431 Request Header Fields Too Large' : timeout ? '408 Request Timeout' : '400 Bad Request';
    const code = tooLarge ? 'request_header_fields_too_large' : timeout ? 'request_timeout' : 'invalid_request';
    const body = JSON.stringify({ error: code, error_description: tooLarge ? 'Request headers too large' : timeout ? 'Request timed out' : 'Malformed HTTP request' });
    socket.end(`HTTP/1.1 ${status}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  });
  const handle: HttpServerHandle = { server, inFlight, draining: false };
  return handle;
}

/**
 * Ends a response that outlived the shutdown grace period: an event stream
 * ends cleanly (the client reconnects, with Last-Event-ID, elsewhere); a
 * request not yet answered gets 503; a plain body cut short is destroyed, so
 * it cannot pass for a whole one.
 */
export function endForShutdown(res: ServerResponse): void {
  if (res.writableEnded || res.destroyed) return;
  if (!res.headersSent) return writeError(res, temporarilyUnavailable('Gateway is shutting down'), undefined, { connection: 'close' });
  const contentType = res.getHeader('content-type');
  if (typeof contentType === 'string' && contentType.trimStart().toLowerCase().startsWith('text/event-stream')) res.end();
  else res.destroy();
}

/** A quarter of the shorter of the header and request timeouts, within 100 ms–1 s. */
function connectionsCheckingInterval(config: Pick<GatewayConfig, 'headerTimeoutMs' | 'requestTimeoutMs'>): number {
  const shorter = Math.min(config.headerTimeoutMs, config.requestTimeoutMs);
  return Math.min(1_000, Math.max(100, Math.floor(shorter / 4)));
}
