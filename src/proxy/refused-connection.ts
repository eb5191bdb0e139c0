// A connection whose framing the gateway refused is closed, and nothing that
// arrives on it after the refusal is read as a request. Node's parser goes on
// parsing what was pipelined behind the refused message (it drains the refused
// body by the very framing that was judged faulty: RFC 9112 §6.1, §9.6) and
// hands each request to the listener even though the answer said
// `Connection: close`; an HTTP/1.0 `Connection: keep-alive` kept such a
// request alive to be forwarded. Marked per socket, so a reload's new route
// table sees the mark too.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

const refused = new WeakSet<Socket>();

/** Marks the request's connection: the answer being written is its last. */
export function refuseConnection(req: IncomingMessage, res: ServerResponse): void {
  refused.add(req.socket);
  res.shouldKeepAlive = false;
  // Node ends the socket once this answer is written; stop taking its bytes now.
  res.once('finish', () => req.socket.destroySoon());
}

/**
 * True for a request that arrived on a refused connection: the caller leaves
 * it unanswered (the connection closes after the refusal) and reads nothing of it.
 */
export function onRefusedConnection(req: IncomingMessage): boolean {
  return refused.has(req.socket);
}
