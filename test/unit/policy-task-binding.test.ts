// The pieces of task and event-id binding (task-binding.ts): the substitute of a foreign task id,
// the answer reader (JSON and event streams cut anywhere), and the SSE splitter under it.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { boundAnswers, eventIdOf, type BoundAnswersOptions } from '../../src/policy/bound-answers.js';
import { parseJsonRpcBody } from '../../src/policy/json-rpc.js';
import { SseEventSplitter } from '../../src/policy/sse-events.js';
import { taskRequestsOf } from '../../src/policy/task-requests.js';
import { createTaskBinding, type BoundRequest } from '../../src/policy/task-binding.js';
import { restoreTaskIds, substituteTaskId, substituteTasks } from '../../src/policy/task-substitution.js';
import type { AuthContext } from '../../src/auth/principal.js';
import { createOwnedIds, type OwnedIds } from '../../src/policy/owned-ids.js';
import { createTaskOwnership, MAX_LISTED_TASKS, type TaskOwnership } from '../../src/policy/task-ownership.js';
import { principalKey } from '../../src/auth/principal.js';
import { eventIdOwnerKey, hashKeyPart, principalTasksKey } from '../../src/store/key-names.js';
import { memoryClassBudget } from '../../src/store/memory-class-budgets.js';
import { MemoryStore } from '../../src/store/memory-store.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

