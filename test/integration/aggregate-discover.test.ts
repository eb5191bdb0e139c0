/**
 * 2026-07-28's `server/discover` on an aggregated route (issue 22 item 2):
 * answered without a session, with the capabilities the upstreams announce
 * when each is reached directly (server-everything over Streamable HTTP,
 * server-memory over stdio, a TS SDK server with tools.listChanged): each
 * kind some upstream has, listChanged where some upstream sends it; and the
 * revisions the route serves: 2026-07-28 (without a session,
 * aggregate-session-less.test.ts) and the session-based ones, whose
 * initialize then works (announcing tasks too, as those revisions name them). The gateway probes an upstream it does
 * not know yet once, then answers from what it learnt.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGrowingServer } from '../helpers/growing-mcp-server.js';
import { connectClient, serverBin, startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';

const ALL = '/all/mcp';
const memoryBin = serverBin('@modelcontextprotocol/server-memory');
let everything: UpstreamHandle;
let growing: Awaited<ReturnType<typeof startGrowingServer>>;
let stage: StdioStage;

beforeAll(async () => {
  [everything, growing] = await Promise.all([startEverythingServer(), startGrowingServer()]);
  const memory = { upstream: { stdio: { command: process.execPath, args: [memoryBin], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } };
  stage = await startStdioStage({ [ALL]: { upstreams: { everything: { upstream: everything.url }, memory, growing: { upstream: growing.url } } } });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([everything?.close(), growing?.close()]);
});

/** Each server's capabilities as a client reaching it directly sees them. */
async function directCapabilities(): Promise<Record<string, unknown>[]> {
  const transports = [new StreamableHTTPClientTransport(new URL(everything.url)), new StdioClientTransport({ command: process.execPath, args: [memoryBin], env: { MEMORY_FILE_PATH: '/tmp/mag-discover-direct-memory.jsonl' } }), new StreamableHTTPClientTransport(new URL(growing.url))];
  const out: Record<string, unknown>[] = [];
  for (const transport of transports) {
    const client = new Client({ name: 'direct', version: '0' });
    await client.connect(transport);
    out.push(client.getServerCapabilities() as Record<string, unknown>);
    await client.close();
  }
  return out;
}

/** The merge the route promises: each of tools, prompts, resources, completions, logging some server has; listChanged where some server sends it; resources' subscribe where some server takes it. */
function merged(all: Record<string, unknown>[]): Record<string, Record<string, unknown>> {
  const out: Record<string, Record<string, unknown>> = {};
  for (const caps of all)
    for (const kind of ['tools', 'prompts', 'resources', 'completions', 'logging']) {
      const c = caps[kind] as Record<string, unknown> | undefined;
      if (!c) continue;
      out[kind] ??= {};
      if (['tools', 'prompts', 'resources'].includes(kind) && c.listChanged === true) out[kind].listChanged = true;
      if (kind === 'resources' && c.subscribe === true) out[kind].subscribe = true;
    }
  return out;
}

const discover = async (token: string) => {
  const res = await fetch(stage.url(ALL), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'server/discover' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 'd1', method: 'server/discover', params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientInfo': { name: 't', version: '0' }, 'io.modelcontextprotocol/clientCapabilities': {} } } }),
  });
  const body = await res.text();
  expect(res.status, body).toBe(200);
  expect(res.headers.get('mcp-session-id')).toBeNull();
  return JSON.parse(body) as { id: string; result: Record<string, unknown> };
};

describe('server/discover on an aggregated route', () => {
  it('answers without a session with what the upstreams announce directly, and the revisions it serves', async () => {
    const token = await stage.token(ALL);
    const direct = await directCapabilities();
    const expected = merged(direct);
    expect(expected.tools).toEqual({ listChanged: true });
    const before = growing.sessions();
    for (const round of [1, 2]) {
      const { id, result } = await discover(token);
      expect(id).toBe('d1');
      expect(result.capabilities).toEqual(expected);
      expect(result.supportedVersions).toEqual(['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']);
      expect(result).toMatchObject({ resultType: 'complete', cacheScope: 'private', serverInfo: { name: 'mcp-auth-gateway' } });
      // Probed once (one upstream session, ended), then answered from what was learnt.
      expect(growing.sessions() - before, `round ${round}`).toBe(1);
    }
    // The fallback the answer leads a client to: initialize, with the same capabilities, and the tasks of
    // server-everything as its revision names them (2026-07-28 names them an extension, which no upstream here has).
    const { client } = await connectClient(stage.url(ALL), token);
    expect(direct[0]!.tasks).toMatchObject({ list: {}, cancel: {}, requests: { tools: { call: {} } } });
    expect(client.getServerCapabilities()).toEqual({ ...expected, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } });
    await client.close();
  });

  it('is refused without a token, like every request of the route', async () => {
    const res = await fetch(stage.url(ALL), { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'server/discover' }) });
    expect(res.status).toBe(401);
    await res.arrayBuffer();
  });

  it('refuses a discover whose _meta lacks the revision or the client capabilities (400, -32602), or names a revision it does not serve (400, -32022 with the ones it does)', async () => {
    const token = await stage.token(ALL);
    const ask = async (version: string, meta: Record<string, unknown> | undefined) => {
      const res = await fetch(stage.url(ALL), {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': version, 'mcp-method': 'server/discover' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'server/discover', params: meta === undefined ? {} : { _meta: meta } }),
      });
      return { status: res.status, body: (await res.json()) as { id: unknown; error?: { code: number; data?: unknown } } };
    };
    const revision = { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' };
    const capabilities = { 'io.modelcontextprotocol/clientCapabilities': {} };
    for (const meta of [undefined, revision, capabilities]) {
      const { status, body } = await ask('2026-07-28', meta);
      expect(status).toBe(400);
      expect(body).toMatchObject({ id: 7, error: { code: -32602 } });
    }
    const { status, body } = await ask('v999.0.0', { ...capabilities, 'io.modelcontextprotocol/protocolVersion': 'v999.0.0' });
    expect(status).toBe(400);
    expect(body).toMatchObject({ id: 7, error: { code: -32022, data: { supported: ['2026-07-28', '2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05'], requested: 'v999.0.0' } } });
  });
});
