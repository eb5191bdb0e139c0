/**
 * Review, round 3 — class: cross-principal access to MCP tasks (SEP-1686, MCP 2025-11-25
 * basic/utilities/tasks, "Task isolation and access control"; DESIGN.md §8.3). A task outlives
 * the request that created it and is fetched by id with tasks/get, tasks/result, tasks/cancel and
 * listed by tasks/list. An upstream whose task store is not per session (a stateless server, the
 * SDK's InMemoryTaskStore shared by its per-request servers, as its own examples do) hands one
 * principal's task results to another unless the gateway binds tasks.
 * The gateway records each task id an answer carries as the caller's; another principal's id is
 * forwarded as one the upstream cannot know, so the upstream answers with its own "unknown task"
 * error (each revision's own), and tasks/list keeps the caller's own tasks.
 * The upstream is the real TypeScript MCP SDK (McpServer, experimental tasks, stateless transport),
 * answering in JSON on one route and in event streams on another.
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { closeServer, listen } from '../helpers/net.js';
import { startSharedTaskServer } from '../helpers/shared-task-server.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { startStatelessTaskServer, type StatelessTaskServer } from '../helpers/stateless-task-server.js';

const PATH = '/tasks/mcp';
const SSE_PATH = '/tasks-sse/mcp';
const V2_PATH = '/tasks-v2/mcp';
let issuer: TestIssuer;
let upstream: Server;
let v2: StatelessTaskServer;
let upstreamUrl: string;
let gw: TestGateway;

beforeAll(async () => {
  [issuer, upstream, v2] = await Promise.all([startTestIssuer('ES256'), startSharedTaskServer(), startStatelessTaskServer()]);
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as { port: number }).port}/mcp`;
  gw = await startTestGateway({
    'gateway.yaml': gatewayYaml({ log_level: 'warn' }),
    'tasks.yaml': jwtRoute(PATH, upstreamUrl, issuer),
    'tasks-sse.yaml': jwtRoute(SSE_PATH, `${upstreamUrl}?sse=1`, issuer),
    'tasks-v2.yaml': jwtRoute(V2_PATH, v2.url, issuer),
  });
}, 60_000);
afterAll(async () => {
  await gw?.stop();
  await issuer?.close();
  if (upstream) await closeServer(upstream);
  await v2?.close();
});

type Answer = { status: number; body: Record<string, unknown> };

/** The one JSON-RPC message of a JSON answer or of an event stream's last `data:` line. */
async function answerOf(res: Response): Promise<Answer> {
  const text = await res.text();
  if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) return { status: res.status, body: JSON.parse(text) as Record<string, unknown> };
  const data = text.split('\n').filter((line) => line.startsWith('data: ')).map((line) => line.slice(6));
  return { status: res.status, body: JSON.parse(data.at(-1)!) as Record<string, unknown> };
}

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };

