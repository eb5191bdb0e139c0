// MCP tasks bound to principals (task-ownership.ts, tasks-answer.ts,
// task-requests.ts): the store record, the answer reader over JSON and event
// streams cut anywhere, and what a request asks of tasks. The real memory store;
// the end-to-end case with a real SDK server is test/security/k-review-tasks.test.ts.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import { parseJsonRpcBody } from '../../src/policy/json-rpc.js';
import { DEFAULT_TASK_TTL_MS, MAX_TASK_TTL_MS, createTaskOwnership, taskTtlMs } from '../../src/policy/task-ownership.js';
import { TaskNotFoundError, taskRequestsOf } from '../../src/policy/task-requests.js';
import { tasksAnswer, type TasksAnswerOptions } from '../../src/policy/tasks-answer.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { hashKeyPart } from '../../src/store/key-names.js';
import { MemoryStore } from '../../src/store/memory-store.js';

const principal = (subject: string): AuthContext => ({
  issuer: 'https://as.example', subject, clientId: 'app', scopes: [], expiresAt: 0, claims: {}, token: `t-${subject}`, tokenHash: `h-${subject}`,
});
const alice = principal('alice');
const bob = principal('bob');

/** The body the reader passes on for `body` split at `cuts`, or the error it cut the answer with. */
function through(options: TasksAnswerOptions, contentType: string, body: string, cuts: number[] = []): string {
  const reader = tasksAnswer(options)({ 'content-type': contentType })!;
  const bytes = Buffer.from(body);
  const points = [0, ...[...cuts].sort((a, b) => a - b), bytes.length];
  const out: Buffer[] = [];
  for (let i = 0; i + 1 < points.length; i++) out.push(reader.push(bytes.subarray(points[i], points[i + 1])));
  out.push(reader.end());
  return Buffer.concat(out).toString('utf8');
}

const listAnswer = (ids: string[]) => JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tasks: ids.map((taskId) => ({ taskId, status: 'working' })) } });
const sse = (json: string) => `event: message\ndata: ${json}\n\n`;

describe('task ownership in the store', () => {
  it('a recorded task is its creator\'s only; an unknown one is no one\'s', async () => {
    const tasks = createTaskOwnership(new MemoryStore({ maxEntries: 100 }));
    await tasks.record('/r', 't1', alice, 60_000);
    expect(await tasks.owns('/r', 't1', alice)).toBe(true);
    expect(await tasks.owns('/r', 't1', bob)).toBe(false);
    expect(await tasks.owns('/r', 't2', alice)).toBe(false);
    expect(await tasks.owns('/other', 't1', alice)).toBe(false);
    expect(await tasks.ownIds('/r', alice)).toEqual(new Set([hashKeyPart('t1')]));
    expect(await tasks.ownIds('/r', bob)).toEqual(new Set());
  });

  it('an id answered to a second principal stays the first one\'s and is not listed for the second', async () => {
    const tasks = createTaskOwnership(new MemoryStore({ maxEntries: 100 }));
    await tasks.record('/r', 't1', alice, undefined);
    await tasks.record('/r', 't1', bob, undefined);
    expect(await tasks.owns('/r', 't1', bob)).toBe(false);
    expect(await tasks.ownIds('/r', bob)).toEqual(new Set());
  });

  it('a record lives as the task\'s ttl says, capped at 24 h, 1 h without one', () => {
    expect(taskTtlMs(60_000)).toBe(60_000);
    expect(taskTtlMs(MAX_TASK_TTL_MS * 10)).toBe(MAX_TASK_TTL_MS);
    for (const odd of [undefined, null, 0, -5, 1.5, '60000', Number.MAX_VALUE]) expect(taskTtlMs(odd)).toBe(DEFAULT_TASK_TTL_MS);
  });

  it('property: over random records by several principals, owns() is true exactly for the first recorder', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.constantFrom('alice', 'bob', 'carol'), fc.string({ minLength: 1, maxLength: 8 })), { maxLength: 20 }), async (writes) => {
        const tasks = createTaskOwnership(new MemoryStore({ maxEntries: 1000 }));
        const first = new Map<string, string>();
        for (const [who, id] of writes) {
          await tasks.record('/r', id, principal(who), 60_000);
          if (!first.has(id)) first.set(id, who);
        }
        for (const [, id] of writes) {
          for (const who of ['alice', 'bob', 'carol']) expect(await tasks.owns('/r', id, principal(who))).toBe(first.get(id) === who);
        }
      }),
      { numRuns: 100 },
    );
  });
});

