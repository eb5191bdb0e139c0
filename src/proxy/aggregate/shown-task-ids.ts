// Where task ids appear in what an upstream sends an aggregated session, and
// how each is shown to the client (session-tasks.ts): a task a `tools/call`
// created (2025-11-25 `result.task`, 2026-07-28's flat `resultType: "task"`),
// the answers of `tasks/*` about one task, task notifications
// (`notifications/tasks/status`; 2026-07-28 `notifications/tasks`), and the
// `io.modelcontextprotocol/related-task` of any message. Only those places are
// read: an id elsewhere (a tool's own text) is the upstream's content.
import type { JsonRpcAnswer } from './upstream-link.js';
import type { SessionTasks } from './session-tasks.js';

export const RELATED_TASK = 'io.modelcontextprotocol/related-task';
/** 2025-11-25 `notifications/tasks/status`, 2026-07-28 `notifications/tasks`. */
export const TASK_NOTIFICATION = /^notifications\/tasks(\/|$)/;
/** An upstream's id is put back in an error's text only when this long: a shorter one (`1`) could be any word of it. */
const MIN_REPLACED_LENGTH = 8;

/** What a notification's params become: HIDDEN when it is about a task that is not this session's. */
export const HIDDEN = Symbol('hidden');

type Params = Record<string, unknown>;

/** A `tools/call` answer: a task it created is the session's from now on, shown by its shown id. */
export function shownCreation(answer: JsonRpcAnswer, upstream: string, tasks: SessionTasks): JsonRpcAnswer {
  const result = answer.result;
  if (!result) return answer;
  if (isRecord(result.task) && typeof result.task.taskId === 'string') {
    const shown = tasks.created(upstream, result.task.taskId, result.task.ttl ?? result.task.ttlMs);
    return { result: withRelated({ ...result, task: { ...result.task, taskId: shown } }, upstream, tasks) };
  }
  if (result.resultType === 'task' && typeof result.taskId === 'string') {
    const shown = tasks.created(upstream, result.taskId, result.ttlMs ?? result.ttl);
    return { result: withRelated({ ...result, taskId: shown }, upstream, tasks) };
  }
  return answer;
}

/** The answer of a `tasks/*` request about one task of the session: the upstream's id of it shown as the client's. */
export function shownAnswer(answer: JsonRpcAnswer, upstream: string, taskId: string, tasks: SessionTasks): JsonRpcAnswer {
  const shown = tasks.shownOf(upstream, taskId);
  if (answer.error) {
    if (shown === undefined || taskId.length < MIN_REPLACED_LENGTH || !answer.error.message.includes(taskId)) return answer;
    return { error: { ...answer.error, message: answer.error.message.split(taskId).join(shown) } };
  }
  const result = answer.result;
  if (!result) return answer;
  const out: Params = { ...result };
  if (typeof out.taskId === 'string') out.taskId = tasks.shownOf(upstream, out.taskId) ?? out.taskId;
  if (isRecord(out.task) && typeof out.task.taskId === 'string') out.task = { ...out.task, taskId: tasks.shownOf(upstream, out.task.taskId) ?? out.task.taskId };
  return { result: withRelated(out, upstream, tasks) };
}

/** A `tasks/list` page's entries that are this session's tasks, each shown by its shown id. */
export function shownTasks(entries: readonly unknown[], upstream: string, tasks: SessionTasks): Params[] {
  const out: Params[] = [];
  for (const entry of entries) {
    if (!isRecord(entry)) continue;
    const shown = tasks.shownOf(upstream, entry.taskId);
    if (shown !== undefined) out.push({ ...entry, taskId: shown });
  }
  return out;
}

/**
 * A notification's or request's params from an upstream, as the client is shown them: a task
 * notification only for a task of this session (HIDDEN otherwise: another principal's, or one
 * the session never saw created); a related task's id shown, or taken out when not the session's.
 */
export function shownParams(method: string, params: Params | undefined, upstream: string, tasks: SessionTasks): Params | undefined | typeof HIDDEN {
  if (params === undefined) return undefined;
  if (TASK_NOTIFICATION.test(method)) {
    const shown = tasks.shownOf(upstream, params.taskId);
    if (shown === undefined) return HIDDEN;
    return withRelated({ ...params, taskId: shown }, upstream, tasks);
  }
  return withRelated(params, upstream, tasks);
}

/** `params` with its `_meta`'s related task shown (or taken out when it is not the session's). */
function withRelated(params: Params, upstream: string, tasks: SessionTasks): Params {
  const meta = params._meta;
  if (!isRecord(meta) || !(RELATED_TASK in meta)) return params;
  const related = meta[RELATED_TASK];
  const shown = isRecord(related) ? tasks.shownOf(upstream, related.taskId) : undefined;
  const { [RELATED_TASK]: _dropped, ...rest } = meta;
  return { ...params, _meta: shown === undefined ? rest : { ...rest, [RELATED_TASK]: { ...(related as Params), taskId: shown } } };
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