describe('the substitute of a task id the caller does not own', () => {
  it('property: keeps the shape of a UUID or a long hex id, never equals it', () => {
    fc.assert(
      fc.property(fc.oneof(fc.uuid(), fc.stringMatching(/^[0-9a-f]{32}$/), fc.stringMatching(/^[0-9A-F]{40}$/)), (taskId) => {
        const substitute = substituteTaskId(taskId);
        expect(substitute).not.toBe(taskId);
        expect(substitute.length).toBe(taskId.length);
        for (let i = 0; i < taskId.length; i++) expect(/[0-9a-fA-F]/.test(substitute[i]!)).toBe(/[0-9a-fA-F]/.test(taskId[i]!));
        if (UUID.test(taskId.toLowerCase())) expect(substitute.toLowerCase()).toMatch(/^[0-9a-f-]{36}$/);
      }),
    );
  });

  it('property: an id too small to hide a random one (task-1, 42, …) becomes a random UUID', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z0-9-]{1,12}$/), (taskId) => {
        expect(substituteTaskId(taskId)).toMatch(UUID);
      }),
    );
  });

  it('property: the forwarded body differs only in the foreign taskId, and an echo of the substitute comes back as the original', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }), fc.boolean(), (taskId, batch) => {
        const messages = [
          { jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId } },
          { jsonrpc: '2.0', id: 2, method: 'tasks/result', params: { taskId: 'mine' } },
        ];
        const request = { batch, messages: batch ? messages : messages.slice(0, 1) };
        const asks = taskRequestsOf(request)!;
        const { body, restore } = substituteTasks(request, [asks.named[0]!.message]);
        const sent = JSON.parse(body.toString('utf8')) as typeof messages | (typeof messages)[0];
        const first = Array.isArray(sent) ? sent[0]! : sent;
        const substitute = first.params.taskId;
        expect(substitute).not.toBe(taskId);
        expect(restore.get(substitute)).toBe(taskId);
        if (Array.isArray(sent)) expect(sent[1]).toEqual(messages[1]);
        expect({ ...first, params: { taskId } }).toEqual(messages[0]);
        // The parsed request is left as the client sent it (the audit and policy read it).
        expect(messages[0]!.params.taskId).toBe(taskId);
        const upstreamError = JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: `Task not found: ${substitute}`, data: { taskId: substitute } } });
        const expected = JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: `Task not found: ${taskId}`, data: { taskId } } });
        expect(restoreTaskIds(upstreamError, restore)).toBe(expected);
      }),
    );
  });

  it('names every tasks/* method with a taskId of any JSON type (2026-07-28 tasks/update too; an upstream may coerce 7 to "7"), lists, and tools/call as a possible creator', () => {
    const request = parseJsonRpcBody(
      Buffer.from(
        JSON.stringify([
          { jsonrpc: '2.0', id: 1, method: 'tasks/update', params: { taskId: 't1', inputResponses: {} } },
          { jsonrpc: '2.0', id: 2, method: 'tasks/cancel', params: { taskId: 7 } },
          { jsonrpc: '2.0', id: 3, method: 'tasks/list', params: {} },
          { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'x' } },
        ]),
      ),
    );
    const asks = taskRequestsOf(request)!;
    expect(asks.named.map((n) => n.taskId)).toEqual(['t1', 7]);
    expect(asks.lists).toBe(true);
    expect(asks.mayCreate).toBe(true);
    expect(taskRequestsOf(parseJsonRpcBody(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping"}')))).toBeUndefined();
    expect(() => taskRequestsOf(parseJsonRpcBody(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"a","TaskId":"b"}}')))).toThrow(/one way only/);
  });
});

/** Runs a transform over `body` cut into `cuts` pieces; what it passes on, or the error it cut with. */
function run(options: Omit<BoundAnswersOptions, 'maxBytes'>, contentType: string, body: string, cuts: number[] = []): string | Error {
  const transform = boundAnswers({ maxBytes: 1 << 20, ...options })({ 'content-type': contentType });
  if (!transform) return body;
  const bytes = Buffer.from(body, 'utf8');
  const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  try {
    let at = 0;
    for (const point of [...points, bytes.length]) {
      out.push(transform.push(bytes.subarray(at, point)));
      at = point;
    }
    out.push(transform.end());
  } catch (err) {
    return err as Error;
  }
  return Buffer.concat(out).toString('utf8');
}

const sseOf = (messages: { id?: string; message: unknown }[]) => messages.map(({ id, message }) => `${id === undefined ? '' : `id: ${id}\n`}data: ${JSON.stringify(message)}\n\n`).join('');

describe('the answer reader', () => {
  const taskArb = fc.record({ taskId: fc.string({ minLength: 1, maxLength: 12 }), own: fc.boolean() });

  it('property: a tasks/list answer keeps exactly the caller\'s own tasks, in JSON and in an event stream cut anywhere', () => {
    fc.assert(
      fc.property(fc.uniqueArray(taskArb, { selector: (t) => t.taskId, maxLength: 12 }), fc.array(fc.nat(), { maxLength: 6 }), fc.boolean(), (tasks, cuts, asSse) => {
        const ownIds = new Set(tasks.filter((t) => t.own).map((t) => hashKeyPart(t.taskId)));
        const answer = { jsonrpc: '2.0', id: 1, result: { tasks: tasks.map(({ taskId }) => ({ taskId, status: 'working' })), nextCursor: 'c' } };
        const out = asSse ? run({ ownIds }, 'text/event-stream', sseOf([{ id: 'e1', message: answer }]), cuts) : run({ ownIds }, 'application/json', JSON.stringify(answer), cuts);
        expect(out).not.toBeInstanceOf(Error);
        const data = asSse ? (out as string).split('\n').find((l) => l.startsWith('data: '))!.slice(6) : (out as string);
        const kept = (JSON.parse(data) as typeof answer).result;
        expect(kept.tasks.map((t) => t.taskId)).toEqual(tasks.filter((t) => t.own).map((t) => t.taskId));
        expect(kept.nextCursor).toBe('c');
      }),
    );
  });

  it('property: an event stream cut anywhere records every task it creates (both revisions) and every event id it passes; a task notification passes only for a task created on it or the caller\'s own', () => {
    const eventArb = fc.oneof(
      fc.record({ kind: fc.constant('nested' as const), taskId: fc.constantFrom('a', 'b', 'c', 'd') }),
      fc.record({ kind: fc.constant('flat' as const), taskId: fc.constantFrom('a', 'b', 'c', 'd') }),
      fc.record({ kind: fc.constant('notified' as const), taskId: fc.constantFrom('a', 'b', 'c', 'd', 'own') }),
      fc.record({ kind: fc.constant('other' as const), taskId: fc.constant('') }),
    );
    fc.assert(
      fc.property(fc.array(eventArb, { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 8 }), (events, cuts) => {
        const messages = events.map((e, i) => {
          const id = `ev-${i}`;
          if (e.kind === 'nested') return { id, message: { jsonrpc: '2.0', id: i, result: { task: { taskId: e.taskId, ttl: 5000 } } } };
          if (e.kind === 'flat') return { id, message: { jsonrpc: '2.0', id: i, result: { resultType: 'task', taskId: e.taskId, ttlMs: 5000 } } };
          if (e.kind === 'notified') return { id, message: { jsonrpc: '2.0', method: i % 2 ? 'notifications/tasks' : 'notifications/tasks/status', params: { taskId: e.taskId } } };
          return { id, message: { jsonrpc: '2.0', method: 'notifications/message', params: { data: 'x' } } };
        });
        // What the caller may see: a notification of a task created earlier on this stream, or of its own.
        const created = new Set<string>();
        const shown = messages.filter((m, i) => {
          const e = events[i]!;
          if (e.kind === 'nested' || e.kind === 'flat') created.add(e.taskId);
          return e.kind !== 'notified' || created.has(e.taskId) || e.taskId === 'own';
        });
        const tasks: string[] = [];
        const ids: string[] = [];
        const options = { ownIds: new Set([hashKeyPart('own')]), task: (taskId: string, ttl: unknown) => void tasks.push(`${taskId}/${String(ttl)}`), eventId: (id: string) => void ids.push(id) };
        const out = run(options, 'text/event-stream', sseOf(messages), cuts);
        expect(out).toBe(sseOf(shown));
        expect(ids).toEqual(shown.map((m) => m.id));
        expect(tasks).toEqual(events.filter((e) => e.kind === 'nested' || e.kind === 'flat').map((e) => `${e.taskId}/5000`));
      }),
    );
  });

  it('a JSON answer only read for tasks passes unchanged, records its task, and records nothing when it cannot be read one way only', () => {
    const tasks: string[] = [];
    const task = (taskId: string) => void tasks.push(taskId);
    const good = JSON.stringify({ jsonrpc: '2.0', id: 1, result: { task: { taskId: 'T' } } });
    expect(run({ task, readJson: true }, 'application/json', good, [3, 9])).toBe(good);
    const ambiguous = '{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"A","taskId":"B"}}}';
    expect(run({ task, readJson: true }, 'application/json', ambiguous)).toBe(ambiguous);
    expect(tasks).toEqual(['T']);
    // Not asked to read JSON (no request that may create a task): not even a reader.
    expect(boundAnswers({ maxBytes: 10, task })({ 'content-type': 'application/json' })).toBeUndefined();
  });

  it('a task list that cannot be read one way only, or arrives compressed, is cut, never passed unread', () => {
    const ownIds = new Set<string>();
    expect(run({ ownIds }, 'application/json', '{"jsonrpc":"2.0","id":1,"result":{"tasks":[],"Tasks":[{"taskId":"x"}]}}')).toBeInstanceOf(Error);
    expect(run({ ownIds }, 'text/event-stream', 'data: {"result":{"tasks":[{"taskId":"a","taskId":"b"}]}}\n\n')).toBeInstanceOf(Error);
    const gz = boundAnswers({ maxBytes: 10, ownIds })({ 'content-type': 'application/json', 'content-encoding': 'gzip' })!;
    expect(() => gz.push(Buffer.from('x'))).toThrow(/gzip/);
  });

  it('an error answer (any status) gets a substituted id back, and is read for nothing else', () => {
    const restore = new Map([['sub-123', 'orig"1']]);
    const error = JSON.stringify({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'Task not found: sub-123' } });
    const transform = boundAnswers({ maxBytes: 1 << 20, restore, task: () => expect.unreachable() })({ 'content-type': 'application/json' }, 400)!;
    const out = Buffer.concat([transform.push(Buffer.from(error)), transform.end()]).toString('utf8');
    expect(JSON.parse(out)).toEqual({ jsonrpc: '2.0', id: 1, error: { code: -32602, message: 'Task not found: orig"1' } });
    expect(boundAnswers({ maxBytes: 10, ownIds: new Set(), eventId: () => undefined })({ 'content-type': 'text/event-stream' }, 404)).toBeUndefined();
  });

  it('takes the event id a client would send back: the last id field, none when empty or holding NUL', () => {
    expect(eventIdOf(['id: a', 'event: x', 'id:b'])).toBe('b');
    expect(eventIdOf(['id'])).toBeUndefined();
    expect(eventIdOf(['id: a', 'id: x\0y'])).toBe('a');
    expect(eventIdOf(['event: message'])).toBeUndefined();
  });
});

