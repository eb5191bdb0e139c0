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
import { idOf, type JsonRpcMessage, type ParsedRequest } from './json-rpc.js';
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
  const id = request.batch ? null : (idOf(request.messages[0]!) ?? null);
  const fail = (message: string): never => {
    throw new HeaderMismatchError(message, id);
  };
  if (Array.isArray(header) || (rawHeaders !== undefined && countHeader(rawHeaders) > 1)) fail('MCP-Protocol-Version may appear once');
  for (const message of request.messages) {
    const version = metaVersion(message, fail);
    if (version === undefined) continue;
    if (header === undefined) fail(`params._meta names protocol version ${JSON.stringify(version)} but there is no MCP-Protocol-Version header`);
    if (version !== header) fail('The MCP-Protocol-Version header and params._meta name different protocol versions');
  }
}

/** The revision a message's `_meta` names, or undefined when it names none. */
function metaVersion(message: JsonRpcMessage, fail: (message: string) => never): string | undefined {
  const { params } = message;
  if (!isObject(params) || !isObject(params._meta)) return undefined;
  const meta = params._meta;
  try {
    checkMemberNames(meta, META_NAMES, 'params._meta');
  } catch (err) {
    if (err instanceof AmbiguousMemberError) fail(err.message);
    throw err;
  }
  if (!Object.hasOwn(meta, META_PROTOCOL_VERSION)) return undefined;
  const version = meta[META_PROTOCOL_VERSION];
  if (typeof version !== 'string') fail(`params._meta["${META_PROTOCOL_VERSION}"] is not a string`);
  return version as string;
}

function countHeader(rawHeaders: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === HEADER.length && name.toLowerCase() === HEADER) count++;
  }
  return count;
}
