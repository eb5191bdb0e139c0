/**
 * stdio upstreams end to end (DESIGN §7.2): real unmodified MCP servers from node_modules
 * started by the gateway as child processes, the real MCP SDK client through the gateway, and
 * every rule of the route (auth, policy, tools/list filtering, session binding) on top.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CreateMessageRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectClient, FIXTURE_SERVER, isAlive, resultText, serverBin, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';

const MEMORY = '/memory/mcp';
const FILES = '/files/mcp';
const EVERYTHING = '/everything/mcp';
const PROBE = '/probe/mcp';

let stage: StdioStage;
let root: string;

const stdio = (command: string, args: string[], more: Record<string, unknown> = {}) => ({ upstream: { stdio: { command, args, ...more } } });

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'mag-fs-root-'));
  await writeFile(join(root, 'hello.txt'), 'hello from the temp root\n');
  stage = await startStdioStage(
    {
      [MEMORY]: stdio(process.execPath, [serverBin('@modelcontextprotocol/server-memory')], { env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } }),
      [FILES]: stdio(process.execPath, [serverBin('@modelcontextprotocol/server-filesystem'), root]),
      [EVERYTHING]: stdio(process.execPath, [serverBin('@modelcontextprotocol/server-everything'), 'stdio']),
      [PROBE]: {
        ...stdio(process.execPath, [FIXTURE_SERVER, 'probe', '${PROCESS_DIR}'], {
          env: { PROBE_SECRET: { env: 'STDIO_TEST_SECRET' }, STATE: '${PROCESS_DIR}/state' },
          inherit_env: ['PATH', 'STDIO_TEST_PASSED'],
        }),
        rules: [
          { match: { method: 'tools/call', tool: 'delete_*' }, require_scopes: ['mcp:write'] },
          { match: { method: 'tools/call', tool: 'crash' }, deny: true },
        ],
        filter_tools_list: true,
      },
    },
    { STDIO_TEST_SECRET: 'from-a-secret', STDIO_TEST_PASSED: 'passed', STDIO_TEST_WITHHELD: 'withheld' },
  );
  // The gateway's own environment holds more than the child may see.
  process.env.STDIO_TEST_PASSED = 'passed';
  process.env.STDIO_TEST_WITHHELD = 'withheld';
  process.env.STDIO_TEST_SECRET = 'from-a-secret';
}, 60_000);

afterAll(async () => {
  await stage?.close();
  await rm(root, { recursive: true, force: true });
});

describe('server-memory (stdio): one process per session of one principal', () => {
  it("alice's entities are not bob's", async () => {
    const alice = await connectClient(stage.url(MEMORY), await stage.token(MEMORY, 'alice'));
    const bob = await connectClient(stage.url(MEMORY), await stage.token(MEMORY, 'bob'));
    try {
      await alice.client.callTool({ name: 'create_entities', arguments: { entities: [{ name: 'alice-secret', entityType: 'note', observations: ['only alice'] }] } });
      const aliceGraph = resultText(await alice.client.callTool({ name: 'read_graph', arguments: {} }));
      const bobGraph = resultText(await bob.client.callTool({ name: 'read_graph', arguments: {} }));
      expect(aliceGraph).toContain('alice-secret');
      expect(bobGraph).not.toContain('alice-secret');
    } finally {
      await Promise.all([alice.client.close(), bob.client.close()]);
    }
  });
});

describe('the same tools and results as a direct stdio connection', () => {
  it('server-everything: tools/list and tools/call through the gateway equal a direct StdioClientTransport', async () => {
    const direct = new Client({ name: 'direct', version: '1' });
    await direct.connect(new StdioClientTransport({ command: process.execPath, args: [serverBin('@modelcontextprotocol/server-everything'), 'stdio'], stderr: 'ignore' }));
    const via = await connectClient(stage.url(EVERYTHING), await stage.token(EVERYTHING));
    try {
      const [directTools, viaTools] = await Promise.all([direct.listTools(), via.client.listTools()]);
      expect(viaTools.tools.map((t) => t.name).sort()).toEqual(directTools.tools.map((t) => t.name).sort());
      expect(viaTools).toEqual(directTools);
      const echo = { name: 'echo', arguments: { message: 'through the gateway' } };
      expect(await via.client.callTool(echo)).toEqual(await direct.callTool(echo));
      const sum = { name: directTools.tools.find((t) => /sum|add/.test(t.name))!.name, arguments: { a: 2, b: 40 } };
      expect(await via.client.callTool(sum)).toEqual(await direct.callTool(sum));
    } finally {
      await Promise.all([direct.close(), via.client.close()]);
    }
  });

  it('server-filesystem (a temp root): reads the file the direct connection reads', async () => {
    const direct = new Client({ name: 'direct', version: '1' });
    await direct.connect(new StdioClientTransport({ command: process.execPath, args: [serverBin('@modelcontextprotocol/server-filesystem'), root], stderr: 'ignore' }));
    const via = await connectClient(stage.url(FILES), await stage.token(FILES));
    try {
      const read = { name: 'read_text_file', arguments: { path: join(root, 'hello.txt') } };
      const viaResult = await via.client.callTool(read);
      expect(resultText(viaResult)).toContain('hello from the temp root');
      expect(viaResult).toEqual(await direct.callTool(read));
      expect((await via.client.listTools()).tools.map((t) => t.name).sort()).toEqual((await direct.listTools()).tools.map((t) => t.name).sort());
    } finally {
      await Promise.all([direct.close(), via.client.close()]);
    }
  });
});

interface Report {
  env: Record<string, string>;
  argv: string[];
  cwd: string;
  pid: number;
}

const report = async (client: Client): Promise<Report> => JSON.parse(resultText(await client.callTool({ name: 'report', arguments: {} }))) as Report;

/** A raw Streamable HTTP POST to the probe route. */
async function post(token: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(stage.url(PROBE), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
}

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

describe('process isolation', () => {
  it('a child sees only its env and inherit_env, a private 0700 PROCESS_DIR as cwd, and no token of the client', async () => {
    const token = await stage.token(PROBE, 'alice');
    const { client } = await connectClient(stage.url(PROBE), token);
    try {
      const seen = await report(client);
      expect(Object.keys(seen.env).sort()).toEqual(['PATH', 'PROBE_SECRET', 'STATE', 'STDIO_TEST_PASSED']);
      expect(seen.env.PROBE_SECRET).toBe('from-a-secret');
      expect(seen.env.STDIO_TEST_PASSED).toBe('passed');
      expect(seen.env.STATE).toBe(`${seen.cwd}/state`);
      expect(seen.argv).toEqual(['probe', seen.cwd]);
      const { statSync } = await import('node:fs');
      expect(statSync(seen.cwd).mode & 0o777).toBe(0o700);
      // Nothing of the client's credential, anywhere in what the process was given.
      expect(JSON.stringify(seen)).not.toContain(token);
      expect(JSON.stringify(seen)).not.toContain(token.split('.')[1]);
    } finally {
      await client.close();
    }
  });

  it('two sessions, even of one principal, never share a process or a directory; two principals never do', async () => {
    const a1 = await connectClient(stage.url(PROBE), await stage.token(PROBE, 'alice'));
    const a2 = await connectClient(stage.url(PROBE), await stage.token(PROBE, 'alice'));
    const b = await connectClient(stage.url(PROBE), await stage.token(PROBE, 'bob'));
    try {
      const seen = await Promise.all([a1, a2, b].map((c) => report(c.client)));
      expect(new Set(seen.map((r) => r.pid)).size).toBe(3);
      expect(new Set(seen.map((r) => r.cwd)).size).toBe(3);
    } finally {
      await Promise.all([a1, a2, b].map((c) => c.client.close()));
    }
  });

  it("a session id is bound to its principal: bob presenting alice's gets 404; DELETE stops the process and removes its directory", async () => {
    const alice = await stage.token(PROBE, 'alice');
    const init = await post(alice, INITIALIZE, { accept: 'application/json' });
    expect(init.status).toBe(200);
    const sessionId = init.headers.get('mcp-session-id')!;
    expect((await init.json()) as object).toMatchObject({ id: 1, result: { serverInfo: { name: 'fixture' } } });
    const call = { jsonrpc: '2.0', id: 'r', method: 'tools/call', params: { name: 'report', arguments: {} } };
    const asBob = await post(await stage.token(PROBE, 'bob'), call, { 'mcp-session-id': sessionId });
    expect(asBob.status).toBe(404);
    const asAlice = await post(alice, call, { 'mcp-session-id': sessionId, accept: 'application/json' });
    const seen = JSON.parse(((await asAlice.json()) as { result: { content: { text: string }[] } }).result.content[0]!.text) as Report;
    const gone = await fetch(stage.url(PROBE), { method: 'DELETE', headers: { authorization: `Bearer ${alice}`, 'mcp-session-id': sessionId } });
    expect(gone.status).toBe(200);
    await waitFor(() => !isAlive(seen.pid), 5_000, 'the process to stop');
    const { existsSync } = await import('node:fs');
    await waitFor(() => !existsSync(seen.cwd), 5_000, 'its directory to go');
    expect((await post(alice, call, { 'mcp-session-id': sessionId })).status).toBe(404);
  });

  it('JSON-RPC ids of concurrent requests, even equal ones, never mix', async () => {
    const alice = await stage.token(PROBE, 'alice');
    const sessionId = (await post(alice, INITIALIZE)).headers.get('mcp-session-id')!;
    const calls = [300, 10, 150, 0].map((ms) =>
      post(alice, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'sleep', arguments: { ms } } }, { 'mcp-session-id': sessionId, accept: 'application/json' }).then(
        async (r) => ({ ms, body: (await r.json()) as { id: number; result: { content: { text: string }[] } } }),
      ),
    );
    for (const { ms, body } of await Promise.all(calls)) {
      expect(body.id).toBe(7);
      expect(body.result.content[0]!.text).toBe(`slept ${ms}`);
    }
  });
});

