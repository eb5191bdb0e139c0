// What a 2026-07-28 client opts in to on a `subscriptions/listen` of an
// aggregated route (basic/patterns/subscriptions, SEP-2575): the list changes it
// asks for, and the resource URIs whose updates it wants. The route honours
// every list change (each upstream that sends one is asked for it) and the URIs
// served by an upstream of 2026-07-28 (asked on that upstream's own listen, and
// only there: another upstream never learns what a client watches elsewhere).
// A notification reaches the client only when its filter asked for it.

/** The filter's list-change flags and the notification each stands for. */
export const LIST_CHANGES = {
  toolsListChanged: 'notifications/tools/list_changed',
  promptsListChanged: 'notifications/prompts/list_changed',
  resourcesListChanged: 'notifications/resources/list_changed',
} as const;
export type ListChange = keyof typeof LIST_CHANGES;
export const RESOURCE_UPDATED = 'notifications/resources/updated';
/** Resource URIs one listen may watch; beyond, the rest are not honoured (the acknowledgement says which are). */
export const MAX_WATCHED_URIS = 256;

export interface ListenFilter {
  changes: ReadonlySet<ListChange>;
  uris: readonly string[];
}

/** The client's filter, or undefined when `params.notifications` is not an object (the request is then invalid, -32602). */
export function listenFilterOf(params: unknown): ListenFilter | undefined {
  const asked = isRecord(params) ? params.notifications : undefined;
  if (!isRecord(asked)) return undefined;
  const changes = new Set((Object.keys(LIST_CHANGES) as ListChange[]).filter((kind) => asked[kind] === true));
  const given = Array.isArray(asked.resourceSubscriptions) ? asked.resourceSubscriptions : [];
  const uris = [...new Set(given.filter((u): u is string => typeof u === 'string'))].slice(0, MAX_WATCHED_URIS);
  return { changes, uris };
}

/** What one upstream is asked for: the list changes, and the watched URIs it serves. */
export function upstreamFilter(filter: ListenFilter, uris: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kind of filter.changes) out[kind] = true;
  if (uris.length > 0) out.resourceSubscriptions = [...uris];
  return out;
}

/** The acknowledged subset: every list change asked for, and the URIs honoured. */
export function acknowledged(filter: ListenFilter, honouredUris: readonly string[]): Record<string, unknown> {
  return upstreamFilter(filter, honouredUris);
}

/**
 * The notification the client is sent for an upstream's, or undefined when its filter did not ask
 * for it: a list change as itself, an update of a URI watched at that upstream (`watched`) with its
 * URI. Rebuilt, never copied: nothing else an upstream put in it reaches the client.
 */
export function notificationFor(filter: ListenFilter, method: string, params: Record<string, unknown> | undefined, watched: ReadonlySet<string>): { method: string; params: Record<string, unknown> } | undefined {
  const kind = (Object.keys(LIST_CHANGES) as ListChange[]).find((k) => LIST_CHANGES[k] === method);
  if (kind !== undefined) return filter.changes.has(kind) ? { method, params: {} } : undefined;
  if (method === RESOURCE_UPDATED && typeof params?.uri === 'string' && watched.has(params.uri)) return { method, params: { uri: params.uri } };
  return undefined;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
