// What a request asks of MCP tasks (2025-11-25 basic/utilities/tasks; the
// 2026-07-28 tasks extension): the task ids it names (`tasks/get`,
// `tasks/result`, `tasks/cancel`, `tasks/update`: any `tasks/` method with a
// `params.taskId` of any JSON type, since an upstream may coerce `1` or `["1"]`
// to task "1"; only a string can be owned), whether it lists tasks, and whether its answer may
// create one (`tools/call`, which 2026-07-28 servers may turn into a task
// unasked, or a request with `params.task`). Nothing here refuses: an id the
// caller does not own is replaced by one the upstream cannot know
// (task-substitution.ts), so the upstream answers with its own error.
import { GatewayError } from '../errors/gateway-error.js';
import type { JsonRpcMessage, ParsedRequest } from './json-rpc.js';
import { AmbiguousMemberError, checkMemberNames, readNames } from './member-names.js';

const PARAMS_MEMBERS = readNames('taskId', 'task');

export interface NamedTask {
  /** The message (in the request's order) whose `params.taskId` it is. */
  message: JsonRpcMessage;
  /** As sent: a string names a task; anything else is never the caller's (ids are strings) and is substituted. */
  taskId: unknown;
}

export interface TaskRequests {
  /** Task ids named by `tasks/*` methods. */
  named: NamedTask[];
  /** A message is `tasks/list`: its answer is cut to the caller's own tasks. */
  lists: boolean;
  /** A message's answer may create a task: it is read for task ids. */
  mayCreate: boolean;
}

/** What the request asks of tasks; undefined when nothing (most requests). Throws a 400 for params another reader could read otherwise. */
export function taskRequestsOf(request: ParsedRequest): TaskRequests | undefined {
  let found: TaskRequests | undefined;
  for (const message of request.messages) {
    const { method, params } = message;
    if (typeof method !== 'string') continue;
    const read = typeof params === 'object' && params !== null && !Array.isArray(params) ? readParams(params) : undefined;
    const inTasks = method.startsWith('tasks/');
    const names = inTasks && read !== undefined && read.taskId !== undefined;
    const lists = method === 'tasks/list';
    const mayCreate = method === 'tools/call' || (typeof read?.task === 'object' && read.task !== null);
    if (!names && !lists && !mayCreate) continue;
    found ??= { named: [], lists: false, mayCreate: false };
    if (names) found.named.push({ message, taskId: read!.taskId });
    found.lists ||= lists;
    found.mayCreate ||= mayCreate;
  }
  return found;
}

function readParams(params: object): Record<string, unknown> {
  try {
    checkMemberNames(params, PARAMS_MEMBERS, 'params');
  } catch (err) {
    if (err instanceof AmbiguousMemberError) throw new GatewayError(400, 'invalid_request', `The body is not JSON-RPC one way only: ${err.message}`);
    throw err;
  }
  return params as Record<string, unknown>;
}
