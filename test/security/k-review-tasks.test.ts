/**
 * Review, round 3 — class: cross-principal access to MCP tasks (SEP-1686, MCP 2025-11-25
 * basic/utilities/tasks, "Task isolation and access control"). The gateway binds sessions to
 * principals because an unmodified upstream knows nothing of them (H42); a task outlives the
 * request that created it and is fetched by id with tasks/get, tasks/result, tasks/cancel and
 * listed by tasks/list. An upstream whose task store is not per session (a stateless server, the
 * SDK's InMemoryTaskStore shared by its per-request servers, as its own examples do) hands one
 * principal's task results to another unless the gateway binds tasks too; it does
 * (src/policy/task-binding.ts): a task is its creator's, anyone else naming it gets one refusal.
 * The upstream is the real TypeScript MCP SDK (McpServer, experimental tasks, stateless transport),
 * answering JSON on /mcp and event streams on /mcp-sse, one task store for both.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { closeServer, listen } from '../helpers/net.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';

const PATH = '/tasks/mcp';
const SSE_PATH = '/tasks-sse/mcp';
let issuer: TestIssuer;
let upstream: Server;
let gw: TestGateway;
/** Every JSON-RPC method the upstream was sent, in order: what a refusal must not add to. */
const forwarded: string[] = [];

/** A stateless SDK server: a new McpServer per request, one task store for all (the SDK's stateless pattern); event streams on /mcp-sse. */
async function startTaskServer(): Promise<Server> {
  const taskStore = new InMemoryTaskStore();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      for (const m of [text ? (JSON.parse(text) as unknown) : []].flat() as { method?: string }[]) forwarded.push(String(m.method));
      void (async () => {
        const mcp = new McpServer({ name: 'tasks', version: '1' }, { capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } }, taskStore });
        mcp.experimental.tasks.registerToolTask(
          'research',
          { inputSchema: { topic: z.string() }, execution: { taskSupport: 'optional' } },
          {
            createTask: async ({ topic }, extra) => {
              const task = await extra.taskStore.createTask({ ttl: 60_000 });
              await extra.taskStore.storeTaskResult(task.taskId, 'completed', { content: [{ type: 'text', text: `findings on ${topic}` }] });
              return { task };
            },
            getTask: async (_args, extra) => (await extra.taskStore.getTask(extra.taskId))!,
            getTaskResult: async (_args, extra) => (await extra.taskStore.getTaskResult(extra.taskId)) as never,
          },
        );
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: req.url !== '/mcp-sse' });
        await mcp.connect(transport);
        await transport.handleRequest(req, res, chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined);
      })().catch(() => res.writeHead(500).end());
    });
  });
  await listen(server);
  return server;
}

beforeAll(async () => {
  [issuer, upstream] = await Promise.all([startTestIssuer('ES256'), startTaskServer()]);
  const { port } = upstream.address() as { port: number };
  gw = await startTestGateway({
    'gateway.yaml': gatewayYaml({ log_level: 'warn' }),
    'tasks.yaml': jwtRoute(PATH, `http://127.0.0.1:${port}/mcp`, issuer),
    'tasks-sse.yaml': jwtRoute(SSE_PATH, `http://127.0.0.1:${port}/mcp-sse`, issuer),
  });
}, 60_000);
afterAll(async () => {
  await gw?.stop();
  await issuer?.close();
  if (upstream) await closeServer(upstream);
});

interface Answer {
  status: number;
  contentType: string;
  body: unknown;
}

/** POSTs `payload` as `sub`; an event-stream answer is read as the JSON-RPC message of its (one) `message` event. */
async function post(sub: string, payload: unknown, path = PATH): Promise<Answer> {
  const token = await issuer.mint({ aud: resourceOf(path), sub, client_id: 'app', scope: 'mcp:read' });
  const res = await fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify(payload),
  });
  const contentType = res.headers.get('content-type') ?? '';
  const text = await res.text();
  const data = contentType.startsWith('text/event-stream') ? /^data: ?(.*)$/m.exec(text)?.[1] : text;
  return { status: res.status, contentType, body: data === undefined ? undefined : JSON.parse(data) };
}

async function rpc(sub: string, method: string, params: Record<string, unknown>, path = PATH): Promise<{ status: number; body: Record<string, unknown> }> {
  const { status, body } = await post(sub, { jsonrpc: '2.0', id: 1, method, params }, path);
  return { status, body: body as Record<string, unknown> };
}

/** The one refusal for a task that is not the caller's, unknown or another principal's alike. */
const taskNotFound = (id: number | null) => ({ status: 403, body: { jsonrpc: '2.0', id, error: { code: -32602, message: 'Task not found' } } });

async function createTask(sub: string, topic: string, path = PATH): Promise<string> {
  const created = await rpc(sub, 'tools/call', { name: 'research', arguments: { topic }, task: { ttl: 60_000 } }, path);
  expect(created.status).toBe(200);
  return (created.body.result as { task: { taskId: string } }).task.taskId;
}

let aliceTaskId = '';

