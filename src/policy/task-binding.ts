// A route's binding of MCP tasks to principals, in the policy step: before a
// request is forwarded, a task it names must be the caller's (else
// TaskNotFoundError, nothing forwarded); the answer reader it gets records
// the tasks its answer creates and cuts task lists to the caller's own.
import type { AuthContext } from '../auth/principal.js';
import type { ResponseTransform } from '../proxy/response-transform.js';
import type { ParsedRequest } from './json-rpc.js';
import { TaskNotFoundError, taskRequestsOf, type TaskRequests } from './task-requests.js';
import type { TaskOwnership } from './task-ownership.js';
import { tasksAnswer } from './tasks-answer.js';

export interface TaskBindingLogger {
  warn(obj: object, msg: string): void;
}

export interface TaskBinding {
  /** What a request asks of tasks; undefined for most. Throws a 400 for params another reader could read otherwise. */
  asks(request: ParsedRequest): TaskRequests | undefined;
  /** Rejects (TaskNotFoundError) unless every task it names is the caller's; then the answer reader it needs, or none. */
  check(asks: TaskRequests, auth: AuthContext): Promise<ResponseTransform | undefined>;
  /** A GET stream may replay an answer to a `tasks/list` (a resumed POST stream): its task lists are cut too. */
  forGet(auth: AuthContext): Promise<ResponseTransform>;
}

/** As the tools/list reader's: the bound of a JSON answer, or one event, held to read its tasks. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

export function createTaskBinding(routePath: string, ownership: TaskOwnership, logger?: TaskBindingLogger): TaskBinding {
  const recorder = (auth: AuthContext) => (taskId: string, ttl: unknown) => {
    // Started as the answer passes; until it is stored the task is refused, even to its owner (fail closed).
    ownership.record(routePath, taskId, auth, ttl).catch((err: unknown) => {
      logger?.warn({ route: routePath, err }, 'could not record a task: it is refused to everyone');
    });
  };

  async function check(asks: TaskRequests, auth: AuthContext): Promise<ResponseTransform | undefined> {
    for (const taskId of asks.named) {
      if (taskId === undefined || !(await ownership.owns(routePath, taskId, auth))) throw new TaskNotFoundError(asks.id);
    }
    if (!asks.lists && !asks.creates) return undefined;
    const ownIds = asks.lists ? await ownership.ownIds(routePath, auth) : undefined;
    return tasksAnswer({ maxBytes: MAX_ANSWER_BYTES, ownIds, created: asks.creates ? recorder(auth) : undefined });
  }

  return {
    asks: taskRequestsOf,
    check,
    async forGet(auth) {
      return tasksAnswer({ maxBytes: MAX_ANSWER_BYTES, ownIds: await ownership.ownIds(routePath, auth) });
    },
  };
}
