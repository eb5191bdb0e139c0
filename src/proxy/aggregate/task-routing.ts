// The client's `tasks/*` requests in an aggregated session (DESIGN §8.2,
// §8.3): one naming a task of the session (session-tasks.ts) goes to the
// upstream that created it, with the upstream's own id in `params.taskId` and
// in `Mcp-Name`; its answer shows the client's id. Any other id (another
// principal's task, one the session never saw created, a made-up one) is
// refused as an upstream refuses an unknown task, by that upstream itself:
// it goes to the first upstream up that serves tasks, as an id shaped like the
// client's that nobody can know (the non-aggregated gateway's substitution),
// and its answer comes back with the client's id in place. `tasks/list` is
// merged over every upstream up that lists tasks, keeping the session's own.
// A 2026-07-28 client has no `tasks/result` nor `tasks/list` (removed in its
// revision: -32601), and reaches the tasks of upstreams that announced the
// tasks extension.
import { randomUUID } from 'node:crypto';
import { restoreTaskIds, substituteTaskId } from '../../policy/task-substitution.js';
import type { GatewaySpan } from '../../observability/tracing.js';
import { TASKS_EXTENSION } from './merged-capabilities.js';
import type { SessionTasks } from './session-tasks.js';
import { shownAnswer, shownTasks } from './shown-task-ids.js';
import type { JsonRpcAnswer } from './upstream-link.js';

/** What a 2026-07-28 client cannot ask: removed in its revision. */
const REMOVED_IN_MODERN = new Set(['tasks/result', 'tasks/list']);

type Params = Record<string, unknown> | undefined;

/** An upstream of the session as task routing sees it (aggregate-methods.ts's SessionUpstream). */
interface TaskUpstream {
  link: { open(span?: GatewaySpan): Promise<Record<string, unknown>> };
  health: { name: string };
}

/** What of the session's methods task routing uses (aggregate-methods.ts), for its upstreams `U` and request contexts `C`. */
export interface TaskCalls<U extends TaskUpstream, C extends { span?: GatewaySpan }> {
  /** The session's upstreams that are not down, in configuration order. */
  served(): U[];
  named(upstream: string): U | undefined;
  /** One request to one upstream, failed at once while it is down (its failures as a call's). */
  call(u: U, method: string, params: Params, name: string | undefined, ctx: C): Promise<JsonRpcAnswer>;
  /** Every page of one upstream's list, bounded as a merged list's are. */
  pages(u: U, method: string, member: string, ctx: C): Promise<unknown[]>;
}

export class TaskRouting<U extends TaskUpstream, C extends { span?: GatewaySpan }> {
  constructor(
    private readonly tasks: SessionTasks,
    private readonly calls: TaskCalls<U, C>,
    /** The client speaks 2026-07-28 (a session-less session). */
    private readonly modernClient: boolean,
  ) {}

  async answer(method: string, params: Params, ctx: C): Promise<JsonRpcAnswer> {
    if (this.modernClient && REMOVED_IN_MODERN.has(method)) return methodNotFound(method);
    if (method === 'tasks/list') return this.list(ctx);
    const place = this.tasks.placeOf(params?.taskId);
    const u = place && this.calls.named(place.upstream);
    if (!place || !u) return this.unknown(method, params, ctx);
    const answer = await this.calls.call(u, method, { ...params, taskId: place.taskId }, place.taskId, ctx);
    return shownAnswer(answer, place.upstream, place.taskId, this.tasks);
  }

  /** Every page of every upstream up that lists tasks, cut to the session's own tasks. */
  private async list(ctx: C): Promise<JsonRpcAnswer> {
    const listing = await this.offering('list', ctx);
    if (listing.length === 0) return methodNotFound('tasks/list');
    const pages = await Promise.all(listing.map((u) => this.calls.pages(u, 'tasks/list', 'tasks', ctx).catch((): unknown[] => [])));
    return { result: { tasks: pages.flatMap((entries, i) => shownTasks(entries, listing[i]!.health.name, this.tasks)) } };
  }

  /** A task id that is not the session's: the first upstream up serving tasks answers it as unknown, in its own words. */
  private async unknown(method: string, params: Params, ctx: C): Promise<JsonRpcAnswer> {
    const [u] = await this.offering(undefined, ctx);
    if (!u) return methodNotFound(method);
    const given = params?.taskId;
    const substitute = typeof given === 'string' ? substituteTaskId(given) : randomUUID();
    const answer = await this.calls.call(u, method, { ...params, taskId: substitute }, substitute, ctx);
    if (typeof given !== 'string') return answer;
    return JSON.parse(restoreTaskIds(JSON.stringify(answer), new Map([[substitute, given]]))) as JsonRpcAnswer;
  }

  /** The upstreams up whose answer to the session's opening announced tasks (`feature`: that part of them, `list`). */
  private async offering(feature: 'list' | undefined, ctx: C): Promise<U[]> {
    const served = this.calls.served();
    const opened = await Promise.all(served.map((u) => u.link.open(ctx.span).catch(() => undefined)));
    return served.filter((_, i) => {
      const capabilities = opened[i]?.capabilities;
      const tasks = this.modernClient ? (isRecord(capabilities) && isRecord(capabilities.extensions) ? capabilities.extensions[TASKS_EXTENSION] : undefined) : isRecord(capabilities) ? capabilities.tasks : undefined;
      return isRecord(tasks) && (feature === undefined || isRecord(tasks[feature]));
    });
  }
}

const methodNotFound = (method: string): JsonRpcAnswer => ({ error: { code: -32601, message: `Method not found: ${method}` } });

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