describe('[K-tasks] a task belongs to the principal whose request created it', () => {
  it('alice creates a task and reads her own result', async () => {
    const created = await rpc('alice', 'tools/call', { name: 'research', arguments: { topic: 'alice-private-merger' }, task: { ttl: 60_000 } });
    expect(created.status).toBe(200);
    aliceTaskId = ((created.body.result as { task: { taskId: string } }).task).taskId;
    expect(aliceTaskId).toMatch(/^[0-9a-f]{32}$/);
    const own = await rpc('alice', 'tasks/result', { taskId: aliceTaskId });
    expect(JSON.stringify(own.body)).toContain('alice-private-merger');
  });

  it("bob neither lists nor reads alice's task", async () => {
    expect(aliceTaskId).not.toBe('');
    const listed = await rpc('bob', 'tasks/list', {});
    expect(listed.status).toBe(200);
    expect(JSON.stringify(listed.body)).not.toContain(aliceTaskId);
    const read = await rpc('bob', 'tasks/result', { taskId: aliceTaskId });
    expect(JSON.stringify(read.body)).not.toContain('alice-private-merger');
    const got = await rpc('bob', 'tasks/get', { taskId: aliceTaskId });
    expect(JSON.stringify(got.body)).not.toContain('"completed"');
  });

  it("bob's tasks/result, tasks/get and tasks/cancel of alice's task get the one refusal, nothing forwarded; hers still works", async () => {
    const before = forwarded.length;
    for (const method of ['tasks/result', 'tasks/get', 'tasks/cancel']) {
      expect(await rpc('bob', method, { taskId: aliceTaskId })).toEqual(taskNotFound(1));
    }
    expect(forwarded.length).toBe(before);
    const own = await rpc('alice', 'tasks/get', { taskId: aliceTaskId });
    expect(own.status).toBe(200);
    expect((own.body.result as { taskId: string; status: string })).toMatchObject({ taskId: aliceTaskId, status: 'completed' });
  });

  it('an unknown task id, one without a taskId, and one from another route get the same refusal, even for alice', async () => {
    const before = forwarded.length;
    for (const params of [{ taskId: '0'.repeat(32) }, { taskId: 'no-such-task' }, {}, { taskId: 7 }]) {
      expect(await rpc('alice', 'tasks/get', params)).toEqual(taskNotFound(1));
    }
    expect(forwarded.length).toBe(before);
    // Tasks are bound per route: alice's task is unknown on the event-stream route.
    expect(await rpc('alice', 'tasks/result', { taskId: aliceTaskId }, SSE_PATH)).toEqual(taskNotFound(1));
  });

  it("each principal's tasks/list shows their own tasks only", async () => {
    const bobTaskId = await createTask('bob', 'bob-notes');
    const ids = async (sub: string) => ((await rpc(sub, 'tasks/list', {})).body.result as { tasks: { taskId: string }[] }).tasks.map((t) => t.taskId);
    const alices = await ids('alice');
    expect(alices).toContain(aliceTaskId);
    expect(alices).not.toContain(bobTaskId);
    const bobs = await ids('bob');
    expect(bobs).toContain(bobTaskId);
    expect(bobs).not.toContain(aliceTaskId);
    expect(await ids('carol')).toEqual([]);
  });

  it('a task created by an event-stream answer is recorded: its creator reads it, bob is refused', async () => {
    const created = await post('alice', { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'research', arguments: { topic: 'sse-secret' }, task: { ttl: 60_000 } } }, SSE_PATH);
    expect(created.status).toBe(200);
    expect(created.contentType).toMatch(/^text\/event-stream/);
    const taskId = ((created.body as { result: { task: { taskId: string } } }).result.task).taskId;
    const own = await rpc('alice', 'tasks/result', { taskId }, SSE_PATH);
    expect(own.status).toBe(200);
    expect(JSON.stringify(own.body)).toContain('sse-secret');
    expect(await rpc('bob', 'tasks/result', { taskId }, SSE_PATH)).toEqual(taskNotFound(1));
    const listed = await rpc('bob', 'tasks/list', {}, SSE_PATH);
    expect(JSON.stringify(listed.body)).not.toContain(taskId);
  });

  it("a batch naming alice's task is refused whole for bob (id null), nothing of it forwarded", async () => {
    const before = forwarded.length;
    const batch = [
      { jsonrpc: '2.0', id: 1, method: 'ping' },
      { jsonrpc: '2.0', id: 2, method: 'tasks/get', params: { taskId: aliceTaskId } },
    ];
    const answer = await post('bob', batch);
    expect({ status: answer.status, body: answer.body }).toEqual(taskNotFound(null));
    const cancel = await post('bob', [{ jsonrpc: '2.0', id: 3, method: 'tasks/cancel', params: { taskId: aliceTaskId } }, { jsonrpc: '2.0', id: 4, method: 'tasks/list', params: {} }]);
    expect({ status: cancel.status, body: cancel.body }).toEqual(taskNotFound(null));
    expect(forwarded.length).toBe(before);
    // Alice's task was neither cancelled nor touched by the refused batches.
    const own = await rpc('alice', 'tasks/get', { taskId: aliceTaskId });
    expect((own.body.result as { status: string }).status).toBe('completed');
  });
});
