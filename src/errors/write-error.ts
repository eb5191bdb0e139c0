// Writes a GatewayError straight to a Node response: protected routes and the
// proxy work on the raw ServerResponse, outside Hono, for speed.
import type { ServerResponse } from 'node:http';
import type { GatewayError } from './gateway-error.js';
import { errorResponseParts, type ChallengeContext } from './respond.js';

/** JSON error when nothing was sent yet; once a response has started, only closing it is honest. */
export function writeError(res: ServerResponse, err: GatewayError, ctx?: ChallengeContext, extraHeaders?: Record<string, string>): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  if (res.destroyed) return;
  const { status, headers, body } = errorResponseParts(err, ctx);
  res.writeHead(status, { ...extraHeaders, ...headers, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
