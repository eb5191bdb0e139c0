/**
 * The tasks of one aggregated session (src/proxy/aggregate/session-tasks.ts, shown-task-ids.ts):
 * two upstreams' clashing task ids are shown as two ids of the gateway's, each leading back to
 * its own upstream and id; a session holds a bounded number, each for its ttl; only the places
 * where MCP puts task ids are rewritten, and a notification of a task that is not the session's
 * is hidden.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_TASKS_PER_SESSION, SessionTasks } from '../../src/proxy/aggregate/session-tasks.js';
import { HIDDEN, RELATED_TASK, shownAnswer, shownCreation, shownParams, shownTasks } from '../../src/proxy/aggregate/shown-task-ids.js';

describe('the tasks of an aggregated session', () => {
  it('shows clashing ids of two upstreams as two ids, each leading to its own upstream and id', () => {
    fc.assert(
      fc.property(fc.string({ minLength: 1, maxLength: 40 }), (id) => {
        const tasks = new SessionTasks();
        const a = tasks.created('a', id, 60_000);
        const b = tasks.created('b', id, 60_000);
        expect(a).not.toBe(b);
        expect(tasks.placeOf(a)).toEqual({ upstream: 'a', taskId: id });
        expect(tasks.placeOf(b)).toEqual({ upstream: 'b', taskId: id });
        expect(tasks.shownOf('a', id)).toBe(a);
        expect(tasks.created('a', id, 60_000)).toBe(a); // the same task again: the same id
        expect(tasks.placeOf(id)).toBeUndefined(); // the upstream's own id leads nowhere
      }),
    );
  });

  it('holds at most its bound (the oldest forgotten first) and each task for its ttl', () => {
    let now = 0;
    const tasks = new SessionTasks(() => now);
    const first = tasks.created('a', 't0', 1_000);
    for (let i = 1; i <= MAX_TASKS_PER_SESSION; i++) tasks.created('a', `t${i}`, 1_000);
    expect(tasks.size).toBe(MAX_TASKS_PER_SESSION);
    expect(tasks.placeOf(first)).toBeUndefined();
    expect(tasks.shownOf('a', 't0')).toBeUndefined();
    const last = tasks.shownOf('a', `t${MAX_TASKS_PER_SESSION}`)!;
    now = 999;
    expect(tasks.placeOf(last)).toBeDefined();
    now = 1_000;
    expect(tasks.placeOf(last)).toBeUndefined();
  });

  it("rewrites the places MCP puts task ids, and nothing of a tool's own content", () => {
    const tasks = new SessionTasks();
    const created = shownCreation({ result: { task: { taskId: 'up-1', status: 'working', ttl: 60_000 }, _meta: { [RELATED_TASK]: { taskId: 'up-1' } } } }, 'a', tasks);
    const shown = (created.result!.task as { taskId: string }).taskId;
    expect(shown).not.toBe('up-1');
    expect((created.result!._meta as Record<string, { taskId: string }>)[RELATED_TASK]!.taskId).toBe(shown);
    const flat = shownCreation({ result: { resultType: 'task', taskId: 'up-2', ttlMs: 1_000 } }, 'b', tasks);
    expect(tasks.placeOf(flat.result!.taskId)).toEqual({ upstream: 'b', taskId: 'up-2' });
    const result = shownAnswer({ result: { content: [{ type: 'text', text: 'up-1' }], _meta: { [RELATED_TASK]: { taskId: 'up-1' } } } }, 'a', 'up-1', tasks);
    expect(result.result).toEqual({ content: [{ type: 'text', text: 'up-1' }], _meta: { [RELATED_TASK]: { taskId: shown } } });
    expect(shownAnswer({ error: { code: -32602, message: 'Task not found: up-1' } }, 'a', 'up-1', tasks).error!.message).toBe('Task not found: up-1'); // too short to replace safely
    const long = tasks.created('a', '0123456789abcdef', 1_000);
    expect(shownAnswer({ error: { code: -32602, message: 'Task not found: 0123456789abcdef' } }, 'a', '0123456789abcdef', tasks).error!.message).toBe(`Task not found: ${long}`);
    expect(shownTasks([{ taskId: 'up-1' }, { taskId: 'someone-else' }, 'junk'], 'a', tasks)).toEqual([{ taskId: shown }]);
  });

  it("hides a task notification of a task not the session's, and takes out a related task not the session's", () => {
    const tasks = new SessionTasks();
    const shown = tasks.created('a', 'mine', 1_000);
    expect(shownParams('notifications/tasks/status', { taskId: 'mine', status: 'working' }, 'a', tasks)).toEqual({ taskId: shown, status: 'working' });
    expect(shownParams('notifications/tasks/status', { taskId: 'mine' }, 'b', tasks)).toBe(HIDDEN);
    expect(shownParams('notifications/tasks', { taskId: 'theirs' }, 'a', tasks)).toBe(HIDDEN);
    expect(shownParams('elicitation/create', { message: 'm', _meta: { [RELATED_TASK]: { taskId: 'theirs' }, other: 1 } }, 'a', tasks)).toEqual({ message: 'm', _meta: { other: 1 } });
    expect(shownParams('elicitation/create', { _meta: { [RELATED_TASK]: { taskId: 'mine' } } }, 'a', tasks)).toEqual({ _meta: { [RELATED_TASK]: { taskId: shown } } });
  });
});