describe('the SSE splitter', () => {
  it('property: any cut of a stream gives the same events as the whole, and an event held across many chunks is joined once', () => {
    const eventText = fc.array(fc.stringMatching(/^[a-z: ]{0,30}$/), { minLength: 1, maxLength: 4 }).map((lines) => `${lines.map((l) => `data: ${l}`).join('\n')}\n\n`);
    fc.assert(
      fc.property(fc.array(eventText, { maxLength: 8 }), fc.array(fc.nat(), { maxLength: 30 }), (events, cuts) => {
        const bytes = Buffer.from(events.join(''), 'utf8');
        const splitter = new SseEventSplitter(1 << 20);
        const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
        const got: string[] = [];
        let at = 0;
        for (const point of [...points, bytes.length]) {
          got.push(...splitter.push(bytes.subarray(at, point)).map((b) => b.toString('utf8')));
          at = point;
        }
        expect(got).toEqual(events);
        expect(splitter.rest().length).toBe(0);
      }),
    );
  });

  // The one difference a cut may make: the LF of a CRLF cut after its CR travels with the next piece (no parser sees it).
  const normalised = (pieces: string[]) => pieces.map((p) => p.replace(/^[\r\n]+|[\r\n]+$/g, '')).filter((p) => p !== '');
  it('property: any bytes (CR, LF, CRLF, comments, fields) split into the same events whole or cut anywhere, and lose or add nothing', () => {
    const unit = fc.constantFrom('a', 'd', ':', ' ', '\r', '\n', '\r\n', 'data: x', ': ka\n');
    fc.assert(
      fc.property(fc.array(unit, { maxLength: 60 }), fc.array(fc.nat(), { maxLength: 20 }), (units, cuts) => {
        const bytes = Buffer.from(units.join(''), 'utf8');
        const whole = new SseEventSplitter(1 << 20);
        const expected = [...whole.push(bytes).map((b) => b.toString('latin1')), whole.rest().toString('latin1')];
        const splitter = new SseEventSplitter(1 << 20);
        const points = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
        const got: string[] = [];
        let at = 0;
        for (const point of [...points, bytes.length]) {
          got.push(...splitter.push(bytes.subarray(at, point)).map((b) => b.toString('latin1')));
          at = point;
        }
        got.push(splitter.rest().toString('latin1'));
        expect(normalised(got)).toEqual(normalised(expected));
        expect(got.join('')).toBe(bytes.toString('latin1'));
      }),
      { numRuns: 500 },
    );
  });

  it('an event that outgrows the bound is refused, whatever the chunk size', () => {
    const splitter = new SseEventSplitter(1000);
    expect(() => {
      for (let i = 0; i < 200; i++) splitter.push(Buffer.from('data: xxxxxxxx'));
    }).toThrow(/exceeds 1000 bytes/);
  });
});

