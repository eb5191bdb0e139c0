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

/** `params` with this revision's `_meta` of the client (the client's own `_meta` entries kept). */
export function withModernMeta(params: Record<string, unknown> | undefined, hello: Hello): Record<string, unknown> {
  const own = params && typeof params._meta === 'object' && params._meta !== null && !Array.isArray(params._meta) ? (params._meta as Record<string, unknown>) : {};
  return {
    ...params,
    _meta: { ...own, [META_PROTOCOL_VERSION]: MODERN_REVISION, 'io.modelcontextprotocol/clientCapabilities': hello.capabilities, 'io.modelcontextprotocol/clientInfo': hello.clientInfo },
  };
}

/** The discover answer as an initialize result (its capabilities), or throws when the upstream does not serve 2026-07-28. */
export function discoveredAsInitialize(answer: { result?: Record<string, unknown> }): Record<string, unknown> {
  const result = answer.result;
  const versions = result?.supportedVersions;
  if (!result || !Array.isArray(versions) || !versions.includes(MODERN_REVISION)) throw new AggregateUpstreamError('unreadable');
  return { protocolVersion: MODERN_REVISION, capabilities: result.capabilities ?? {}, serverInfo: result.serverInfo };
}
