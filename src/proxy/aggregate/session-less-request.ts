// A 2026-07-28 request without a session on an aggregated route (DESIGN §8.2):
// what the route refuses in it, as a server of that revision must (HTTP 400):
// `_meta` without the revision or the client's capabilities is -32602, a
// revision other than 2026-07-28 is -32022 naming the ones the route serves
// (the older ones need a session, opened by initialize); and how its answer
// reads in that revision (a result says its `resultType`); and what of it a
// call across rounds reads (its progress token, capabilities, identity).
import { createHash } from 'node:crypto';
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

/** The request's `_meta.progressToken`, when it gave one. */
export function progressTokenOf(params: Record<string, unknown> | undefined): unknown {
  return isRecord(params?._meta) ? params._meta.progressToken : undefined;
}

/** `params` with the progress token the upstream is given instead of the client's (none given: as they are). */
export function withProgressToken(params: Record<string, unknown> | undefined, token: string | undefined): Record<string, unknown> | undefined {
  if (token === undefined || !params) return params;
  return { ...params, _meta: { ...(isRecord(params._meta) ? params._meta : {}), progressToken: token } };
}

/** The request's `_meta` client capabilities (sessionLessFault has made sure there are some). */
export function capabilitiesOf(params: Record<string, unknown> | undefined): Record<string, unknown> {
  const capabilities = isRecord(params?._meta) ? params._meta[META_CLIENT_CAPABILITIES] : undefined;
  return isRecord(capabilities) ? capabilities : {};
}

/**
 * What names a request for its retries (MRTR asks a server to tie its state to the originating
 * request): the method, the name or URI it acts on, and a digest of its arguments.
 */
export function identityOf(method: string, params: Record<string, unknown> | undefined): string {
  const target = typeof params?.name === 'string' ? params.name : typeof params?.uri === 'string' ? params.uri : '';
  const digest = createHash('sha256')
    .update(JSON.stringify(params?.arguments ?? null))
    .digest('base64url');
  return JSON.stringify([method, target, digest]);
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
