// A 2026-07-28 request without a session on an aggregated route (DESIGN §8.2):
// what the route refuses in it, as a server of that revision must (HTTP 400):
// `_meta` without the revision or the client's capabilities is -32602, a
// revision other than 2026-07-28 is -32022 naming the ones the route serves
// (the older ones need a session, opened by initialize); and how its answer
// reads in that revision (a result says its `resultType`).
import { META_PROTOCOL_VERSION } from '../../policy/protocol-version.js';
import { DISCOVER_REVISION, INVALID_PARAMS, UNSUPPORTED_PROTOCOL_VERSION, type DiscoverFault } from './discover-request.js';
import type { JsonRpcAnswer } from './upstream-link.js';

const META_CLIENT_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Why this session-less request is refused, or undefined when it is served. */
export function sessionLessFault(method: string, params: unknown, served: readonly string[]): DiscoverFault | undefined {
  const meta = isRecord(params) && isRecord(params._meta) ? params._meta : undefined;
  const requested = meta?.[META_PROTOCOL_VERSION];
  if (typeof requested !== 'string' || !isRecord(meta?.[META_CLIENT_CAPABILITIES])) {
    return { code: INVALID_PARAMS, message: `${method} without a session needs params._meta with "${META_PROTOCOL_VERSION}" and "${META_CLIENT_CAPABILITIES}"` };
  }
  if (requested === DISCOVER_REVISION) return undefined;
  return { code: UNSUPPORTED_PROTOCOL_VERSION, message: `Unsupported protocol version without a session: ${requested}`, data: { supported: [...served], requested } };
}

/** The client's own clientInfo in a session-less request's `_meta`, when it gave one. */
export function clientInfoOf(params: unknown): Record<string, unknown> | undefined {
  const meta = isRecord(params) && isRecord(params._meta) ? params._meta : undefined;
  const info = meta?.['io.modelcontextprotocol/clientInfo'];
  return isRecord(info) ? info : undefined;
}

/** A result as 2026-07-28 reads it: `resultType` said (`complete` unless the upstream said otherwise, e.g. `input_required`). */
export function modernAnswer(answer: JsonRpcAnswer): JsonRpcAnswer {
  if (!answer.result || typeof answer.result.resultType === 'string') return answer;
  return { result: { resultType: 'complete', ...answer.result } };
}
