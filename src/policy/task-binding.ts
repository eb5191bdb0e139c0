// A route's binding of what outlives a request to the principal whose request
// it came back to (DESIGN.md §8.3), for upstreams that know nothing of
// principals: MCP tasks and event-stream event ids. Before a request is
// forwarded, a task id it names that is not the caller's is replaced by one
// the upstream cannot know (task-substitution.ts: the upstream's own
// "unknown task" answer, whatever its revision), and a `Last-Event-ID` that
// was not passed on to the caller is refused. The answer reader it hands the
// proxy records the task and event ids the answer carries, cuts task lists to
// the caller's own, and puts substituted ids back (bound-answers.ts).
import type { IncomingHttpHeaders } from 'node:http';
import type { AuthContext } from '../auth/principal.js';
import { GatewayError } from '../errors/gateway-error.js';
import type { ResponseTransform } from '../proxy/response-transform.js';
import { eventIdOwnerKey } from '../store/key-names.js';
import type { Store } from '../store/store.js';
import { boundAnswers } from './bound-answers.js';
import type { ParsedRequest } from './json-rpc.js';
import { createOwnedIds } from './owned-ids.js';
import { createTaskOwnership } from './task-ownership.js';
import { taskRequestsOf, type TaskRequests } from './task-requests.js';
import { substituteTasks } from './task-substitution.js';
import { decodeHeaderValue } from './mcp-headers.js';

export interface TaskBindingLogger {
  warn(obj: object, msg: string): void;
}

export interface BoundRequest {
  /** The body to forward in place of the client's (a foreign task id substituted). */
  body?: Buffer;
  /** Headers to forward in place of the client's: an `Mcp-Name` that named the substituted task names its substitute. */
  headers?: Record<string, string>;
  transform?: ResponseTransform;
}

export interface TaskBinding {
  /**
   * Before a POST is forwarded: refuses (400) a `Last-Event-ID` not passed on to this principal; its body (when a task id was
   * substituted) and its answer's reader. Synchronous when nothing needs the store: no `Last-Event-ID`, no task named or listed.
   */
  forPost(request: ParsedRequest, headers: IncomingHttpHeaders, auth: AuthContext): BoundRequest | Promise<BoundRequest>;
  /** Before a GET (or any request) is forwarded: refuses (400) a `Last-Event-ID` not passed on to this principal; the GET stream's reader. */
  forStream(headers: IncomingHttpHeaders, auth: AuthContext): Promise<ResponseTransform>;
}

/** As the tools/list reader's: the bound of a JSON answer, or one event, held to read it. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/** How long an event id may be resumed after: an event store keeps recent events; a client reconnects within seconds. */
export const EVENT_ID_TTL_MS = 60 * 60 * 1000;
/** SSE allows any id; the transport specification's ids are short. Past this the header is refused unread. */
const MAX_EVENT_ID_LENGTH = 1024;

/** At most one warning this often per kind of record that could not be written. */
const WARN_INTERVAL_MS = 10_000;

const unattributed = () => new GatewayError(400, 'invalid_request', 'Last-Event-ID names no event this gateway passed on to you');

