/**
 * Review, round 3 — class: cross-principal access to MCP tasks (SEP-1686, MCP 2025-11-25
 * basic/utilities/tasks, "Task isolation and access control"). The gateway binds sessions to
 * principals because an unmodified upstream knows nothing of them (H42); a task outlives the
 * request that created it and is fetched by id with tasks/get, tasks/result, tasks/cancel and
 * listed by tasks/list. An upstream whose task store is not per session (a stateless server, the
 * SDK's InMemoryTaskStore shared by its per-request servers, as its own examples do) hands one
 * principal's task results to another unless the gateway binds tasks too.
 * The upstream is the real TypeScript MCP SDK (McpServer, experimental tasks, stateless transport).
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
let issuer: TestIssuer;
let upstream: Server;
let gw: TestGateway;

/** A stateless SDK server: a new McpServer per request, one task store for all (the SDK's stateless pattern). */
async function startTaskServer(): Promise<Server> {
  const taskStore = new InMemoryTaskStore();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
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
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
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
  gw = await startTestGateway({ 'gateway.yaml': gatewayYaml({ log_level: 'warn' }), 'tasks.yaml': jwtRoute(PATH, `http://127.0.0.1:${port}/mcp`, issuer) });
}, 60_000);
afterAll(async () => {
  await gw?.stop();
  await issuer?.close();
  if (upstream) await closeServer(upstream);
});

async function rpc(sub: string, method: string, params: Record<string, unknown>): Promise<{ status: number; body: Record<string, unknown> }> {
  const token = await issuer.mint({ aud: resourceOf(PATH), sub, client_id: 'app', scope: 'mcp:read' });
  const res = await fetch(`${gw.url}${PATH}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
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

  // OPEN (HIGH, SECURITY.md "What it does not guarantee"): the gateway binds sessions, not tasks,
  // so today bob lists and reads alice's task. `it.fails` keeps the reproduction running and
  // turns red the day tasks are bound: then make it a plain `it`.
  it.fails("bob neither lists nor reads alice's task (open: tasks are not bound yet)", async () => {
    expect(aliceTaskId).not.toBe('');
    const listed = await rpc('bob', 'tasks/list', {});
    expect(JSON.stringify(listed.body)).not.toContain(aliceTaskId);
    const read = await rpc('bob', 'tasks/result', { taskId: aliceTaskId });
    expect(JSON.stringify(read.body)).not.toContain('alice-private-merger');
    const got = await rpc('bob', 'tasks/get', { taskId: aliceTaskId });
    expect(JSON.stringify(got.body)).not.toContain('"completed"');
  });

  it('today bob can read it: the vulnerability, asserted as it stands', async () => {
    const read = await rpc('bob', 'tasks/result', { taskId: aliceTaskId });
    expect(JSON.stringify(read.body)).toContain('alice-private-merger');
  });
});
