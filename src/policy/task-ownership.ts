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
  /**
   * This principal's tasks by hashed id (`hashKeyPart`): those its log lists now, and those this
   * replica records for it later (a GET stream opened before a task was created sees it too).
   */
  ownIds(auth: AuthContext): Promise<IdSet>;
}

export interface IdSet {
  has(hashedId: string): boolean;
}

/** Principals whose recent tasks this replica remembers, each its MAX_LISTED_TASKS newest: bounded memory. */
const MAX_RECENT_PRINCIPALS = 10_000;

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
  const recent = recentTasks();
  async function recordBoth(taskId: string, auth: AuthContext, ttl: unknown): Promise<void> {
    if (!(await owners.record(taskId, auth, taskTtlMs(ttl)))) return;
    recent.add(principalKey(auth), hashKeyPart(taskId));
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
      const listed = new Set(log.map((entry) => entry.member));
      const principal = principalKey(auth);
      return { has: (hashedId) => listed.has(hashedId) || recent.has(principal, hashedId) };
    },
  };
}

/** The tasks this replica recorded lately, per principal: Map and Set keep insertion order, so the oldest go first. */
function recentTasks() {
  const byPrincipal = new Map<string, Set<string>>();
  return {
    add(principal: string, hashedId: string): void {
      let ids = byPrincipal.get(principal);
      if (ids === undefined) {
        if (byPrincipal.size >= MAX_RECENT_PRINCIPALS) byPrincipal.delete(byPrincipal.keys().next().value!);
        byPrincipal.set(principal, (ids = new Set()));
      }
      ids.add(hashedId);
      if (ids.size > MAX_LISTED_TASKS) ids.delete(ids.values().next().value!);
    },
    has: (principal: string, hashedId: string): boolean => byPrincipal.get(principal)?.has(hashedId) === true,
  };
}
