// 2026-07-28 routing headers: `Mcp-Method` and `Mcp-Name` mirror the body so
// intermediaries can route without parsing it. The policy judges the body;
// a header that contradicts it is refused (400, JSON-RPC -32020), so nothing
// in front of or behind the gateway can act on a different operation than
// the one that was authorised.
import { GatewayError } from '../errors/gateway-error.js';
import { requiresRequestHeaders } from './header-revision.js';
import { idOf, NAME_MEMBER, operationOf, type ParsedRequest } from './json-rpc.js';

/** JSON-RPC error code of a header that does not match the body (MCP 2026-07-28). */
export const HEADER_MISMATCH = -32020;

/** A 400 like any other refusal, but its body is the JSON-RPC error MCP clients read. */
export class HeaderMismatchError extends GatewayError {
  override readonly name = 'HeaderMismatchError';

  constructor(
    message: string,
    /** The request's JSON-RPC id, or null. */
    readonly id: string | number | null,
  ) {
    super(400, 'invalid_request', message);
  }

  override body(): string {
    return JSON.stringify({ jsonrpc: '2.0', id: this.id, error: { code: HEADER_MISMATCH, message: this.message } });
  }
}

// A plain value is visible ASCII without surrounding space. Node hands header
// bytes over as latin1 while an upstream may read them as UTF-8, so any other
// byte would give the gateway and the upstream two different names.
const PLAIN_VALUE = /^(?:[\x21-\x7E](?:[\x20-\x7E]*[\x21-\x7E])?)?$/;
// Anything else travels as `=?base64?<base64 of UTF-8>?=`, markers lower case.
// A value opening with `=?` and holding a `?=` after it must be exactly that
// form: clients encode a plain value that looks like it, and a lenient decoder
// would read `=?BASE64?…?=`, `=?b?…?=` or `=?base64?…?=x` as a name the gateway
// took literally. Without a `?=` no decoder reads an encoded word, so the
// value is the literal the sentinel rule makes it (`=?base64?SGVsbG8=`).
const ENCODED_PREFIX = '=?';
const ENCODED_END = '?=';
const BASE64_VALUE = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The header's value as the client meant it; undefined when it is neither plain nor validly encoded. */
export function decodeHeaderValue(raw: string): string | undefined {
  if (!looksEncoded(raw)) return PLAIN_VALUE.test(raw) ? raw : undefined;
  const encoded = BASE64_VALUE.exec(raw)?.[1];
  if (encoded === undefined) return undefined;
  const bytes = Buffer.from(encoded, 'base64');
  // Canonical base64 only (padding, zero trailing bits): Node's decoder forgives what others refuse.
  if (bytes.toString('base64') !== encoded) return undefined;
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}

/** Opens with `=?` and holds a `?=` after it: an encoded word to some decoder. */
const looksEncoded = (raw: string) => raw.startsWith(ENCODED_PREFIX) && raw.includes(ENCODED_END, ENCODED_PREFIX.length);

const isPlainMethod = (raw: string) => PLAIN_VALUE.test(raw) && !raw.startsWith(ENCODED_PREFIX);

type RequestHeaders = Readonly<Record<string, string | string[] | undefined>>;

/**
 * `Mcp-Param-{Name}` mirrors a tool argument the server marked with
 * `x-mcp-header`. Which argument is in the tool's input schema: the values are
 * compared with the body in param-headers.ts for the tools whose schema the
 * route has learnt, and every header is forwarded (unknown ones too, as the
 * spec asks). Here they are held to the one-reading rules of `Mcp-Name` so
 * that whatever reads them behind or in front of the gateway reads one value.
 * `_` folds to `-` here: `Mcp_Param_X` is the same variable as `Mcp-Param-X`
 * to a CGI-style reader.
 */
const PARAM_PREFIX = 'mcp-param-';
const PARAM_NAME = /^mcp-param-[a-z0-9-]+$/;

const isParamHeader = (lower: string) => lower.length >= PARAM_PREFIX.length && lower.replaceAll('_', '-').startsWith(PARAM_PREFIX);

