/**
 * One route in front of several MCP servers (DESIGN §8.2, issue 22): the
 * unmodified server-everything over Streamable HTTP and server-memory over
 * stdio behind /all/mcp, driven by the TS SDK and compared with each server
 * reached directly (every tool, prompt and resource, all pages); a recording
 * hop shows what reaches an upstream (its own names, in the body and in
 * Mcp-Name); rules on shown names and on `match: { upstream }`; an upstream
 * cut off mid-session is left out and fails its calls, the other is served,
 * and it comes back without a restart.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectClient, resultText, serverBin, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';
import { freePort } from '../helpers/net.js';
import { readFileSync } from 'node:fs';
import { descendantsOf } from '../helpers/process-tree.js';

const ALL = '/all/mcp';
const RULED = '/ruled/mcp';
const FLAKY = '/flaky/mcp';

const memory = { upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } };

/** A TCP hop that can be switched off (connections refused, open ones cut) and on again at the same port. */
async function startSwitch(target: string): Promise<{ url: string; off(): Promise<void>; on(): Promise<void>; close(): Promise<void> }> {
  const to = new URL(target);
  const port = await freePort();
  const sockets = new Set<Socket>();
  let server: Server | undefined;
  const on = () =>
    new Promise<void>((resolve) => {
      server = createServer((socket) => {
        const out = connect(Number(to.port), to.hostname);
        sockets.add(socket).add(out);
        socket.pipe(out).pipe(socket);
        const drop = () => [socket, out].forEach((s) => (s.destroy(), sockets.delete(s)));
        socket.on('error', drop).on('close', drop);
        out.on('error', drop).on('close', drop);
      });
      server.listen(port, '127.0.0.1', () => resolve());
    });
  const off = () =>
    new Promise<void>((resolve) => {
      for (const s of sockets) s.destroy();
      sockets.clear();
      if (!server) return resolve();
      server.close(() => resolve());
      server = undefined;
    });
  await on();
  return { url: `http://127.0.0.1:${port}${to.pathname}`, on, off, close: off };
}

let everything: UpstreamHandle;
let flakyEverything: UpstreamHandle;
let hop: RecordingHop;
let flaky: Awaited<ReturnType<typeof startSwitch>>;
let stage: StdioStage;

beforeAll(async () => {
  [everything, flakyEverything] = await Promise.all([startEverythingServer(), startEverythingServer()]);
  hop = await startRecordingHop(everything.url);
  flaky = await startSwitch(flakyEverything.url);
  stage = await startStdioStage({
    [ALL]: { upstreams: { everything: { upstream: hop.url }, memory } },
    [RULED]: {
      upstreams: { everything: { upstream: everything.url }, memory: { ...memory, rename: { read_graph: 'graph' } } },
      names: '{name}.{upstream}',
      rules: [
        { match: { tool: 'echo.everything' }, deny: true },
        { match: { upstream: 'memory' }, require_scopes: ['mcp:write'] },
      ],
      filter_tools_list: true,
    },
    [FLAKY]: { upstreams: { far: { upstream: flaky.url, limits: { upstream_timeout: '3s' } }, memory } },
  });
}, 90_000);

afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([hop?.close(), flaky?.close(), everything?.close(), flakyEverything?.close()]);
});

type Page = { nextCursor?: string };
/** Every page of a list; a list the server does not offer (-32601) is empty, as the route shows it. */
async function all<T>(list: (cursor?: string) => Promise<Page & Record<string, unknown>>, member: string): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | undefined;
  do {
    const page = await list(cursor).catch((err: unknown) => {
      if (String(err).includes("-32601")) return { [member]: [] } as Page & Record<string, unknown>;
      throw err;
    });
    items.push(...(page[member] as T[]));
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

async function directHttp(url: string): Promise<Client> {
  const client = new Client({ name: 'direct', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

async function directMemory(): Promise<Client> {
  const client = new Client({ name: 'direct', version: '1' });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: `/tmp/mag-agg-direct-${process.pid}.jsonl` }, stderr: 'ignore' }));
  return client;
}

const renamed = <T extends { name: string }>(items: T[], upstream: string) => items.map((t) => ({ ...t, name: `${upstream}__${t.name}` }));
const byName = <T extends { name: string }>(items: T[]) => [...items].sort((a, b) => a.name.localeCompare(b.name));