describe('the records of tasks and event ids in the memory store', () => {
  const alice = { issuer: 'https://iss', subject: 'alice', clientId: 'app' } as AuthContext;
  const mallory = { issuer: 'https://iss', subject: 'mallory', clientId: 'app' } as AuthContext;

  it('property: a principal flooding task or event-id records loses only its own oldest; another principal\'s stay hers', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 20, max: 200 }), fc.integer({ min: 1, max: 400 }), fc.constantFrom('task', 'event'), async (maxEntries, flood, kind) => {
        const store = new MemoryStore({ maxEntries });
        const route = '/r/mcp';
        const ids = kind === 'task' ? createTaskOwnership(store, route) : createOwnedIds(store, (id) => eventIdOwnerKey(route, id), 'x');
        const record = (id: string, who: AuthContext) => (kind === 'task' ? (ids as TaskOwnership).record(id, who, 60_000) : (ids as OwnedIds).record(id, who, 60_000));
        const share = memoryClassBudget(kind === 'task' ? 'task' : 'event-id', maxEntries).perOwner!;
        for (let i = 0; i < Math.min(share, 5); i++) await record(`alice-${i}`, alice);
        for (let i = 0; i < flood; i++) await record(`mallory-${i}`, mallory);
        for (let i = 0; i < Math.min(share, 5); i++) expect(await ids.owns(`alice-${i}`, alice)).toBe(true);
        // Mallory keeps her newest `share`; her oldest are nobody's now (refused to her too: fail closed).
        expect(await ids.owns(`mallory-${flood - 1}`, mallory)).toBe(true);
        if (flood > share) expect(await ids.owns('mallory-0', mallory)).toBe(false);
        // An id recorded as alice's stays hers when an upstream hands it to mallory too.
        await record('alice-0', mallory);
        expect(await ids.owns('alice-0', mallory)).toBe(false);
      }),
      { numRuns: 40 },
    );
  });

  it("a principal's tasks/list share is bounded: past MAX_LISTED_TASKS a task is still its own but not listed", async () => {
    const store = new MemoryStore({ maxEntries: 100_000 });
    const tasks = createTaskOwnership(store, '/r/mcp');
    for (let i = 0; i < MAX_LISTED_TASKS + 5; i++) await tasks.record(`t-${i}`, alice, 60_000);
    const log = await store.readLog(principalTasksKey('/r/mcp', principalKey(alice)), 0);
    expect(log.length).toBe(MAX_LISTED_TASKS);
    expect((await tasks.ownIds(alice)).has(hashKeyPart('t-0'))).toBe(true);
    expect(await tasks.owns(`t-${MAX_LISTED_TASKS + 4}`, alice)).toBe(true);
    expect((await tasks.ownIds(mallory)).has(hashKeyPart('t-0'))).toBe(false);
  });

  it('a task this replica records after a stream opened counts as the caller\'s on that stream', async () => {
    const tasks = createTaskOwnership(new MemoryStore({ maxEntries: 1000 }), '/r/mcp');
    const own = await tasks.ownIds(alice);
    expect(own.has(hashKeyPart('later'))).toBe(false);
    await tasks.record('later', alice, 60_000);
    expect(own.has(hashKeyPart('later'))).toBe(true);
    expect((await tasks.ownIds(mallory)).has(hashKeyPart('later'))).toBe(false);
  });
});