describe('every rule of the route holds on a stdio upstream', () => {
  it('tools/list is filtered, a denied tool is 403 and a tool that needs mcp:write is insufficient_scope', async () => {
    const { client } = await connectClient(stage.url(PROBE), await stage.token(PROBE, 'carol', 'mcp:read'));
    try {
      const names = (await client.listTools()).tools.map((t) => t.name);
      expect(names).toContain('report');
      expect(names).not.toContain('crash');
      expect(names).not.toContain('delete_all');
    } finally {
      await client.close();
    }
    const token = await stage.token(PROBE, 'carol', 'mcp:read');
    const sessionId = (await post(token, INITIALIZE)).headers.get('mcp-session-id')!;
    const denied = await post(token, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'crash', arguments: {} } }, { 'mcp-session-id': sessionId });
    expect(denied.status).toBe(403);
    const stepUp = await post(token, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'delete_all', arguments: {} } }, { 'mcp-session-id': sessionId });
    expect(stepUp.status).toBe(403);
    expect(stepUp.headers.get('www-authenticate')).toContain('insufficient_scope');
    const writer = await stage.token(PROBE, 'carol', 'mcp:read mcp:write');
    const { client: full } = await connectClient(stage.url(PROBE), writer);
    try {
      expect((await full.listTools()).tools.map((t) => t.name)).toContain('delete_all');
      expect(resultText(await full.callTool({ name: 'delete_all', arguments: {} }))).toBe('called delete_all');
    } finally {
      await full.close();
    }
  });

  it('no token: 401 with the challenge, and no process is started', async () => {
    const spawns = async () => (await stage.gw.metrics.stdioSpawns.get()).values.find((v) => v.labels.route === PROBE)?.value ?? 0;
    const started = await spawns();
    const res = await fetch(stage.url(PROBE), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(INITIALIZE) });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('resource_metadata=');
    expect(await spawns()).toBe(started);
  });
});

