// One protocol version per request. From 2026-07-28 every request names its
// revision twice: the `MCP-Protocol-Version` header and
// `params._meta["io.modelcontextprotocol/protocolVersion"]`, and the spec asks
// a server to refuse the request with 400 when they differ. The gateway reads
// the header (param-headers.ts decides by it whether `Mcp-Param-*` headers are
// required) while an upstream may read either: two answers to "which revision
// is this" would be two readings of one request. So the two must agree, in
// every message of a batch, and the header may appear once.
import type { IncomingHttpHeaders } from 'node:http';
import { HeaderMismatchError } from './mcp-headers.js';
import { idOf, type ParsedRequest } from './json-rpc.js';
import { AmbiguousMemberError, checkMemberNames, readNames } from './member-names.js';

/** The `_meta` key of a request's revision (MCP 2026-07-28). */
export const META_PROTOCOL_VERSION = 'io.modelcontextprotocol/protocolVersion';
const META_NAMES = readNames(META_PROTOCOL_VERSION);
const HEADER = 'mcp-protocol-version';

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * Throws HeaderMismatchError (400, -32020) when the header is repeated, or a
 * message's `_meta` names a revision the header does not (an absent header
 * included: a server that reads it would assume 2025-03-26), or spells the key
 * in a way another reader could fold onto it.
 */
export function checkProtocolVersion(headers: IncomingHttpHeaders, request: ParsedRequest, rawHeaders?: readonly string[]): void {
  const header = headers[HEADER];
  if (header !== undefined && (Array.isArray(header) || (rawHeaders !== undefined && isRepeated(rawHeaders)))) fail(request, 'MCP-Protocol-Version may appear once');
  for (const message of request.messages) {
    const { params } = message;
    if (!isObject(params) || !isObject(params._meta)) continue;
    const why = metaFault(params._meta, header as string | undefined);
    if (why !== undefined) fail(request, why);
  }
}

function fail(request: ParsedRequest, message: string): never {
  throw new HeaderMismatchError(message, request.batch ? null : (idOf(request.messages[0]!) ?? null));
}

/** What is wrong with the revision a message's `_meta` names, given the header's; undefined when nothing is. */
function metaFault(meta: Record<string, unknown>, header: string | undefined): string | undefined {
  try {
    checkMemberNames(meta, META_NAMES, 'params._meta');
  } catch (err) {
    if (err instanceof AmbiguousMemberError) return err.message;
    throw err;
  }
  if (!Object.hasOwn(meta, META_PROTOCOL_VERSION)) return undefined;
  const version = meta[META_PROTOCOL_VERSION];
  if (typeof version !== 'string') return `params._meta["${META_PROTOCOL_VERSION}"] is not a string`;
  if (header === undefined) return 'params._meta names a protocol version but there is no MCP-Protocol-Version header';
  return version === header ? undefined : 'The MCP-Protocol-Version header and params._meta name different protocol versions';
}

function isRepeated(rawHeaders: readonly string[]): boolean {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === HEADER.length && name.toLowerCase() === HEADER && ++count > 1) return true;
  }
  return false;
}