describe('the answer reader', () => {
  it('tells each created task with its ttl, JSON and event stream, batch included', () => {
    const seen: [string, unknown][] = [];
    const created = (id: string, ttl: unknown) => void seen.push([id, ttl]);
    const one = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { task: { taskId: 'a1', status: 'working', ttl: 5000 } } });
    expect(through({ created, maxBytes: 1 << 20 }, 'application/json', one)).toBe(one);
    const batch = `[${one},${JSON.stringify({ jsonrpc: '2.0', id: 2, result: { task: { taskId: 'a2' } } })}]`;
    expect(through({ created, maxBytes: 1 << 20 }, 'text/event-stream', sse(batch), [7, 30])).toBe(sse(batch));
    expect(seen).toEqual([['a1', 5000], ['a1', 5000], ['a2', undefined]]);
  });

  it('cuts an answer another reader could read otherwise: a duplicate member, TaskId beside taskId, Task beside task', () => {
    const created = () => undefined;
    for (const body of [
      '{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"a"},"task":{"taskId":"b"}}}',
      '{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"a","TaskId":"b"}}}',
      '{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"a"},"Task":{"taskId":"b"}}}',
    ]) expect(() => through({ created, maxBytes: 1 << 20 }, 'application/json', body)).toThrow(/one way only/);
    expect(() => through({ created, maxBytes: 10 }, 'application/json', '{"jsonrpc":"2.0","id":1,"result":{}}')).toThrow(/exceeds/);
    expect(tasksAnswer({ created, maxBytes: 10 })({ 'content-type': 'application/json', 'content-encoding': 'gzip' })!.end).toThrow(/gzip/);
  });

  it('property: a task list keeps exactly the caller\'s tasks, in order, however the stream is cut', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(fc.string({ minLength: 1, maxLength: 6 }), fc.boolean()), { selector: ([id]) => id, maxLength: 12 }),
        fc.uniqueArray(fc.nat(), { maxLength: 6 }),
        (tasks, rawCuts) => {
          const ownIds = new Set(tasks.filter(([, mine]) => mine).map(([id]) => hashKeyPart(id)));
          const mine = tasks.filter(([, m]) => m).map(([id]) => id);
          const body = listAnswer(tasks.map(([id]) => id));
          const json = JSON.parse(through({ ownIds, maxBytes: 1 << 20 }, 'application/json', body)) as { result: { tasks: { taskId: string }[] } };
          expect(json.result.tasks.map((t) => t.taskId)).toEqual(mine);
          const stream = sse(body);
          const cuts = rawCuts.map((c) => 1 + (c % (stream.length - 1)));
          const out = through({ ownIds, maxBytes: 1 << 20 }, 'text/event-stream', stream, [...new Set(cuts)]);
          const data = /^data: (.*)$/m.exec(out)![1]!;
          expect((JSON.parse(data) as typeof json).result.tasks.map((t) => t.taskId)).toEqual(mine);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a listed task without a string id is not shown', () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { tasks: [{ status: 'working' }, { taskId: 7 }, { taskId: 'x' }] } });
    const out = JSON.parse(through({ ownIds: new Set([hashKeyPart('x')]), maxBytes: 1 << 20 }, 'application/json', body)) as { result: { tasks: unknown[] } };
    expect(out.result.tasks).toEqual([{ taskId: 'x' }]);
  });
});

describe('what a request asks of tasks', () => {
  const asks = (body: unknown) => taskRequestsOf(parseJsonRpcBody(Buffer.from(JSON.stringify(body))));

  it('nothing for requests that concern no task', () => {
    expect(asks({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x', arguments: { task: 'not a param' } } })).toBeUndefined();
    expect(asks({ jsonrpc: '2.0', id: 1, method: 'ping' })).toBeUndefined();
  });

  it('names, lists and creates, batch id null; a tasks method without a string taskId names undefined', () => {
    expect(asks({ jsonrpc: '2.0', id: 4, method: 'tasks/get', params: { taskId: 'a' } })).toEqual({ named: ['a'], lists: false, creates: false, id: 4 });
    expect(
      asks([
        { jsonrpc: '2.0', id: 1, method: 'tasks/result', params: { taskId: 'a' } },
        { jsonrpc: '2.0', id: 2, method: 'tasks/cancel', params: {} },
        { jsonrpc: '2.0', id: 3, method: 'tasks/list', params: {} },
        { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'x', task: { ttl: 1 } } },
      ]),
    ).toEqual({ named: ['a', undefined], lists: true, creates: true, id: null });
  });

  it('params another reader could read otherwise are a 400', () => {
    const call = () => asks({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: 'mine', TaskId: 'theirs' } });
    expect(call).toThrow(GatewayError);
    expect(call).toThrow(/one way only/);
  });

  it('the refusal is one JSON-RPC answer, 403', () => {
    const err = new TaskNotFoundError(3);
    expect(err.status).toBe(403);
    expect(JSON.parse(err.body())).toEqual({ jsonrpc: '2.0', id: 3, error: { code: -32602, message: 'Task not found' } });
  });
});