async function rpc(sub: string, method: string, params: Record<string, unknown>, path = PATH): Promise<Answer> {
  const token = await issuer.mint({ aud: resourceOf(path), sub, client_id: 'app', scope: 'mcp:read' });
  const res = await fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { ...HEADERS, authorization: `Bearer ${token}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  return answerOf(res);
}

/** The upstream itself, with no gateway: what it answers for a task id it does not know. */
async function direct(method: string, params: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(upstreamUrl, { method: 'POST', headers: HEADERS, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }) });
  return answerOf(res);
}

async function createTask(sub: string, topic: string, path = PATH, finish = true): Promise<string> {
  const created = await rpc(sub, 'tools/call', { name: 'research', arguments: { topic, finish }, task: { ttl: 60_000 } }, path);
  expect(created.status).toBe(200);
  return (created.body.result as { task: { taskId: string } }).task.taskId;
}

type ListResult = { tasks?: { taskId: string }[]; nextCursor?: string };
const taskIdsOf = (listed: Answer) => ((listed.body.result as ListResult).tasks ?? []).map((t) => t.taskId);

/** Every page of the principal's tasks/list (the upstream pages over every principal's tasks; each page is cut). */
async function listAll(sub: string, path = PATH): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 100; page++) {
    const listed = await rpc(sub, 'tasks/list', cursor === undefined ? {} : { cursor }, path);
    expect(listed.status).toBe(200);
    ids.push(...taskIdsOf(listed));
    cursor = (listed.body.result as ListResult).nextCursor;
    if (cursor === undefined) return ids;
  }
  throw new Error('tasks/list never ended');
}

describe('[K67] a task belongs to the principal whose request created it', () => {
  let aliceTaskId = '';

  it('alice creates a task, reads it and its result, and lists it', async () => {
    aliceTaskId = await createTask('alice', 'alice-private-merger');
    expect(aliceTaskId).toMatch(/^[0-9a-f]{32}$/);
    const own = await rpc('alice', 'tasks/result', { taskId: aliceTaskId });
    expect(JSON.stringify(own.body)).toContain('alice-private-merger');
    const got = await rpc('alice', 'tasks/get', { taskId: aliceTaskId });
    expect((got.body.result as { status: string }).status).toBe('completed');
    expect(await listAll('alice')).toContain(aliceTaskId);
  });

  it("bob neither lists nor reads alice's task (the review's reproduction)", async () => {
    expect(aliceTaskId).not.toBe('');
    expect(await listAll('bob')).not.toContain(aliceTaskId);
    const read = await rpc('bob', 'tasks/result', { taskId: aliceTaskId });
    expect(JSON.stringify(read.body)).not.toContain('alice-private-merger');
    const got = await rpc('bob', 'tasks/get', { taskId: aliceTaskId });
    expect(JSON.stringify(got.body)).not.toContain('"completed"');
  });

  it("bob's tasks/get, tasks/result and tasks/cancel of alice's task get exactly the upstream's answer for a task it does not know", async () => {
    for (const method of ['tasks/get', 'tasks/result', 'tasks/cancel']) {
      const throughGateway = await rpc('bob', method, { taskId: aliceTaskId });
      // The same id sent straight to an upstream with no such task (a fresh server) is what "unknown" looks like.
      const unknownUpstream = await startSharedTaskServer();
      try {
        const port = (unknownUpstream.address() as { port: number }).port;
        const res = await fetch(`http://127.0.0.1:${port}/mcp`, { method: 'POST', headers: HEADERS, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { taskId: aliceTaskId } }) });
        const unknown = await answerOf(res);
        expect(throughGateway, method).toEqual(unknown);
        expect((throughGateway.body.error as { code: number }).code).toBe(-32602);
      } finally {
        await closeServer(unknownUpstream);
      }
    }
  });

  it("bob's tasks/cancel does not cancel alice's working task; hers does", async () => {
    const working = await createTask('alice', 'still-working', PATH, false);
    await rpc('bob', 'tasks/cancel', { taskId: working });
    expect((await rpc('alice', 'tasks/get', { taskId: working })).body.result).toMatchObject({ status: 'working' });
    expect((await rpc('alice', 'tasks/cancel', { taskId: working })).body.result).toMatchObject({ status: 'cancelled' });
  });

  it('each principal lists exactly its own tasks on every page, whoever else creates tasks meanwhile', async () => {
    const users = ['carol', 'dave', 'erin'];
    const created = new Map<string, string[]>(users.map((u) => [u, []]));
    await Promise.all(users.flatMap((u) => [1, 2, 3].map(async (n) => created.get(u)!.push(await createTask(u, `${u}-${n}`)))));
    for (const u of users) expect((await listAll(u)).sort()).toEqual(created.get(u)!.sort());
  });

  it('property: any task id that is not the caller\'s is answered as the upstream answers it unknown (its own error, the id echoed as sent)', async () => {
    const ids = fc.oneof(
      fc.uuid(),
      fc.stringMatching(/^[0-9a-f]{1,40}$/),
      fc.string({ minLength: 1, maxLength: 40 }),
      fc.constant(aliceTaskId),
    );
    await fc.assert(
      fc.asyncProperty(ids, fc.constantFrom('tasks/get', 'tasks/result', 'tasks/cancel'), async (taskId, method) => {
        const through = await rpc('bob', method, { taskId });
        expect(JSON.stringify(through.body)).not.toContain('alice-private-merger');
        if (taskId === aliceTaskId) return;
        // Unknown to the gateway and to the upstream: the upstream's answer, word for word.
        expect(through).toEqual(await direct(method, { taskId }));
      }),
      { numRuns: 25 },
    );
  });
});

