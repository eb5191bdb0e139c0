// The Node HTTP server with the gateway's own limits: Node's defaults keep
// slow clients open for minutes and accept any header size.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { GatewayConfig } from './config/types.js';
import type { NodeListener } from './app.js';

export interface HttpServerHandle {
  server: Server;
  /** Responses currently being served, so a drain can end open streams cleanly. */
  inFlight: Set<ServerResponse>;
}

export function createHttpServer(config: GatewayConfig, listener: () => NodeListener): HttpServerHandle {
  const inFlight = new Set<ServerResponse>();
  const server = createServer(
    {
      headersTimeout: config.headerTimeoutMs,
      requestTimeout: config.requestTimeoutMs,
      keepAliveTimeout: config.keepAliveTimeoutMs,
      maxHeaderSize: config.maxHeaderBytes,
      joinDuplicateHeaders: false,
      requireHostHeader: true,
    },
    (req, res) => {
      inFlight.add(res);
      res.once('close', () => inFlight.delete(res));
      listener()(req, res);
    },
  );
  // Idle sockets with no request at all (slowloris before the first byte).
  server.on('connection', (socket: Socket) => socket.setNoDelay(true));
  // Never an open proxy: CONNECT is answered, not tunnelled.
  server.on('connect', (_req, socket: Socket) => {
    const body = JSON.stringify({ error: 'method_not_allowed', error_description: 'CONNECT is not supported' });
    socket.end(
      `HTTP/1.1 405 Method Not Allowed\r\ncontent-type: application/json\r\nallow: GET, POST, DELETE, OPTIONS\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
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
  return { server, inFlight };
}