describe('server-to-client messages', () => {
  it("a server's sampling request reaches the client on the POST's event stream and its answer reaches the right child", async () => {
    const client = new Client({ name: 'sampler', version: '1' }, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, async () => ({ role: 'assistant', content: { type: 'text', text: 'sampled!' }, model: 'test' }));
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const token = await stage.token(PROBE, 'dave');
    await client.connect(new StreamableHTTPClientTransport(new URL(stage.url(PROBE)), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
    try {
      const result = resultText(await client.callTool({ name: 'ask', arguments: {} }));
      expect(JSON.parse(result)).toMatchObject({ content: { text: 'sampled!' } });
    } finally {
      await client.close();
    }
  });
});

describe('2026-07-28 clients (no session, no initialize): one process per principal, initialized by the gateway', () => {
  const statelessCall = (token: string, id: number) =>
    post(token, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'report', arguments: {}, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } } }, {
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'report',
      accept: 'application/json',
    }).then(async (r) => {
      expect(r.status).toBe(200);
      expect(r.headers.get('mcp-session-id')).toBeNull();
      const body = (await r.json()) as { id: number; result: { content: { text: string }[] } };
      expect(body.id).toBe(id);
      return JSON.parse(body.result.content[0]!.text) as Report;
    });

  it("a principal's requests share its process; another principal's never do", async () => {
    const erin = await stage.token(PROBE, 'erin');
    const frank = await stage.token(PROBE, 'frank');
    const [e1, e2, f1] = await Promise.all([statelessCall(erin, 1), statelessCall(erin, 2), statelessCall(frank, 3)]);
    expect(e1.pid).toBe(e2.pid);
    expect(f1.pid).not.toBe(e1.pid);
    expect((await statelessCall(erin, 4)).pid).toBe(e1.pid);
  });
});