export function createTaskBinding(routePath: string, store: Store, logger?: TaskBindingLogger): TaskBinding {
  const tasks = createTaskOwnership(store, routePath);
  const events = createOwnedIds(store, (id) => eventIdOwnerKey(routePath, id), 'Event store unavailable');
  const failed = recordFailures(routePath, logger);

  // Started as the answer passes; until stored, the id is refused to others and waited for by its owner on this replica.
  const recorders = (auth: AuthContext) => ({
    task: (taskId: string, ttl: unknown) => void tasks.record(taskId, auth, ttl).catch(failed('a task')),
    eventId: (id: string) => {
      if (id.length <= MAX_EVENT_ID_LENGTH) void events.record(id, auth, EVENT_ID_TTL_MS).catch(failed('an event id'));
    },
  });

  async function checkLastEventId(headers: IncomingHttpHeaders, auth: AuthContext): Promise<void> {
    const lastEventId = headers['last-event-id'];
    if (lastEventId === undefined) return;
    if (typeof lastEventId !== 'string' || lastEventId.length > MAX_EVENT_ID_LENGTH) throw unattributed();
    if (!(await events.owns(lastEventId, auth))) throw unattributed();
  }

  const unnamed = unnamedBindings((auth, mayCreate) => boundAnswers({ ...recorders(auth), readJson: mayCreate, maxBytes: MAX_ANSWER_BYTES }));

  function bindTasks(request: ParsedRequest, asks: TaskRequests | undefined, headers: IncomingHttpHeaders, auth: AuthContext): BoundRequest | Promise<BoundRequest> {
    // Most requests (a tools/call among them) need nothing of the store: no promise, no await.
    if (asks === undefined || (asks.named.length === 0 && !asks.lists)) return unnamed(auth, asks?.mayCreate === true);
    return bindNamedTasks(request, asks, headers, auth);
  }

  async function bindNamedTasks(request: ParsedRequest, asks: TaskRequests, headers: IncomingHttpHeaders, auth: AuthContext): Promise<BoundRequest> {
    const owned = await Promise.all(asks.named.map(({ taskId }) => typeof taskId === 'string' && tasks.owns(taskId, auth)));
    const foreign = asks.named.filter((_, i) => !owned[i]).map(({ message }) => message);
    const substitution = foreign.length > 0 ? substituteTasks(request, foreign) : undefined;
    const ownIds = asks.lists ? await tasks.ownIds(auth) : undefined;
    return {
      body: substitution?.body,
      headers: substitution && mcpNameOf(request, headers, substitution.headerNames),
      transform: boundAnswers({ ...recorders(auth), readJson: asks.mayCreate, ownIds, restore: substitution?.restore, maxBytes: MAX_ANSWER_BYTES }),
    };
  }

  return {
    forPost(request, headers, auth) {
      // Resumption is a GET's, but an upstream may read the header on any request.
      if (headers['last-event-id'] !== undefined) return checkLastEventId(headers, auth).then(() => bindTasks(request, taskRequestsOf(request), headers, auth));
      return bindTasks(request, taskRequestsOf(request), headers, auth);
    },

    async forStream(headers, auth) {
      await checkLastEventId(headers, auth);
      // A GET stream may replay an answer to a `tasks/list` (a resumed POST stream): its task lists are cut too.
      return boundAnswers({ ...recorders(auth), ownIds: await tasks.ownIds(auth), maxBytes: MAX_ANSWER_BYTES });
    },
  };
}

/**
 * What a request that names and lists no task gets depends only on its principal and whether its
 * answer may create a task: made once per principal (the verified context, which the token cache
 * hands every request of a token) instead of two closures, two objects and a reader per request.
 * Held weakly: it goes with the context.
 */
function unnamedBindings(readerFor: (auth: AuthContext, mayCreate: boolean) => ResponseTransform): (auth: AuthContext, mayCreate: boolean) => BoundRequest {
  const made = new WeakMap<AuthContext, { mayCreate?: BoundRequest; other?: BoundRequest }>();
  return (auth, mayCreate) => {
    let own = made.get(auth);
    if (own === undefined) made.set(auth, (own = {}));
    return mayCreate ? (own.mayCreate ??= Object.freeze({ transform: readerFor(auth, true) })) : (own.other ??= Object.freeze({ transform: readerFor(auth, false) }));
  };
}

/** A store outage under an endless stream would fail every event's write: one line per kind and interval. */
function recordFailures(routePath: string, logger: TaskBindingLogger | undefined) {
  const lastWarned = new Map<string, number>();
  return (what: string) => (err: unknown) => {
    const now = Date.now();
    if (now - (lastWarned.get(what) ?? 0) < WARN_INTERVAL_MS) return;
    lastWarned.set(what, now);
    logger?.warn({ route: routePath, err }, `could not record ${what}: it is refused to everyone`);
  };
}

/**
 * A single request's `Mcp-Name` (2026-07-28: the task id, on `tasks/*`) that named the substituted
 * task is sent naming the substitute, so the upstream finds header and body agreeing, as they
 * would for any unknown task; a header that disagreed with the body is left to disagree.
 */
function mcpNameOf(request: ParsedRequest, headers: IncomingHttpHeaders, headerNames: ReadonlyMap<string, string>): Record<string, string> | undefined {
  const raw = headers['mcp-name'];
  if (request.batch || typeof raw !== 'string') return undefined;
  const name = decodeHeaderValue(raw);
  const substitute = name === undefined ? undefined : headerNames.get(name);
  return substitute === undefined ? undefined : { 'mcp-name': substitute };
}
