/**
 * An upstream that speaks only MCP 2026-07-28 behind an aggregated route (DESIGN §8.2, issue 22
 * item 2): the Python SDK's server (mcp 2.3.0, test/tools/py/wire_2026_server.py) behind a hop that
 * refuses what that revision removed, as a server of it alone does (initialize: HTTP 404 with
 * -32601; the session GET stream: 405), next to server-memory over stdio. The route asks its
 * server/discover instead of initialize and sends every request without a session, each with the
 * revision and the client's capabilities in `_meta` and in the headers; a handshake-era client of
 * the route is served the server's tools, calls and resources.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, freePort, listen } from '../helpers/net.js';
import { connectClient, resultText, serverBin, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { ensurePythonSdk, venvPython } from '../tools/python-sdk.js';

const ROUTE = '/mixed/mcp';
const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'tools', 'py', 'wire_2026_server.py');

interface Seen {
  method: string;
  headers: Record<string, string | string[] | undefined>;
  body: Record<string, unknown>;
}

let python: ChildProcess;
let hop: Server;
let hopUrl: string;
const seen: Seen[] = [];
let stage: StdioStage;

/** In front of the Python server: initialize and the GET stream refused as 2026-07-28 alone refuses them, the rest passed on. */
async function startModernOnlyHop(target: string): Promise<void> {
  hop = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const body = (text ? JSON.parse(text) : {}) as Record<string, unknown>;
      seen.push({ method: req.method ?? '', headers: req.headers, body });
      if (req.method !== 'POST') return void res.writeHead(405).end();
      if (body.method === 'initialize') return void res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: body.id, error: { code: -32601, message: 'Method not found: initialize' } }));
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k, v]) => typeof v === 'string' && !['host', 'content-length', 'connection'].includes(k))) as Record<string, string>;
      fetch(target, { method: 'POST', headers, body: text }).then(
        async (up) => res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' }).end(Buffer.from(await up.arrayBuffer())),
        () => res.writeHead(502).end(),
      );
    });
  });
  hopUrl = `http://127.0.0.1:${await listen(hop)}/mcp`;
}

beforeAll(async () => {
  ensurePythonSdk();
  const port = await freePort();
  python = spawn(venvPython, ['-u', script, String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
  const direct = `http://127.0.0.1:${port}/mcp`;
  await waitFor(async () => (await fetch(direct, { method: 'POST' }).catch(() => undefined)) !== undefined, 30_000, 'the Python SDK server listening');
  await startModernOnlyHop(direct);
  stage = await startStdioStage({
    [ROUTE]: {
      upstreams: {
        py: { upstream: hopUrl },
        memory: { upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } },
      },
    },
  });
}, 120_000);

afterAll(async () => {
  await stage?.close();
  if (hop) await closeServer(hop);
  python?.kill('SIGTERM');
});

describe('an upstream of 2026-07-28 alone behind an aggregated route', () => {
  it('is reached through server/discover and session-less requests: its tools, calls and resources are served beside the stdio server', async () => {
    const via = await connectClient(stage.url(ROUTE), await stage.token(ROUTE));
    try {
      const tools = (await via.client.listTools()).tools.map((t) => t.name);
      expect(tools).toEqual(expect.arrayContaining(['py__echo', 'py__greet', 'py__touch', 'memory__read_graph']));
      expect(resultText(await via.client.callTool({ name: 'py__echo', arguments: { text: 'over the new wire' } }))).toBe('over the new wire');
      const uris = (await via.client.listResources()).resources.map((r) => r.uri);
      expect(uris).toEqual(expect.arrayContaining(['file:///public/readme.txt', 'file:///secret/key.txt']));
      expect(await via.client.readResource({ uri: 'file:///public/readme.txt' })).toMatchObject({ contents: [{ uri: 'file:///public/readme.txt', text: 'public readme' }] });
      expect(resultText(await via.client.callTool({ name: 'memory__read_graph', arguments: {} }))).toContain('entities');
    } finally {
      await via.client.close();
    }
    // What reached the server: one refused initialize, then discover and requests of 2026-07-28, no session.
    const posts = seen.filter((s) => s.method === 'POST');
    expect(posts.filter((s) => s.body.method === 'initialize').length).toBeGreaterThanOrEqual(1);
    const modern = posts.filter((s) => s.body.method !== 'initialize');
    expect(modern.map((s) => s.body.method)).toEqual(expect.arrayContaining(['server/discover', 'tools/list', 'tools/call', 'resources/list', 'resources/read']));
    for (const s of modern) {
      expect(s.headers['mcp-protocol-version']).toBe('2026-07-28');
      expect(s.headers['mcp-session-id']).toBeUndefined();
      expect(s.headers['mcp-method']).toBe(s.body.method);
      expect((s.body.params as { _meta?: Record<string, unknown> })._meta).toMatchObject({ 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} });
    }
    const call = modern.find((s) => s.body.method === 'tools/call')!;
    expect(call.headers['mcp-name']).toBe('echo');
    expect((call.body.params as { name: string }).name).toBe('echo');
    expect(seen.some((s) => s.method === 'GET')).toBe(false);
  }, 60_000);
});