/** What is wrong with the routing and parameter headers regardless of the body, or undefined. */
function headerFault(headers: RequestHeaders, rawHeaders: readonly string[] | undefined): string | undefined {
  // Node joins repeated headers with ", " while an upstream may read the first or the last: one of each.
  if (Array.isArray(headers['mcp-method']) || Array.isArray(headers['mcp-name'])) return 'Mcp-Method and Mcp-Name may appear once';
  // Without the raw list (callers that have only Node's object) each name appears once, joined.
  const names = rawHeaders ?? Object.keys(headers).flatMap((name) => [name, '']);
  // Made for the first routing or parameter header: most requests have none.
  let seen: Set<string> | undefined;
  for (let i = 0; i < names.length; i += 2) {
    const name = names[i]!;
    // Most names are neither: judged by length and first letter before any lower-casing.
    if (name.length < 8 || (name.charCodeAt(0) | 0x20) !== 0x6d) continue;
    const lower = name.toLowerCase();
    if (lower === 'mcp-method' || lower === 'mcp-name') {
      if (seen?.has(lower)) return 'Mcp-Method and Mcp-Name may appear once';
      (seen ??= new Set()).add(lower);
    } else if (isParamHeader(lower)) {
      if (!PARAM_NAME.test(lower)) return 'An Mcp-Param header name may hold only letters, digits and -';
      if (seen?.has(lower)) return 'Each Mcp-Param header may appear once';
      (seen ??= new Set()).add(lower);
      const value = rawHeaders ? names[i + 1]! : (headers[lower] as string);
      if (decodeHeaderValue(value) === undefined) return 'An Mcp-Param header is neither visible ASCII nor a valid =?base64?…?= value';
    }
  }
  return undefined;
}

/**
 * Throws HeaderMismatchError when `Mcp-Method` or `Mcp-Name` is present and
 * malformed or differs from the body, missing from a request of a revision
 * that requires it (2026-07-28 on), or an `Mcp-Param-*` header is malformed
 * or repeated. Absent headers are fine for older revisions (they send none).
 */
export function checkMcpHeaders(headers: RequestHeaders, request: ParsedRequest, rawHeaders?: readonly string[]): void {
  const methodHeader = headers['mcp-method'];
  const nameHeader = headers['mcp-name'];
  const fault = headerFault(headers, rawHeaders);
  const present = fault !== undefined || methodHeader !== undefined || nameHeader !== undefined;
  // Most requests have neither header and no fault: done before anything is allocated.
  if (!present && !requiresRequestHeaders(headers)) return;
  const first = request.messages[0]!;
  const id = request.batch ? null : (idOf(first) ?? null);
  const fail = (message: string): never => {
    throw new HeaderMismatchError(message, id);
  };
  if (fault !== undefined) fail(fault);
  if (request.batch) {
    // The headers describe one message; a batch cannot match them (and is not of the revision that requires them).
    if (present) fail('Mcp-Method and Mcp-Name describe a single message, not a batch');
    return;
  }

  const operation = operationOf(first);
  if (operation !== undefined && idOf(first) !== undefined && requiresRequestHeaders(headers)) requireHeaders(operation, methodHeader, nameHeader, fail);
  if (methodHeader !== undefined) {
    if (!isPlainMethod(methodHeader as string)) fail('Mcp-Method header is not a plain visible-ASCII value');
    if (methodHeader !== operation?.method) fail('Mcp-Method header does not match the method in the body');
  }
  if (nameHeader === undefined) return;
  // Well-formed whatever the method: the upstream reads it even where the policy does not.
  const name = decodeHeaderValue(nameHeader as string);
  if (name === undefined) fail('Mcp-Name header is neither visible ASCII nor a valid =?base64?…?= value');
  // Mcp-Name is compared only where policy reads a name; other methods (the
  // tasks extension's taskId, say) are the upstream's to validate.
  if (operation?.method !== undefined && NAME_MEMBER[operation.method] !== undefined) {
    if (operation.name === undefined || name !== operation.name) fail('Mcp-Name header does not match the name in the body');
  }
}

/**
 * "Standard Request Headers": every request of 2026-07-28 carries `Mcp-Method`,
 * and `Mcp-Name` where the method names a tool, resource or prompt; "Server
 * Validation" lists a missing one as a failure (400, -32020). Notifications
 * have no header requirements in that revision, and a batch is not of it.
 */
function requireHeaders(operation: { method: string }, methodHeader: unknown, nameHeader: unknown, fail: (message: string) => never): void {
  if (methodHeader === undefined) fail('Mcp-Method header is missing: MCP-Protocol-Version 2026-07-28 and later require it on every request');
  if (nameHeader === undefined && NAME_MEMBER[operation.method] !== undefined) fail(`Mcp-Name header is missing: MCP-Protocol-Version 2026-07-28 and later require it on ${operation.method}`);
}

/**
 * GET and DELETE carry no message for the headers to mirror, and the
 * 2026-07-28 transport that defines them has neither: refused rather than
 * passed to an upstream (or a router behind the gateway) unchecked.
 */
export function refuseMcpHeadersWithoutBody(headers: RequestHeaders): void {
  if (headers['mcp-method'] !== undefined || headers['mcp-name'] !== undefined || Object.keys(headers).some(isParamHeader)) {
    throw new HeaderMismatchError('Mcp-Method, Mcp-Name and Mcp-Param headers belong on a POST, with the message they describe', null);
  }
}
