// The fixture's `subscriptions/listen` streams (basic/patterns/subscriptions):
// an event stream that opens with the acknowledgement of the filter it will
// honour, carries the change notifications asked for (list changes, updates
// of the subscribed resource URIs), a keep-alive comment at a set interval,
// and stays open until the client closes it — which the fixture records, so
// tests can see how soon a close reached it.
import type { ServerResponse } from 'node:http';
import type { Json } from './rpc.js';

const META_SUBSCRIPTION = 'io.modelcontextprotocol/subscriptionId';
const LIST_CHANGES = ['toolsListChanged', 'promptsListChanged', 'resourcesListChanged'] as const;
type ListChange = (typeof LIST_CHANGES)[number];

interface Filter {
  toolsListChanged: boolean;
  promptsListChanged: boolean;
  resourcesListChanged: boolean;
  resourceSubscriptions: string[];
}

interface Listener {
  res: ServerResponse;
  /** The subscription id: the JSON-RPC id of the listen request. */
  id: unknown;
  filter: Filter;
}

/** One listen stream as the fixture saw it. */
export interface ListenRecord {
  /** The resource URIs it subscribed to. */
  resourceSubscriptions: string[];
  openedAt: number;
  /** When the connection closed (performance.now()), undefined while open. */
  closedAt?: number;
}

export interface Subscriptions {
  /** Every listen stream opened, in order. */
  readonly records: ListenRecord[];
  /** `id`: the listen request's JSON-RPC id, which names the subscription. */
  open(res: ServerResponse, params: Json, id: unknown): void;
  notifyListChanged(kind: ListChange, method: string): void;
  notifyResourceUpdated(uri: string): void;
  endAll(): void;
}

const sse = (message: Json) => `event: message\ndata: ${JSON.stringify(message)}\n\n`;

function filterOf(params: Json): Filter {
  const requested = (params.notifications ?? {}) as Record<string, unknown>;
  const uris = Array.isArray(requested.resourceSubscriptions) ? requested.resourceSubscriptions.filter((u): u is string => typeof u === 'string') : [];
  return {
    toolsListChanged: requested.toolsListChanged === true,
    promptsListChanged: requested.promptsListChanged === true,
    resourcesListChanged: requested.resourcesListChanged === true,
    resourceSubscriptions: uris,
  };
}

/** The acknowledged filter names only what was asked for and is honoured. */
function acknowledged(filter: Filter): Json {
  const out: Json = {};
  for (const kind of LIST_CHANGES) if (filter[kind]) out[kind] = true;
  if (filter.resourceSubscriptions.length > 0) out.resourceSubscriptions = filter.resourceSubscriptions;
  return out;
}

/** `keepAliveMs`: how often an idle stream gets a `:` comment line (0: never); `hangUp`: every listen ends right after its acknowledgement. */
export function subscriptions(keepAliveMs: number, hangUp = false): Subscriptions {
  const listeners = new Set<Listener>();
  const records: ListenRecord[] = [];
  const send = (l: Listener, method: string, params: Json = {}) => l.res.write(sse({ jsonrpc: '2.0', method, params: { ...params, _meta: { [META_SUBSCRIPTION]: l.id } } }));
  return {
    records,
    open(res, params, id) {
      const listener: Listener = { res, id, filter: filterOf(params) };
      const record: ListenRecord = { resourceSubscriptions: listener.filter.resourceSubscriptions, openedAt: performance.now() };
      records.push(record);
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
      send(listener, 'notifications/subscriptions/acknowledged', { notifications: acknowledged(listener.filter) });
      if (hangUp) {
        record.closedAt = performance.now();
        return void res.end();
      }
      listeners.add(listener);
      const keepAlive = keepAliveMs > 0 ? setInterval(() => res.write(':\r\n'), keepAliveMs) : undefined;
      res.on('close', () => {
        record.closedAt = performance.now();
        clearInterval(keepAlive);
        listeners.delete(listener);
      });
    },
    notifyListChanged(kind, method) {
      for (const l of listeners) if (l.filter[kind]) send(l, method);
    },
    notifyResourceUpdated(uri) {
      for (const l of listeners) if (l.filter.resourceSubscriptions.includes(uri)) send(l, 'notifications/resources/updated', { uri });
    },
    endAll() {
      for (const l of listeners) l.res.end();
    },
  };
}
