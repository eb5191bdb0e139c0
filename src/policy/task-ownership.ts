// Binds MCP tasks (2025-11-25 basic/utilities/tasks, "Task isolation and
// access control"; the 2026-07-28 tasks extension) to the principal whose
// request's answer carried them, as sessions are (session-binding.ts): an
// upstream with one task store for every request would otherwise hand one
// principal's task to anyone who names its id or lists tasks.
// Two records: the owner of each task (owned-ids.ts), and the principal's log
// of its task ids, which a `tasks/list` answer is cut down to. The log holds at
// most MAX_LISTED_TASKS per principal and route: past it a new task is still
// the principal's but not listed (its share of the store is bounded).
import type { AuthContext } from '../auth/principal.js';
import { principalKey } from '../auth/principal.js';
import { hashKeyPart, principalTasksKey, taskOwnerKey } from '../store/key-names.js';
import type { Store } from '../store/store.js';
import { createOwnedIds, storeCall } from './owned-ids.js';

/** A task lives as long as its `ttl` says, at most this long; so does the record of it. */
export const MAX_TASK_TTL_MS = 24 * 60 * 60 * 1000;
/** A task whose answer names no `ttl` (unlimited, to the upstream) is kept this long. */
export const DEFAULT_TASK_TTL_MS = 60 * 60 * 1000;
/** The tasks one principal's `tasks/list` can show on one route. */
export const MAX_LISTED_TASKS = 1000;

const UNAVAILABLE = 'Task store unavailable';

export interface TaskOwnership {
  /** Records a task id the upstream answered this principal with (never overwrites another's). */
  record(taskId: string, auth: AuthContext, ttl: unknown): Promise<void>;
  /** Whether the task was recorded as this principal's. */
  owns(taskId: string, auth: AuthContext): Promise<boolean>;
  /** The hashed ids (`hashKeyPart`) of this principal's listed tasks. */
  ownIds(auth: AuthContext): Promise<ReadonlySet<string>>;
}

/** The record's lifetime: the task's own `ttl` (2025-11-25) or `ttlMs` (2026-07-28) in ms when a positive integer, capped; else the default. */
export function taskTtlMs(ttl: unknown): number {
  if (typeof ttl !== 'number' || !Number.isSafeInteger(ttl) || ttl <= 0) return DEFAULT_TASK_TTL_MS;
  return Math.min(ttl, MAX_TASK_TTL_MS);
}

export function createTaskOwnership(store: Store, routePath: string): TaskOwnership {
  const owners = createOwnedIds(store, (taskId) => taskOwnerKey(routePath, taskId), UNAVAILABLE);
  const logKey = (auth: AuthContext) => principalTasksKey(routePath, principalKey(auth));
  /** Records (owner and log) still being written on this replica: a list asked meanwhile waits for them. */
  const recording = new Set<Promise<void>>();
  async function recordBoth(taskId: string, auth: AuthContext, ttl: unknown): Promise<void> {
    if (!(await owners.record(taskId, auth, taskTtlMs(ttl)))) return;
    const key = logKey(auth);
    const listed = await storeCall(() => store.readLog(key, 0), UNAVAILABLE);
    const member = hashKeyPart(taskId);
    if (listed.length >= MAX_LISTED_TASKS || listed.some((entry) => entry.member === member)) return;
    await storeCall(() => store.appendToLog(key, member, MAX_TASK_TTL_MS), UNAVAILABLE);
  }
  return {
    async record(taskId, auth, ttl) {
      const written = recordBoth(taskId, auth, ttl);
      recording.add(written);
      try {
        await written;
      } finally {
        recording.delete(written);
      }
    },
    owns: (taskId, auth) => owners.owns(taskId, auth),
    async ownIds(auth) {
      await Promise.allSettled(recording);
      const log = await storeCall(() => store.readLog(logKey(auth), 0), UNAVAILABLE);
      return new Set(log.map((entry) => entry.member));
    },
  };
}
