// On an aggregated route, the upstream an operation is sent to (DESIGN §8.2):
// what a rule's or rate limit's `match: { upstream }` compares. A tool or a
// prompt leads to it by its shown name, a completion's `ref/prompt` by its
// shown prompt name; a resource (a read, a subscription, a completion's
// `ref/resource`) by where the caller's session routes its URI, which only
// the route's forwarder knows: the policy step asks it before deciding
// (`servedBy`), and the forwarder sends the request where it was judged.
import type { AuthContext } from '../auth/principal.js';
import type { GatewaySpan } from '../observability/tracing.js';
import { subscribedUris, type JsonRpcMessage, type Operation } from './json-rpc.js';
import type { RoutePolicy } from './route-policy.js';

/** URI → the upstream the caller's session serves it from (URIs it cannot place are absent). */
export type ServedBy = ReadonlyMap<string, string>;

/** The aggregated route's answer to "where does this caller's session route these URIs?". */
/** `sessionId` undefined: a 2026-07-28 request without a session, placed by the caller's session-less session. */
export type ResourceRouting = (sessionId: string | undefined, auth: AuthContext, uris: readonly string[], span?: GatewaySpan) => Promise<ServedBy>;

/** Methods whose `params.uri` names the resource they act on. */
const BY_URI = new Set(['resources/read', 'resources/subscribe', 'resources/unsubscribe']);

/** The URI a message is routed by, when it is routed by one: params.uri, or a completion's ref/resource uri. */
export function routingUri(message: JsonRpcMessage): string | undefined {
  const params = record(message.params);
  if (typeof message.method !== 'string' || !params) return undefined;
  if (BY_URI.has(message.method)) return typeof params.uri === 'string' ? params.uri : undefined;
  const ref = message.method === 'completion/complete' ? record(params.ref) : undefined;
  return ref?.type === 'ref/resource' && typeof ref.uri === 'string' ? ref.uri : undefined;
}

/** Every URI the messages are routed by or watch (a listen's, judged as reads of them), once each. */
export function routingUris(messages: readonly JsonRpcMessage[]): string[] {
  const uris = new Set<string>();
  for (const message of messages) {
    const uri = routingUri(message);
    if (uri !== undefined) uris.add(uri);
    for (const watched of subscribedUris(message)) uris.add(watched);
  }
  return [...uris];
}

/**
 * `operation` with the upstream it is sent to, when the route is aggregated and it is sent to
 * one; the operation itself otherwise (and when it already names one: `explain --upstream`).
 */
export function withUpstream(policy: RoutePolicy, operation: Operation, message?: JsonRpcMessage, servedBy?: ServedBy): Operation {
  const { names } = policy;
  if (!names || operation.upstream !== undefined) return operation;
  const upstream = upstreamOf(names, operation, message, servedBy);
  return upstream === undefined ? operation : { ...operation, upstream };
}

function upstreamOf(names: NonNullable<RoutePolicy['names']>, operation: Operation, message: JsonRpcMessage | undefined, servedBy: ServedBy | undefined): string | undefined {
  const { method, name } = operation;
  if ((method === 'tools/call' || method === 'prompts/get') && name !== undefined) return names.owner(name)?.upstream;
  if (method === 'resources/read' && name !== undefined) return servedBy?.get(name);
  const ref = method === 'completion/complete' ? record(record(message?.params)?.ref) : undefined;
  if (ref?.type === 'ref/prompt') return typeof ref.name === 'string' ? names.owner(ref.name)?.upstream : undefined;
  const uri = message && routingUri(message);
  return uri === undefined ? undefined : servedBy?.get(uri);
}

const record = (v: unknown): Record<string, unknown> | undefined => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);