describe('[K67] tasks created through an event-stream answer are bound too', () => {
  it("alice's task from an SSE answer is hers: bob reads the upstream's unknown-task error, alice her result", async () => {
    const taskId = await createTask('alice', 'sse-secret', SSE_PATH);
    const bob = await rpc('bob', 'tasks/result', { taskId }, SSE_PATH);
    expect(JSON.stringify(bob.body)).not.toContain('sse-secret');
    expect((bob.body.error as { code: number }).code).toBe(-32602);
    expect(JSON.stringify(bob.body)).toContain(taskId);
    expect(JSON.stringify((await rpc('alice', 'tasks/result', { taskId }, SSE_PATH)).body)).toContain('sse-secret');
    expect(await listAll('bob', SSE_PATH)).not.toContain(taskId);
  });

  it("a task is bound to its route: alice's task id named on another route is unknown there", async () => {
    const taskId = await createTask('alice', 'route-bound', SSE_PATH);
    const other = await rpc('alice', 'tasks/result', { taskId }, PATH);
    expect(JSON.stringify(other.body)).not.toContain('route-bound');
  });
});

const V2_META = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } };

/** A 2026-07-28 request with its routing headers (`Mcp-Name`: the task id on tasks/*), through the gateway or straight to the upstream. */
async function v2rpc(sub: string | undefined, method: string, params: Record<string, unknown>, meta: Record<string, unknown> = V2_META): Promise<Answer> {
  const name = method.startsWith('tasks/') ? params.taskId : params.name;
  const headers: Record<string, string> = { ...HEADERS, 'mcp-protocol-version': '2026-07-28', 'mcp-method': method, ...(typeof name === 'string' && { 'mcp-name': name }) };
  if (sub !== undefined) headers.authorization = `Bearer ${await issuer.mint({ aud: resourceOf(V2_PATH), sub, client_id: 'app', scope: 'mcp:read' })}`;
  const res = await fetch(sub === undefined ? v2.url : `${gw.url}${V2_PATH}`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { ...params, _meta: meta } }) });
  return answerOf(res);
}