describe('one route, two servers: what the client sees equals each server reached directly', () => {
  it('tools, prompts, resources and templates: every page of both, names shown as {upstream}__{name}', async () => {
    const via = await connectClient(stage.url(ALL), await stage.token(ALL));
    const [ev, mem] = await Promise.all([directHttp(everything.url), directMemory()]);
    try {
      expect(via.client.getServerCapabilities()).toMatchObject({ tools: {}, prompts: {}, resources: {} });
      const viaTools = await all<{ name: string }>((cursor) => via.client.listTools({ cursor }), 'tools');
      const expected = [...renamed(await all<{ name: string }>((c) => ev.listTools({ cursor: c }), 'tools'), 'everything'), ...renamed(await all<{ name: string }>((c) => mem.listTools({ cursor: c }), 'tools'), 'memory')];
      expect(byName(viaTools)).toEqual(byName(expected));
      const viaPrompts = await all<{ name: string }>((cursor) => via.client.listPrompts({ cursor }), 'prompts');
      const prompts = async (c: Client) => all<{ name: string }>((cursor) => c.listPrompts({ cursor }), 'prompts');
      expect(byName(viaPrompts)).toEqual(byName([...renamed(await prompts(ev), 'everything'), ...renamed(await prompts(mem), 'memory')]));
      // Resource URIs are not renamed: both servers' lists, in configuration order.
      const resources = async (c: Client) => all<{ uri: string }>((cursor) => c.listResources({ cursor }), 'resources');
      const viaResources = await resources(via.client);
      const [evResources, memResources] = [await resources(ev), await resources(mem)];
      expect(evResources.length).toBeGreaterThan(1);
      expect(viaResources).toEqual([...evResources, ...memResources]);
      const templates = async (c: Client) => all<unknown>((cursor) => c.listResourceTemplates({ cursor }), 'resourceTemplates');
      expect(await templates(via.client)).toEqual([...(await templates(ev)), ...(await templates(mem))]);
      // Every resource reads as it does directly, from the server that listed it.
      for (const { uri } of evResources) expect(await via.client.readResource({ uri })).toEqual(await ev.readResource({ uri }));
      for (const { uri } of memResources) expect(await via.client.readResource({ uri })).toEqual(await mem.readResource({ uri }));
    } finally {
      await Promise.allSettled([via.client.close(), ev.close(), mem.close()]);
    }
  }, 60_000);

  it('calls reach the server the shown name leads to, with the results it gives directly', async () => {
    const via = await connectClient(stage.url(ALL), await stage.token(ALL));
    const ev = await directHttp(everything.url);
    try {
      expect(await via.client.callTool({ name: 'everything__echo', arguments: { message: 'through one route' } })).toEqual(await ev.callTool({ name: 'echo', arguments: { message: 'through one route' } }));
      const prompt = (await ev.listPrompts()).prompts.find((p) => !p.arguments?.some((a) => a.required))!;
      expect(await via.client.getPrompt({ name: `everything__${prompt.name}` })).toEqual(await ev.getPrompt({ name: prompt.name }));
      await via.client.callTool({ name: 'memory__create_entities', arguments: { entities: [{ name: 'aggregated', entityType: 'note', observations: ['one route'] }] } });
      expect(resultText(await via.client.callTool({ name: 'memory__read_graph', arguments: {} }))).toContain('aggregated');
      await expect(via.client.callTool({ name: 'nobody__echo', arguments: {} })).rejects.toThrow(/Unknown tool: nobody__echo/);
      await expect(via.client.callTool({ name: 'echo', arguments: {} })).rejects.toThrow(/Unknown tool: echo/);
    } finally {
      await Promise.allSettled([via.client.close(), ev.close()]);
    }
  }, 60_000);

  it('the upstream receives its own name, in the body and in Mcp-Name, never the shown one', async () => {
    const via = await connectClient(stage.url(ALL), await stage.token(ALL));
    try {
      const before = hop.requests.length;
      await via.client.callTool({ name: 'everything__echo', arguments: { message: 'recorded' } });
      const calls = hop.requests.slice(before).filter((r) => r.body.toString().includes('"tools/call"'));
      expect(calls).toHaveLength(1);
      const body = JSON.parse(calls[0]!.body.toString()) as { params: { name: string; arguments: unknown } };
      expect(body.params).toEqual({ name: 'echo', arguments: { message: 'recorded' } });
      const header = (name: string) => calls[0]!.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
      expect(header('mcp-name')).toEqual(['echo']);
      expect(header('mcp-method')).toEqual(['tools/call']);
      expect(header('authorization')).toEqual([]);
      expect(hop.requests.every((r) => !r.body.toString().includes('everything__'))).toBe(true);
    } finally {
      await via.client.close();
    }
  }, 30_000);

  it('a session is its principal\'s: another principal presenting its id is refused', async () => {
    const alice = await connectClient(stage.url(ALL), await stage.token(ALL, 'alice'));
    try {
      const res = await fetch(stage.url(ALL), {
        method: 'POST',
        headers: { authorization: `Bearer ${await stage.token(ALL, 'mallory')}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': alice.transport.sessionId! },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(await res.text()).not.toContain('everything__');
    } finally {
      await alice.client.close();
    }
  }, 30_000);
});

describe('rules, filtering and renames on shown names', () => {
  it('a deny on a shown name and match: { upstream } hold for calls and for the filtered list; a rename is shown and routed', async () => {
    const reader = await connectClient(stage.url(RULED), await stage.token(RULED, 'alice', 'mcp:read'));
    const writer = await connectClient(stage.url(RULED), await stage.token(RULED, 'alice', 'mcp:read mcp:write'));
    try {
      const readerTools = (await reader.client.listTools()).tools.map((t) => t.name);
      expect(readerTools).toContain('get-sum.everything');
      expect(readerTools).not.toContain('echo.everything');
      expect(readerTools.some((n) => n.endsWith('.memory') || n === 'graph')).toBe(false);
      const writerTools = (await writer.client.listTools()).tools.map((t) => t.name);
      expect(writerTools).toContain('create_entities.memory');
      expect(writerTools).toContain('graph');
      expect(writerTools).not.toContain('read_graph.memory');
      await expect(writer.client.callTool({ name: 'echo.everything', arguments: { message: 'x' } })).rejects.toThrow(/denied|policy|403/i);
      await expect(reader.client.callTool({ name: 'graph', arguments: {} })).rejects.toThrow(/insufficient_scope|403|scope/i);
      expect(resultText(await writer.client.callTool({ name: 'graph', arguments: {} }))).toContain('entities');
    } finally {
      await Promise.allSettled([reader.client.close(), writer.client.close()]);
    }
  }, 60_000);
});

describe('failure isolation', () => {
  it('an upstream cut off mid-session is left out of lists and fails its calls; the other is served; it comes back without a restart', async () => {
    const via = await connectClient(stage.url(FLAKY), await stage.token(FLAKY));
    try {
      const names = async () => (await via.client.listTools()).tools.map((t) => t.name);
      expect(await names()).toEqual(expect.arrayContaining(['far__echo', 'memory__read_graph']));
      await flaky.off();
      const without = await names();
      expect(without).toContain('memory__read_graph');
      expect(without.some((n) => n.startsWith('far__'))).toBe(false);
      await expect(via.client.callTool({ name: 'far__echo', arguments: { message: 'x' } })).rejects.toThrow(/Upstream far is unavailable/);
      expect(resultText(await via.client.callTool({ name: 'memory__read_graph', arguments: {} }))).toContain('entities');
      const metrics = await (await fetch(`${stage.gw.url}/metrics`)).text();
      expect(metrics).toMatch(/mag_aggregate_upstream_up\{route="\/flaky\/mcp",upstream="far"\} 0/);
      expect(metrics).toMatch(/mag_aggregate_left_out_total\{route="\/flaky\/mcp",upstream="far"\} [1-9]/);
      await flaky.on();
      await waitFor(async () => (await names()).includes('far__echo'), 20_000, 'far to come back');
      expect(resultText(await via.client.callTool({ name: 'far__echo', arguments: { message: 'back' } }))).toContain('back');
    } finally {
      await via.client.close();
    }
  }, 60_000);

  it("one caller's call that outlives the upstream's timeout fails alone: the upstream stays in lists and serves the next call", async () => {
    const via = await connectClient(stage.url(FLAKY), await stage.token(FLAKY, 'slow-caller'));
    try {
      await expect(via.client.callTool({ name: 'far__trigger-long-running-operation', arguments: { duration: 5, steps: 1 } })).rejects.toThrow(/Upstream far is unavailable/);
      expect((await via.client.listTools()).tools.map((t) => t.name)).toContain('far__echo');
      expect(resultText(await via.client.callTool({ name: 'far__echo', arguments: { message: 'still here' } }))).toContain('still here');
    } finally {
      await via.client.close();
    }
  }, 30_000);

  it("a stdio upstream whose process is killed mid-session fails that session's calls only, and a new process serves the session later", async () => {
    const memoryProcesses = () => descendantsOf(process.pid).filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('server-memory');
      } catch {
        return false;
      }
    });
    const before = new Set(memoryProcesses());
    // The session's initialize starts its own server-memory process: the one new since.
    const via = await connectClient(stage.url(FLAKY), await stage.token(FLAKY, 'kill-test'));
    const bystander = await connectClient(stage.url(FLAKY), await stage.token(FLAKY, 'bystander'));
    try {
      await via.client.callTool({ name: 'memory__create_entities', arguments: { entities: [{ name: 'before-kill', entityType: 'note', observations: [] }] } });
      const mine = memoryProcesses().filter((pid) => !before.has(pid)).sort((a, b) => a - b);
      expect(mine).toHaveLength(2);
      const target = mine[0]!; // the first session's, started by the first initialize
      process.kill(target, 'SIGKILL');
      await waitFor(() => !memoryProcesses().includes(target), 10_000, 'the process to end');
      await expect(via.client.callTool({ name: 'memory__read_graph', arguments: {} })).rejects.toThrow(/Upstream memory is unavailable/);
      expect((await via.client.listTools()).tools.some((t) => t.name.startsWith('memory__'))).toBe(false);
      // Another principal's session, its own process, is served throughout.
      expect((await bystander.client.listTools()).tools.map((t) => t.name)).toContain('memory__read_graph');
      expect(resultText(await bystander.client.callTool({ name: 'memory__read_graph', arguments: {} }))).toContain('entities');
      await waitFor(async () => (await via.client.listTools()).tools.some((t) => t.name === 'memory__read_graph'), 20_000, 'memory to come back');
      expect(resultText(await via.client.callTool({ name: 'memory__read_graph', arguments: {} }))).toContain('entities');
    } finally {
      await Promise.allSettled([via.client.close(), bystander.client.close()]);
    }
  }, 60_000);
});
