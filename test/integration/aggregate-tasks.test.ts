/**
 * MCP tasks through an aggregated route (DESIGN §8.2, §8.3; issue 22; docs/aggregation.md
 * "Tasks"), with real task-capable servers behind one route:
 * - `everything`: the unmodified server-everything (2025-11-25 tasks, one task store per session:
 *   `simulate-research-query` must run as a task), over Streamable HTTP;
 * - `shared`: a stateless server of the TS SDK with one task store for every request, so its
 *   tasks/list lists every principal's tasks and it serves any id to anyone (behind a recording
 *   hop, to see what it is sent);
 * - `v2`: the stateless 2026-07-28 server with the tasks extension (test/helpers/stateless-task-server.ts).
 * TS SDK clients create tasks, poll them, are told their status and take their results through the
 * route under ids of the gateway's own, which reach each upstream as its own; another principal's
 * task id is answered as the upstream answers an id it does not know, and tasks/list shows each
 * principal its own tasks only; a 2026-07-28 client without a session does the same with `v2`.
 */
import type { Server } from 'node:http';
import { CallToolResultSchema, CreateTaskResultSchema, TaskStatusNotificationSchema, type Task } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer } from '../helpers/net.js';
import { startSharedTaskServer } from '../helpers/shared-task-server.js';
import { startStatelessTaskServer, type StatelessTaskServer } from '../helpers/stateless-task-server.js';
import { connectClient, resultText, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';
import { post2026 } from '../helpers/wire-2026.js';

const ROUTE = '/tasks/mcp';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

let everything: UpstreamHandle;
let shared: Server;
let hop: RecordingHop;
let v2: StatelessTaskServer;
let stage: StdioStage;

beforeAll(async () => {
  [everything, shared, v2] = await Promise.all([startEverythingServer(), startSharedTaskServer(), startStatelessTaskServer()]);
  hop = await startRecordingHop(`http://127.0.0.1:${(shared.address() as { port: number }).port}/mcp`);
  stage = await startStdioStage({ [ROUTE]: { upstreams: { everything: { upstream: everything.url }, shared: { upstream: hop.url }, v2: { upstream: v2.url } } } });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([everything?.close(), hop?.close(), shared && closeServer(shared), v2?.close()]);
});

const connect = async (sub: string) => connectClient(stage.url(ROUTE), await stage.token(ROUTE, sub));
/** What the shared upstream was asked by tasks/* requests: method and `params.taskId`. */
const sharedAsked = (from = 0) =>
  hop.requests
    .slice(from)
    .filter((r) => r.method === 'POST' && r.body.length > 0)
    .map((r) => JSON.parse(r.body.toString('utf8')) as { method?: string; params?: { taskId?: string } })
    .filter((m) => m.method?.startsWith('tasks/'))
    .map((m) => ({ method: m.method, taskId: m.params?.taskId }));
/** A task's creation through the route: the CreateTaskResult's task. */
async function createTask(client: Awaited<ReturnType<typeof connect>>['client'], name: string, args: Record<string, unknown>): Promise<Task> {
  return (await client.request({ method: 'tools/call', params: { name, arguments: args } }, CreateTaskResultSchema, { task: { ttl: 60_000 } })).task;
}
/** The error of a request as the client sees it (code and message), with `id` written as `<id>`. */
async function refusal(promise: Promise<unknown>, id: string): Promise<string> {
  const err = (await promise.then(
    () => undefined,
    (e: unknown) => e,
  )) as { code?: number; message?: string } | undefined;
  expect(err, 'the request must be refused').toBeDefined();
  return `${err!.code}: ${String(err!.message).split(id).join('<id>')}`;
}

describe('MCP tasks through an aggregated route', () => {
  it("a task of server-everything: created, told, polled and its result taken under an id of the gateway's, which reaches server-everything as its own", async () => {
    const { client, transport } = await connect('alice');
    const initialized = client.getServerCapabilities();
    expect(initialized?.tasks).toEqual({ list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const statuses: Task[] = [];
    client.setNotificationHandler(TaskStatusNotificationSchema, (n) => void statuses.push(n.params as Task));
    const stream = client.experimental.tasks.callToolStream({ name: 'everything__simulate-research-query', arguments: { topic: 'gateways' } }, CallToolResultSchema, { task: { ttl: 60_000 } });
    let taskId: string | undefined;
    let result: unknown;
    for await (const message of stream) {
      if (message.type === 'taskCreated') taskId = message.task.taskId;
      if (message.type === 'result') result = message.result;
      if (message.type === 'error') throw message.error;
    }
    // The gateway's id (a UUID), not server-everything's (32 hex digits).
    expect(taskId).toMatch(UUID);
    expect(resultText(result)).toContain('Research Report: gateways');
    expect((result as { _meta?: Record<string, { taskId?: string }> })._meta?.['io.modelcontextprotocol/related-task']?.taskId).toBe(taskId);
    // server-everything told its status as it went (on its GET stream): each under the client's id.
    await waitFor(() => statuses.some((s) => s.status === 'completed'), 10_000, 'the completed status');
    expect(new Set(statuses.map((s) => s.taskId))).toEqual(new Set([taskId]));
    const polled = await client.experimental.tasks.getTask(taskId!);
    expect(polled).toMatchObject({ taskId, status: 'completed' });
    const listed = await client.experimental.tasks.listTasks();
    expect(listed.tasks.map((t) => t.taskId)).toContain(taskId);
    await transport.terminateSession();
    await client.close();
  }, 60_000);

  it("two principals on an upstream with one task store: each reaches and lists its own tasks only; another's id is refused as an unknown one, and the upstream is never sent it", async () => {
    const alice = await connect('alice');
    const bob = await connect('bob');
    const aliceTask = await createTask(alice.client, 'shared__research', { topic: 'alice', finish: false });
    const bobTask = await createTask(bob.client, 'shared__research', { topic: 'bob' });
    expect(aliceTask.taskId).toMatch(UUID);
    expect(bobTask.taskId).not.toBe(aliceTask.taskId);
    // Alice's own tasks/get reaches the upstream with the upstream's own id (not the one she was shown).
    expect(await alice.client.experimental.tasks.getTask(aliceTask.taskId)).toMatchObject({ taskId: aliceTask.taskId, status: 'working' });
    const upstreamId = sharedAsked().at(-1)!.taskId!;
    expect(upstreamId).not.toBe(aliceTask.taskId);
    // Bob naming Alice's task: the answer of an id nobody has, word for word (the first upstream serving tasks answers both).
    const beforeBob = hop.requests.length;
    const made = '6f1c2a8e-93b4-4d07-a5e1-0c9d8b7a6f54';
    const unknown = await refusal(bob.client.experimental.tasks.getTask(made), made);
    expect(await refusal(bob.client.experimental.tasks.getTask(aliceTask.taskId), aliceTask.taskId)).toBe(unknown);
    expect(await refusal(bob.client.experimental.tasks.getTaskResult(aliceTask.taskId, CallToolResultSchema), aliceTask.taskId)).toBe(await refusal(bob.client.experimental.tasks.getTaskResult(made, CallToolResultSchema), made));
    expect(await refusal(bob.client.experimental.tasks.cancelTask(aliceTask.taskId), aliceTask.taskId)).toBe(await refusal(bob.client.experimental.tasks.cancelTask(made), made));
    // The upstream holding her task was never sent her ids for Bob, neither its own nor the one she was shown; nothing of hers changed.
    const bobAsked = sharedAsked(beforeBob).map((a) => a.taskId);
    expect(bobAsked).not.toContain(upstreamId);
    expect(bobAsked).not.toContain(aliceTask.taskId);
    expect(await alice.client.experimental.tasks.getTask(aliceTask.taskId)).toMatchObject({ status: 'working' });
    // The upstream lists both principals' tasks; each principal is shown its own.
    const bobList = await bob.client.experimental.tasks.listTasks();
    expect(bobList.tasks.map((t) => t.taskId)).toEqual([bobTask.taskId]);
    const aliceList = await alice.client.experimental.tasks.listTasks();
    expect(aliceList.tasks.map((t) => t.taskId)).toEqual([aliceTask.taskId]);
    // Her cancel works, under her id.
    expect(await alice.client.experimental.tasks.cancelTask(aliceTask.taskId)).toMatchObject({ taskId: aliceTask.taskId, status: 'cancelled' });
    expect(resultText(await bob.client.experimental.tasks.getTaskResult(bobTask.taskId, CallToolResultSchema))).toBe('findings on bob');
    for (const { client, transport } of [alice, bob]) {
      await transport.terminateSession();
      await client.close();
    }
  }, 60_000);

  it('a 2026-07-28 client without a session: a task of the v2 upstream under an id of the gateway\'s; another principal\'s id answered as an unknown one; tasks/list and tasks/result are not of its revision', async () => {
    const audience = stage.gw.config.routes.find((r) => r.path === ROUTE)!.resource;
    const [alice, bob] = await Promise.all(['alice', 'bob'].map((sub) => stage.issuer.token({ audience, sub })));
    const capabilities = { extensions: { [TASKS_EXTENSION]: {} } };
    const ask = async (token: string, method: string, params: Record<string, unknown>) => {
      const name = typeof params.taskId === 'string' ? { 'mcp-name': params.taskId } : {};
      const res = await post2026(stage.url(ROUTE), method, params, { token, capabilities, headers: name });
      return { status: res.status, body: (await res.json()) as { result?: Record<string, unknown>; error?: { code: number; message: string } } };
    };
    const created = await ask(alice!, 'tools/call', { name: 'v2__slow_compute', arguments: { seconds: 1, label: 'x' } });
    expect(created.body.result).toMatchObject({ resultType: 'task', status: 'working' });
    const taskId = created.body.result!.taskId as string;
    expect(taskId).toMatch(UUID);
    const got = await ask(alice!, 'tasks/get', { taskId });
    expect(got.body.result).toMatchObject({ taskId, resultType: 'complete' });
    // v2 was asked with its own id, in the body and in Mcp-Name alike.
    const asked = v2.named.at(-1)!;
    expect(asked.taskId).not.toBe(taskId);
    expect(asked.mcpName).toBe(asked.taskId);
    await waitFor(async () => (await ask(alice!, 'tasks/get', { taskId })).body.result?.status === 'completed', 10_000, 'the task completed');
    const made = '0b7e3c51-2f6d-4a98-9c1e-7d5a4b3c2e10';
    const unknown = await ask(bob!, 'tasks/get', { taskId: made });
    const foreign = await ask(bob!, 'tasks/get', { taskId });
    expect(unknown.body.error?.code).toBe(-32602);
    expect({ status: foreign.status, code: foreign.body.error?.code, message: foreign.body.error?.message.split(taskId).join('<id>') }).toEqual({ status: unknown.status, code: unknown.body.error?.code, message: unknown.body.error?.message.split(made).join('<id>') });
    expect(v2.named.map((n) => n.taskId)).not.toContain(taskId);
    for (const method of ['tasks/list', 'tasks/result']) expect((await ask(alice!, method, method === 'tasks/list' ? {} : { taskId })).body.error?.code).toBe(-32601);
  }, 60_000);
});
