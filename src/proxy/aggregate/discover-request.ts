// What an aggregated route refuses in a 2026-07-28 `server/discover` it answers
// itself (as a server of that revision must): `_meta` without the revision or
// the client's capabilities is -32602, and a revision the route neither serves
// nor answers discover for is UnsupportedProtocolVersionError (-32022) naming
// the ones it serves; both with HTTP 400.
import { META_PROTOCOL_VERSION } from '../../policy/protocol-version.js';

/** The revision whose `server/discover` the route answers (with the session-based ones it serves). */
export const DISCOVER_REVISION = '2026-07-28';
const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
export const INVALID_PARAMS = -32602;
export const UNSUPPORTED_PROTOCOL_VERSION = -32022;

export interface DiscoverFault {
  code: number;
  message: string;
  data?: Record<string, unknown>;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Why this discover request is refused, or undefined when it is answered. */
export function discoverFault(params: unknown, supported: readonly string[]): DiscoverFault | undefined {
  const meta = isRecord(params) && isRecord(params._meta) ? params._meta : undefined;
  const requested = meta?.[META_PROTOCOL_VERSION];
  if (typeof requested !== 'string' || !isRecord(meta?.[META_CLIENT_CAPABILITIES])) {
    return { code: INVALID_PARAMS, message: `server/discover needs params._meta with "${META_PROTOCOL_VERSION}" and "${META_CLIENT_CAPABILITIES}"` };
  }
  if (requested === DISCOVER_REVISION || supported.includes(requested)) return undefined;
  return { code: UNSUPPORTED_PROTOCOL_VERSION, message: `Unsupported protocol version: ${requested}`, data: { supported: [...supported], requested } };
}
