// An upstream that speaks only MCP 2026-07-28 (no initialize: a removed method,
// 404 or -32601): the link asks its `server/discover` instead, and sends every
// request after as that revision does, without a session, each carrying the
// revision, the client's capabilities and its clientInfo in `_meta` (the
// headers Mcp-Method and Mcp-Name the link sends anyway).
import { META_PROTOCOL_VERSION } from '../../policy/protocol-version.js';
import { AggregateUpstreamError } from './captured-exchange.js';

/** What the client said of itself (upstream-link.ts's ClientHello, as far as this revision's `_meta` carries it). */
interface Hello {
  capabilities: Record<string, unknown>;
  clientInfo: Record<string, unknown>;
}

export const MODERN_REVISION = '2026-07-28';

/** Whether an initialize failed as a server of 2026-07-28 alone fails it (the method removed). */
export function initializeRemoved(err: unknown): boolean {
  return err instanceof AggregateUpstreamError && (err.status === 404 || err.status === 400);
}

const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
const META_CLIENT_INFO = 'io.modelcontextprotocol/clientInfo';

/**
 * `params` with this revision's `_meta` of the client (the client's own `_meta` entries kept). A
 * 2026-07-28 client's own capabilities and clientInfo, sent with this very request, win over the
 * session's: they are what it can answer now (an InputRequiredResult is built from them).
 */
export function withModernMeta(params: Record<string, unknown> | undefined, hello: Hello): Record<string, unknown> {
  const own = metaOf(params);
  return {
    ...params,
    _meta: { [META_CLIENT_CAPABILITIES]: hello.capabilities, [META_CLIENT_INFO]: hello.clientInfo, ...own, [META_PROTOCOL_VERSION]: MODERN_REVISION },
  };
}

/**
 * `params` for an upstream of a session-based revision: a 2026-07-28 client's per-request revision,
 * capabilities and clientInfo taken out of `_meta` (that upstream's session has its own, and a
 * `_meta` revision that disagrees with the request's header is refused by careful servers).
 */
export function withoutModernMeta(params: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  const own = metaOf(params);
  if (!(META_PROTOCOL_VERSION in own) && !(META_CLIENT_CAPABILITIES in own) && !(META_CLIENT_INFO in own)) return params;
  const { [META_PROTOCOL_VERSION]: _revision, [META_CLIENT_CAPABILITIES]: _capabilities, [META_CLIENT_INFO]: _info, ...rest } = own;
  const { _meta: _dropped, ...others } = params!;
  return Object.keys(rest).length === 0 ? others : { ...others, _meta: rest };
}

function metaOf(params: Record<string, unknown> | undefined): Record<string, unknown> {
  const meta = params?._meta;
  return typeof meta === 'object' && meta !== null && !Array.isArray(meta) ? (meta as Record<string, unknown>) : {};
}

/** The discover answer as an initialize result (its capabilities), or throws when the upstream does not serve 2026-07-28. */
export function discoveredAsInitialize(answer: { result?: Record<string, unknown> }): Record<string, unknown> {
  const result = answer.result;
  const versions = result?.supportedVersions;
  if (!result || !Array.isArray(versions) || !versions.includes(MODERN_REVISION)) throw new AggregateUpstreamError('unreadable');
  return { protocolVersion: MODERN_REVISION, capabilities: result.capabilities ?? {}, serverInfo: result.serverInfo };
}
