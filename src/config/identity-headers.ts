// `identity_headers` of a route (as oauth2-proxy sends them): header name →
// what of the verified token it carries: `sub`, `iss`, `client_id`, `scope`,
// or `claims.<name>` (a dotted path into nested claims). Names are checked at
// load: a token name the upstream reads exactly as the gateway does (letters,
// digits, `-`), never one the gateway or HTTP itself owns.
import { z } from 'zod';

export interface IdentityHeader {
  /** Lower case. */
  name: string;
  /** `['sub']`, `['iss']`, `['client_id']`, `['scope']`, or `['claims', …path]`. */
  from: readonly string[];
}

const HEADER_NAME = /^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$/;
const SOURCE = /^(sub|iss|client_id|scope|claims(\.[A-Za-z0-9_:/-]+)+)$/;
/** HTTP's own, the MCP transport's and the gateway's: an identity header may not replace any. */
const OWNED = /^(host|connection|keep-alive|proxy-.*|te|trailer|transfer-encoding|upgrade|content-.*|authorization|cookie|dpop|mcp-.*|last-event-id|accept.*|traceparent|tracestate|baggage|expect|forwarded|via)$/;
export const MAX_IDENTITY_HEADERS = 16;

export const IdentityHeadersSchema = z
  .record(
    z
      .string()
      .regex(HEADER_NAME, 'a header name of letters, digits and single dashes')
      .refine((name) => !OWNED.test(name.toLowerCase()), 'a header HTTP, MCP or the gateway sets itself'),
    z.string().regex(SOURCE, 'one of sub, iss, client_id, scope, or claims.<name> (claims.<a>.<b> for a nested claim)'),
  )
  .refine((headers) => Object.keys(headers).length <= MAX_IDENTITY_HEADERS, `at most ${MAX_IDENTITY_HEADERS} headers`)
  .refine((headers) => new Set(Object.keys(headers).map((n) => n.toLowerCase())).size === Object.keys(headers).length, 'a header named twice (names are case-insensitive)')
  .describe('headers the upstream receives with values from the verified token only; the same names sent by the client are always removed');

export function resolveIdentityHeaders(headers: Record<string, string> | undefined): IdentityHeader[] {
  return Object.entries(headers ?? {}).map(([name, source]) => ({ name: name.toLowerCase(), from: source.split('.') }));
}
