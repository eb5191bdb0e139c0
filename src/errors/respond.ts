// The one place that builds an error's status, headers (`WWW-Authenticate`)
// and body; `errorResponse` sends them on Hono's path, `writeError` on Node's.
import type { GatewayError } from './gateway-error.js';

const TOKEN68_SAFE = /^[\x20-\x7E]*$/;

/** RFC 9110 §5.6.4 quoted-string: escape `\` and `"`, and drop anything outside visible ASCII. */
export function quoteParam(value: string): string {
  let out = '';
  for (const ch of value) {
    if (!TOKEN68_SAFE.test(ch)) continue;
    out += ch === '"' || ch === '\\' ? `\\${ch}` : ch;
  }
  return `"${out}"`;
}

export interface ChallengeContext {
  resourceMetadataUrl: string;
  /** The route accepts DPoP (RFC 9449): the proof algorithms it takes, and whether Bearer is refused. */
  dpop?: { algs: readonly string[]; required: boolean };
}

/**
 * RFC 6750 §3 challenge. A missing token (401 with the bare-challenge
 * description) carries no `error` parameter, as RFC 6750 §3.1 asks.
 * The `DPoP` scheme (RFC 9449 §7.1, with `algs`) answers a route that
 * requires DPoP, or a refusal of a DPoP-scheme request; a route that merely
 * allows DPoP keeps the `Bearer` challenge (MCP clients read only that one)
 * and says `dpop_signing_alg_values_supported` in its metadata instead.
 */
export function buildChallenge(err: GatewayError, ctx: ChallengeContext, bare: boolean): string {
  const params: string[] = [];
  if (!bare) params.push(`error=${quoteParam(err.code)}`);
  if (err.scope && err.scope.length > 0) params.push(`scope=${quoteParam(err.scope.join(' '))}`);
  if (!bare) params.push(`error_description=${quoteParam(err.description)}`);
  params.push(`resource_metadata=${quoteParam(ctx.resourceMetadataUrl)}`);
  const dpop = ctx.dpop;
  if (dpop && (dpop.required || err.dpop)) return `DPoP ${params.join(', ')}, algs=${quoteParam(dpop.algs.join(' '))}`;
  return `Bearer ${params.join(', ')}`;
}

/** RFC 6749 §5.2: the challenge of a 401 invalid_client at the token endpoint (as a GatewayError `headers` option). */
export function basicChallenge(realm: string): Record<string, string> {
  return { 'www-authenticate': `Basic realm=${quoteParam(realm)}` };
}

export interface ErrorResponseParts {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Status, headers and body for any GatewayError: what both writers (Web Response, Node) send. */
export function errorResponseParts(err: GatewayError, ctx?: ChallengeContext): ErrorResponseParts {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'cache-control': 'no-store',
    ...err.headers,
  };
  if (err.challenge && ctx) {
    headers['www-authenticate'] = buildChallenge(err, ctx, err.bareChallenge);
  }
  return { status: err.status, headers, body: err.body() };
}

export function errorResponse(err: GatewayError, ctx?: ChallengeContext): Response {
  const { status, headers, body } = errorResponseParts(err, ctx);
  return new Response(body, { status, headers });
}
