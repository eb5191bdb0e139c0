// Binds MCP tasks (MCP 2025-11-25 basic/utilities/tasks, "Task isolation and
// access control") to the principal whose request created them, as sessions
// are (session-binding.ts): an upstream with one task store for every request
// would otherwise hand one principal's task to anyone who names its id.
// Fails closed: a task id the gateway never recorded is refused like another
// principal's, and an answer read too late or not at all only hides a task.
import type { AuthContext } from '../auth/principal.js';
import { principalKey } from '../auth/principal.js';
import { translateKnown } from '../errors/translate.js';
import { hashKeyPart, principalTasksKey, taskOwnerKey } from '../store/key-names.js';
import type { Store } from '../store/store.js';

/** A task lives as long as its `ttl` says, at most this long; so does the record of it. */
export const MAX_TASK_TTL_MS = 24 * 60 * 60 * 1000;
/** A task whose answer names no `ttl` (unlimited, to the upstream) is kept this long. */
export const DEFAULT_TASK_TTL_MS = 60 * 60 * 1000;

export interface TaskOwnership {
  /** Records a task id the upstream just answered with as this principal's (never overwrites another's). */
  record(routePath: string, taskId: string, auth: AuthContext, ttl: unknown): Promise<void>;
  /** Whether the task was recorded as this principal's. */
  owns(routePath: string, taskId: string, auth: AuthContext): Promise<boolean>;
  /** The hashed ids (`hashKeyPart`) of this principal's tasks on the route. */
  ownIds(routePath: string, auth: AuthContext): Promise<ReadonlySet<string>>;
}

/** The record's lifetime: the task's own `ttl` in ms when it is a positive integer, capped; else the default. */
export function taskTtlMs(ttl: unknown): number {
  if (typeof ttl !== 'number' || !Number.isSafeInteger(ttl) || ttl <= 0) return DEFAULT_TASK_TTL_MS;
  return Math.min(ttl, MAX_TASK_TTL_MS);
}

async function storeCall<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    // A store that is down is the client's 503; a fault goes on as it is.
    throw translateKnown(err, { storeUnavailable: 'Task store unavailable' }) ?? err;
  }
}

export function createTaskOwnership(store: Store): TaskOwnership {
  const owner = (auth: AuthContext) => hashKeyPart(principalKey(auth));
  /** Records still being written on this replica, by key. */
  const pending = new Map<string, Promise<void>>();
  /** SET NX, never overwritten: an upstream handing one id to two principals leaves it the first one's. True when it is this owner's. */
  const recordOnce = async (key: string, value: string, ttlMs: number): Promise<boolean> =>
    (await storeCall(() => store.setIfAbsent(key, value, ttlMs))) || (await storeCall(() => store.get(key))) === value;
  return {
    async record(routePath, taskId, auth, ttl) {
      const key = taskOwnerKey(routePath, taskId);
      const write = recordOnce(key, owner(auth), taskTtlMs(ttl)).then(async (mine) => {
        if (mine) await storeCall(() => store.appendToLog(principalTasksKey(routePath, principalKey(auth)), hashKeyPart(taskId), MAX_TASK_TTL_MS));
      });
      pending.set(key, write);
      try {
        await write;
      } finally {
        if (pending.get(key) === write) pending.delete(key);
      }
    },

    async owns(routePath, taskId, auth) {
      const key = taskOwnerKey(routePath, taskId);
      // Written on this replica as the answer went by and not yet stored: the owner asking at once waits for it.
      await pending.get(key)?.catch(() => undefined);
      return (await storeCall(() => store.get(key))) === owner(auth);
    },

    async ownIds(routePath, auth) {
      await Promise.allSettled(pending.values());
      const log = await storeCall(() => store.readLog(principalTasksKey(routePath, principalKey(auth)), 0));
      return new Set(log.map((entry) => entry.member));
    },
  };
}
