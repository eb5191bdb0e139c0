// What a request asks of MCP tasks (MCP 2025-11-25 basic/utilities/tasks):
// the task ids it names (`tasks/get`, `tasks/result`, `tasks/cancel`), whether
// it lists tasks, whether it asks for a task to be created (`params.task`).
// A task id that is not the caller's is refused with one answer, whether the
// task is another principal's or unknown: the refusal tells nothing about
// other principals' tasks.
import { GatewayError } from '../errors/gateway-error.js';
import { idOf, type JsonRpcId, type ParsedRequest } from './json-rpc.js';
import { AmbiguousMemberError, checkMemberNames, readNames } from './member-names.js';

/** Methods that name one task by `params.taskId`. */
const BY_TASK_ID: ReadonlySet<string> = new Set(['tasks/get', 'tasks/result', 'tasks/cancel']);
const PARAMS_MEMBERS = readNames('taskId', 'task');
/** JSON-RPC "Invalid params": what the MCP tasks specification answers for a task it does not know. */
const INVALID_PARAMS = -32602;

export interface TaskRequests {
  /** Task ids named by tasks/get, tasks/result, tasks/cancel; undefined for one without a string `taskId` (refused). */
  named: (string | undefined)[];
  /** A message is `tasks/list`. */
  lists: boolean;
  /** A message is task-augmented (`params.task`): its answer may create a task. */
  creates: boolean;
  /** The id a refusal answers with: the message's, null for a batch. */
  id: JsonRpcId;
}

/** A task that is unknown or another principal's: 403 as other policy refusals, with a JSON-RPC error body. */
export class TaskNotFoundError extends GatewayError {
  override readonly name = 'TaskNotFoundError';

  constructor(readonly id: JsonRpcId) {
    super(403, 'access_denied', 'Task not found');
  }

  override body(): string {
    return JSON.stringify({ jsonrpc: '2.0', id: this.id, error: { code: INVALID_PARAMS, message: 'Task not found' } });
  }
}

/** What the request asks of tasks; undefined when nothing (most requests). Throws a 400 for params another reader could read otherwise. */
export function taskRequestsOf(request: ParsedRequest): TaskRequests | undefined {
  let found: TaskRequests | undefined;
  const id = request.batch ? null : (idOf(request.messages[0]!) ?? null);
  for (const message of request.messages) {
    const { method, params } = message;
    const read = typeof params === 'object' && params !== null ? readParams(params) : undefined;
    const names = typeof method === 'string' && BY_TASK_ID.has(method);
    const lists = method === 'tasks/list';
    const creates = typeof read?.task === 'object' && read.task !== null;
    if (!names && !lists && !creates) continue;
    found ??= { named: [], lists: false, creates: false, id };
    if (names) found.named.push(typeof read?.taskId === 'string' ? read.taskId : undefined);
    found.lists ||= lists;
    found.creates ||= creates;
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
