// How the request's body is delimited, checked before routing (RFC 9112 §6).
// Node reads a chunked body from an HTTP/1.0 request, where Transfer-Encoding
// does not exist: a front proxy that speaks HTTP/1.0 reads the same bytes by
// Content-Length or by the connection's end, and the two disagree about where
// the next request starts (request smuggling). RFC 9112 §6.1: such a message's
// framing is faulty, even with a Content-Length, and the connection is closed.
import type { IncomingMessage } from 'node:http';
import { GatewayError } from '../errors/gateway-error.js';

/**
 * Throws 505 for a version other than HTTP/1.0 or 1.1 (Node also accepts
 * "HTTP/0.9" and "HTTP/2.0" request lines with headers), and 400 for a
 * Transfer-Encoding header, whatever its value, on anything but HTTP/1.1.
 * The caller answers with `Connection: close`.
 */
export function checkRequestFraming(req: Pick<IncomingMessage, 'httpVersionMajor' | 'httpVersionMinor' | 'rawHeaders'>): void {
  if (req.httpVersionMajor === 1 && req.httpVersionMinor === 1) return;
  if (req.httpVersionMajor !== 1 || req.httpVersionMinor !== 0) {
    throw new GatewayError(505, 'http_version_not_supported', 'Only HTTP/1.1 and HTTP/1.0 are supported');
  }
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 17 && name.toLowerCase() === 'transfer-encoding') {
      throw new GatewayError(400, 'invalid_request', 'Transfer-Encoding is not allowed in an HTTP/1.0 request');
    }
  }
}
