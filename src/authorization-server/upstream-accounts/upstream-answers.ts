// Every answer of a route's upstream AS (metadata, registration, token,
// revocation) is read only up to a bound, while it streams: a hostile or
// broken AS cannot make the gateway hold megabytes, nor keep a request open
// past its deadline (the request's signal also aborts the body). A token
// longer than any real one is refused, never sealed into the store.
import type * as oauth from 'oauth4webapi';
import { UpstreamAsError } from './upstream-as-error.js';

/** Metadata, a registration and a token answer are each a few KiB. */
export const MAX_UPSTREAM_ANSWER_BYTES = 64 * 1024;
/** Real access and refresh tokens (JWTs included) stay far below this. */
export const MAX_UPSTREAM_TOKEN_CHARS = 16 * 1024;

/** The same answer, its body read up to the bound (UpstreamAsError past it, declared or streamed). */
export async function bounded(response: Response): Promise<Response> {
  const declared = Number(response.headers.get('content-length') ?? 0);
  if (declared > MAX_UPSTREAM_ANSWER_BYTES) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge();
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (response.body) {
    for await (const chunk of response.body) {
      size += chunk.byteLength;
      if (size > MAX_UPSTREAM_ANSWER_BYTES) throw tooLarge(); // leaving the loop cancels the stream
      chunks.push(chunk);
    }
  }
  const status = response.status;
  // Statuses without a body (204, 304) cannot be given one.
  const body = status === 204 || status === 304 ? null : Buffer.concat(chunks);
  return new Response(body, { status, statusText: response.statusText, headers: response.headers });
}

/** A token answer whose tokens are too long for any real AS: refused before anything is kept. */
export function checkTokenSizes(tokens: oauth.TokenEndpointResponse): oauth.TokenEndpointResponse {
  for (const token of [tokens.access_token, tokens.refresh_token]) {
    if (typeof token === 'string' && token.length > MAX_UPSTREAM_TOKEN_CHARS) {
      throw new UpstreamAsError(`the upstream authorization server answered a token longer than ${MAX_UPSTREAM_TOKEN_CHARS} characters`);
    }
  }
  return tokens;
}

function tooLarge(): UpstreamAsError {
  return new UpstreamAsError(`the upstream authorization server's answer is larger than ${MAX_UPSTREAM_ANSWER_BYTES} bytes`);
}
