// Origin checks and CORS (SECURITY H41). A browser page on another
// origin — or a DNS-rebound name — must not reach an MCP server through the
// gateway: a disallowed Origin gets 403 and nothing is forwarded. Requests
// without Origin (non-browser MCP clients) and same-origin requests pass.
import { GatewayError } from '../errors/gateway-error.js';

export type OriginDecision = 'allow' | 'deny';

const ALLOW_METHODS = 'GET, POST, DELETE, OPTIONS';
const ALLOW_HEADERS =
  'authorization, content-type, mcp-session-id, mcp-protocol-version, last-event-id, mcp-method, mcp-name, dpop';
// DPoP-Nonce: a browser client must read the nonce to retry (RFC 9449 §8).
const EXPOSE_HEADERS = 'mcp-session-id, www-authenticate, dpop-nonce';
/**
 * 2026-07-28 clients also send `Mcp-Param-{Name}` headers, whose names come
 * from each tool's schema: the ones a preflight asks for are allowed when
 * well formed (the policy holds their values to the body), a bounded number.
 */
const PARAM_HEADER = /^mcp-param-[a-z0-9-]+$/;
const MAX_PARAM_HEADERS_ALLOWED = 64;

function allowHeaders(requested: string | undefined): string {
  if (requested === undefined) return ALLOW_HEADERS;
  const params = new Set<string>();
  for (const name of requested.toLowerCase().split(',')) {
    const trimmed = name.trim();
    if (PARAM_HEADER.test(trimmed) && params.size < MAX_PARAM_HEADERS_ALLOWED) params.add(trimmed);
  }
  return params.size === 0 ? ALLOW_HEADERS : `${ALLOW_HEADERS}, ${[...params].join(', ')}`;
}

/** `scheme://host[:port]` with scheme and host lower-cased and default ports dropped; undefined when not an origin. */
function normalizeOrigin(value: string): string | undefined {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return undefined;
  }
  // An Origin is a bare serialised origin: no credentials, path, query or fragment.
  if (url.username || url.password || url.search || url.hash || (url.pathname !== '/' && url.pathname !== '')) {
    return undefined;
  }
  if (!url.host) return undefined;
  return `${url.protocol}//${url.host}`;
}

// Allow-lists come from config and are the same array on every request.
const normalizedLists = new WeakMap<readonly string[], ReadonlySet<string>>();

function allowSet(allowed: readonly string[]): ReadonlySet<string> {
  let set = normalizedLists.get(allowed);
  if (!set) {
    set = new Set(allowed.map(normalizeOrigin).filter((o): o is string => o !== undefined));
    normalizedLists.set(allowed, set);
  }
  return set;
}

function isAllowedCrossOrigin(origin: string, allowed: readonly string[]): boolean {
  if (allowed.length === 0) return false;
  const normalized = normalizeOrigin(origin);
  return normalized !== undefined && allowSet(allowed).has(normalized);
}

export function checkOrigin(origin: string | undefined, allowed: readonly string[], selfOrigin: string): OriginDecision {
  if (origin === undefined) return 'allow';
  // `null` (sandboxed frames, file:, some redirects) can be anyone.
  if (origin === 'null') return 'deny';
  const normalized = normalizeOrigin(origin);
  if (normalized === undefined) return 'deny';
  if (normalized === normalizeOrigin(selfOrigin)) return 'allow';
  return allowSet(allowed).has(normalized) ? 'allow' : 'deny';
}

const forbiddenOrigin = () => new GatewayError(403, 'forbidden_origin', 'Origin not allowed');

export interface PreflightAnswer {
  status: 204;
  headers: Record<string, string>;
}

/**
 * The answer to `OPTIONS` (a preflight, answered without a token; no body).
 * Throws 403 `forbidden_origin` for a disallowed Origin. `requestedHeaders`:
 * the preflight's `Access-Control-Request-Headers`.
 */
export function corsPreflight(origin: string | undefined, allowed: readonly string[], selfOrigin: string, requestedHeaders?: string): PreflightAnswer {
  if (checkOrigin(origin, allowed, selfOrigin) === 'deny') throw forbiddenOrigin();
  const headers: Record<string, string> = { allow: ALLOW_METHODS, vary: 'origin' };
  if (origin !== undefined && isAllowedCrossOrigin(origin, allowed)) {
    headers['access-control-allow-origin'] = origin;
    headers['access-control-allow-methods'] = ALLOW_METHODS;
    headers['access-control-allow-headers'] = allowHeaders(requestedHeaders);
    headers.vary = 'origin, access-control-request-headers';
    headers['access-control-expose-headers'] = EXPOSE_HEADERS;
    headers['access-control-max-age'] = '600';
  }
  return { status: 204, headers };
}

/** CORS headers for an actual response (set them before the proxy writes its head). */
export function corsResponseHeaders(origin: string | undefined, allowed: readonly string[]): Record<string, string> {
  if (origin === undefined || !isAllowedCrossOrigin(origin, allowed)) return {};
  return { 'access-control-allow-origin': origin, 'access-control-expose-headers': EXPOSE_HEADERS, vary: 'origin' };
}
