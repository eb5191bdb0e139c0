// The request target, checked before routing. Routes match exactly and the
// upstream always gets the route's own URL, so the only safe path is one that
// every parser (ours, Hono's, WHATWG URL, a proxy in front) reads the same way:
// nothing is decoded, normalised or case-folded here — what is not already
// canonical is refused (SECURITY H37). That makes the path the gateway
// authorises exactly the path it routes.
import { GatewayError } from '../errors/gateway-error.js';

export interface RequestTarget {
  /** The origin-form path, byte for byte as received. */
  path: string;
  /** `?…` or empty. Only inspected (e.g. for `access_token=`); never forwarded. */
  search: string;
}

// RFC 3986 pchar without `;` (path parameters are read differently by
// different servers) plus `/`; `%` is checked separately below.
const PATH_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,=:@/%]*$/;
// Visible ASCII without `#` (a fragment never belongs in a request target).
const QUERY_CHARS = /^[\x21-\x22\x24-\x7E]*$/;
const PERCENT = /%(?:[0-9A-Fa-f]{2})?/g;
const DOT_SEGMENT = /\/\.\.?(?:\/|$)/;

const refuse = (description: string) => new GatewayError(400, 'invalid_request', description);

export function parseRequestTarget(rawUrl: string): RequestTarget {
  // Absolute-form (`http://…`), authority-form (`host:443`) and `*` all fail here:
  // the gateway is never an open proxy.
  if (rawUrl.charCodeAt(0) !== 0x2f /* / */) throw refuse('Request target must be an absolute path');
  const q = rawUrl.indexOf('?');
  const path = q === -1 ? rawUrl : rawUrl.slice(0, q);
  const search = q === -1 ? '' : rawUrl.slice(q);

  if (!PATH_CHARS.test(path)) throw refuse('Request path contains a forbidden character');
  if (path.includes('//')) throw refuse('Request path contains an empty segment');
  if (DOT_SEGMENT.test(path)) throw refuse('Request path contains a dot segment');
  if (path.includes('%')) checkPercentEncoding(path);
  if (!QUERY_CHARS.test(search.slice(1))) throw refuse('Query contains a forbidden character');
  return { path, search };
}

function checkPercentEncoding(path: string): void {
  for (const [escape] of path.matchAll(PERCENT)) {
    if (escape.length !== 3) throw refuse('Request path has invalid percent-encoding');
    const byte = Number.parseInt(escape.slice(1), 16);
    // Encoded `/`, `\` and `.` would be decoded into separators or dot segments
    // by some upstream or framework; control bytes (NUL first) truncate or split.
    if (byte === 0x2f || byte === 0x5c || byte === 0x2e || byte < 0x20 || byte === 0x7f) {
      throw refuse('Request path contains a forbidden encoded character');
    }
  }
}
