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

/** The results 2026-07-28 makes cacheable (SEP-2549): each must say its `cacheScope` and `ttlMs`. */
const CACHEABLE = new Set(['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read']);

/**
 * A result as 2026-07-28 reads it: `resultType` said (`complete` unless the upstream said
 * otherwise, e.g. `input_required`); a cacheable one's hints, where no upstream gave them, say
 * private and not to be kept (a merged list is the caller's; an older upstream's read says nothing).
 */
export function modernAnswer(method: string, answer: JsonRpcAnswer): JsonRpcAnswer {
  const result = answer.result;
  if (!result) return answer;
  const complete = typeof result.resultType !== 'string' || result.resultType === 'complete';
  const hints = CACHEABLE.has(method) && complete ? { cacheScope: 'private', ttlMs: 0 } : {};
  return { result: { resultType: 'complete', ...hints, ...result } };
}
