// Writes a GatewayError straight to a Node response (the protected routes
// bypass Hono's Response objects for speed). Headers go out once, or the
// connection is cut when a stream had already started.
import type { ServerResponse } from 'node:http';
import type { GatewayError } from '../errors/gateway-error.js';
import { errorResponseParts, type ChallengeContext } from '../errors/respond.js';

export function writeError(res: ServerResponse, err: GatewayError, ctx?: ChallengeContext, extraHeaders?: Record<string, string>): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const { status, headers, body } = errorResponseParts(err, ctx);
  res.writeHead(status, { ...extraHeaders, ...headers, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