describe('the answer reader of a request naming no task, made once per principal (createTaskBinding)', () => {
  const principals = ['alice', 'bob', 'carol'].map((subject) => Object.freeze({ issuer: 'https://iss', subject, clientId: 'app', scopes: [], expiresAt: 0, claims: {}, token: '', tokenHash: '' }) as AuthContext);
  const call = (id: number) => parseJsonRpcBody(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 't', arguments: {} } })));
  const ping = parseJsonRpcBody(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' })));

  it('property: whichever principals interleave and however often each calls, every task an answer creates is recorded as the caller\'s of that request, and never as another\'s', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.nat({ max: principals.length - 1 }), { minLength: 1, maxLength: 30 }), async (callers) => {
        const route = '/r/mcp';
        const store = new MemoryStore({ maxEntries: 10_000 });
        const binding = createTaskBinding(route, store);
        const readers = new Map<AuthContext, unknown>();
        for (const [i, who] of callers.entries()) {
          const auth = principals[who]!;
          const bound = binding.forPost(call(i), {}, auth) as BoundRequest;
          // Synchronous, and one reader per principal however many requests it sends.
          expect(bound).not.toBeInstanceOf(Promise);
          if (readers.has(auth)) expect(bound.transform).toBe(readers.get(auth));
          readers.set(auth, bound.transform);
          const answer = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: i, result: { task: { taskId: `task-${i}` } } }));
          const reader = bound.transform!({ 'content-type': 'application/json' }, 200)!;
          expect(Buffer.concat([reader.push(answer), reader.end()]).equals(answer)).toBe(true);
        }
        // A request that cannot create a task gets no JSON reader, and another object than the one that can.
        const plain = binding.forPost(ping, {}, principals[0]!) as BoundRequest;
        expect(plain.transform!({ 'content-type': 'application/json' }, 200)).toBeUndefined();
        await new Promise((resolve) => setImmediate(resolve));
        const ownership = createTaskOwnership(store, route);
        for (const [i, who] of callers.entries()) {
          for (const [p, auth] of principals.entries()) expect(await ownership.owns(`task-${i}`, auth)).toBe(p === who);
        }
      }),
      { numRuns: 40 },
    );
  });
});