describe('[K67] the 2026-07-28 tasks extension: flat task results, routing headers, the upstream\'s own errors', () => {
  it("bob's tasks/get, tasks/update and tasks/cancel of alice's task get the upstream's answer for an unknown task (-32602, not a header mismatch); hers still works", async () => {
    const created = await v2rpc('alice', 'tools/call', { name: 'slow_compute', arguments: { seconds: 60, label: 'alice-v2' } });
    const taskId = (created.body.result as { taskId: string; resultType: string }).taskId;
    expect((created.body.result as { resultType: string }).resultType).toBe('task');
    for (const [method, extra] of [['tasks/get', {}], ['tasks/update', { inputResponses: {} }], ['tasks/cancel', {}]] as const) {
      const bob = await v2rpc('bob', method, { taskId, ...extra });
      // What the upstream answers for an id it does not know, sent straight to it, the id put in its place.
      const unknownId = '00000000-0000-4000-8000-000000000000';
      const unknown = await v2rpc(undefined, method, { taskId: unknownId, ...extra });
      expect(bob, method).toEqual(JSON.parse(JSON.stringify(unknown).replaceAll(unknownId, taskId)) as Answer);
      expect((bob.body.error as { code: number }).code).toBe(-32602);
      // The upstream saw a substitute in the body and in Mcp-Name alike.
      const seen = v2.named.at(-2)!;
      expect(seen.taskId).not.toBe(taskId);
      expect(seen.mcpName).toBe(seen.taskId);
    }
    expect((await v2rpc('alice', 'tasks/get', { taskId })).body.result).toMatchObject({ taskId, status: 'working' });
    expect((await v2rpc('alice', 'tasks/cancel', { taskId })).body.result).toEqual({ resultType: 'complete' });
    expect((await v2rpc('alice', 'tasks/get', { taskId })).body.result).toMatchObject({ status: 'cancelled' });
  });

  it("each revision's own errors stay the upstream's: -32021 without the extension, -32601 for the removed tasks/list and tasks/result", async () => {
    const created = await v2rpc('alice', 'tools/call', { name: 'slow_compute', arguments: { seconds: 60, label: 'v2-errors' } });
    const taskId = (created.body.result as { taskId: string }).taskId;
    const noExtension = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} };
    expect(((await v2rpc('bob', 'tasks/get', { taskId }, noExtension)).body.error as { code: number }).code).toBe(-32021);
    expect(((await v2rpc('alice', 'tasks/get', { taskId }, noExtension)).body.error as { code: number }).code).toBe(-32021);
    for (const method of ['tasks/list', 'tasks/result']) {
      const through = await v2rpc('bob', method, method === 'tasks/result' ? { taskId } : {});
      expect((through.body.error as { code: number }).code, method).toBe(-32601);
    }
    await v2rpc('alice', 'tasks/cancel', { taskId });
  });
});

describe('[K67] a JSON answer only read for tasks keeps its framing', () => {
  it("a tools/call answer goes out with the upstream's Content-Length, byte for byte, and the task it creates is still the caller's", async () => {
    const seen: unknown[] = [];
    const taskId = 'framing-task-7f3a';
    const plain = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const { id, method, params } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id: number; method: string; params: { taskId?: string } };
        if (method === 'tasks/get') seen.push(params.taskId);
        const result = method === 'tools/call' ? { task: { taskId, status: 'working', ttl: 60_000, createdAt: '2026-01-01T00:00:00Z' } } : { taskId: params.taskId, status: 'working' };
        const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, result }));
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(body.length) }).end(body);
      });
    });
    await listen(plain);
    const path = '/framing/mcp';
    const route = await startTestGateway({
      'gateway.yaml': gatewayYaml({ log_level: 'warn' }),
      'framing.yaml': jwtRoute(path, `http://127.0.0.1:${(plain.address() as { port: number }).port}/mcp`, issuer),
    });
    try {
      const post = async (sub: string, method: string, params: Record<string, unknown>) => {
        const token = await issuer.mint({ aud: resourceOf(path), sub, client_id: 'app', scope: 'mcp:read' });
        const { port } = new URL(route.url);
        return new Promise<{ headers: Record<string, unknown>; body: string }>((resolve, reject) => {
          const req = httpRequest({ host: '127.0.0.1', port, path, method: 'POST', headers: { ...HEADERS, authorization: `Bearer ${token}` } }, (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
          });
          req.on('error', reject);
          req.end(JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }));
        });
      };
      const created = await post('alice', 'tools/call', { name: 'research', arguments: { topic: 'framing' } });
      expect(created.headers['transfer-encoding']).toBeUndefined();
      expect(created.headers['content-length']).toBe(String(Buffer.byteLength(created.body)));
      expect(JSON.parse(created.body)).toEqual({ jsonrpc: '2.0', id: 1, result: { task: { taskId, status: 'working', ttl: 60_000, createdAt: '2026-01-01T00:00:00Z' } } });
      // Recorded as alice's: her tasks/get names it; bob's is sent a substitute.
      await post('alice', 'tasks/get', { taskId });
      await post('bob', 'tasks/get', { taskId });
      expect(seen[0]).toBe(taskId);
      expect(seen[1]).not.toBe(taskId);
    } finally {
      await route.stop();
      await closeServer(plain);
    }
  });
});
