/**
 * The matrix for one route in front of several servers (DESIGN §8.2, issue 22): the
 * unmodified server-everything over Streamable HTTP and over legacy HTTP+SSE, server-memory and
 * server-filesystem over stdio, behind /four/mcp, driven by the TS SDK and by the Python SDK (mcp
 * 2.3.0, test/clients/python/list_server.py) and compared with each server reached directly by the
 * same SDK: every tool, prompt, resource and template, all pages, shown names mapped back; every
 * resource read; prompts and calls answered as directly. Then the SSE server killed mid-session and
 * started again at its port (its tools leave and come back, the others are served throughout), and
 * two principals behind the same route, each with their own stdio processes.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectClient, resultText, serverBin, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';
import { ensurePythonSdk, venvPython } from '../tools/python-sdk.js';

const ROUTE = '/four/mcp';
const UPSTREAMS = ['http', 'sse', 'memory', 'files'] as const;
type Upstream = (typeof UPSTREAMS)[number];

let root: string;
let everything: UpstreamHandle;
let everythingSse: UpstreamHandle;
let stage: StdioStage;

const memoryArgs = () => [serverBin('@modelcontextprotocol/server-memory')];
const filesArgs = () => [serverBin('@modelcontextprotocol/server-filesystem'), root];

beforeAll(async () => {
  ensurePythonSdk();
  root = mkdtempSync(join(tmpdir(), 'mag-agg-files-'));
  writeFileSync(join(root, 'note.txt'), 'one route, four servers\n');
  [everything, everythingSse] = await Promise.all([startEverythingServer(), startEverythingServer('sse')]);
  stage = await startStdioStage({
    [ROUTE]: {
      upstreams: {
        http: { upstream: everything.url },
        sse: { upstream: { sse: everythingSse.url }, limits: { upstream_timeout: '5s' } },
        memory: { upstream: { stdio: { command: process.execPath, args: memoryArgs(), env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } },
        files: { upstream: { stdio: { command: process.execPath, args: filesArgs() } } },
      },
    },
  });
}, 120_000);

afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([everything?.close(), everythingSse?.close()]);
  if (root) rmSync(root, { recursive: true, force: true });
});

/** A fresh memory file per direct connection: each aggregated session's process starts empty too. */
const freshMemoryFile = () => join(mkdtempSync(join(tmpdir(), 'mag-agg-mem-')), 'memory.jsonl');

function directTransport(upstream: Upstream): Transport {
  if (upstream === 'http') return new StreamableHTTPClientTransport(new URL(everything.url));
  if (upstream === 'sse') return new SSEClientTransport(new URL(everythingSse.url));
  if (upstream === 'memory') return new StdioClientTransport({ command: process.execPath, args: memoryArgs(), env: { MEMORY_FILE_PATH: freshMemoryFile() }, stderr: 'ignore' });
  return new StdioClientTransport({ command: process.execPath, args: filesArgs(), stderr: 'ignore' });
}

type Page = { nextCursor?: string } & Record<string, unknown>;
type Named = { name: string };

/** Every page of a list; a list the server does not offer (-32601) is empty, as the route shows it. */
async function every<T>(list: (cursor?: string) => Promise<Page>, member: string): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | undefined;
  do {
    const page = await list(cursor).catch((err: unknown) => {
      if (String(err).includes('-32601')) return { [member]: [] } as Page;
      throw err;
    });
    items.push(...(page[member] as T[]));
    cursor = page.nextCursor;
  } while (cursor);
  return items;
}

interface Survey {
  tools: Named[];
  prompts: Named[];
  resources: { uri: string }[];
  templates: unknown[];
}

async function survey(client: Client): Promise<Survey> {
  return {
    tools: await every<Named>((cursor) => client.listTools({ cursor }), 'tools'),
    prompts: await every<Named>((cursor) => client.listPrompts({ cursor }), 'prompts'),
    resources: await every<{ uri: string }>((cursor) => client.listResources({ cursor }), 'resources'),
    templates: await every<unknown>((cursor) => client.listResourceTemplates({ cursor }), 'resourceTemplates'),
  };
}

const shown = <T extends Named>(items: T[], upstream: string) => items.map((t) => ({ ...t, name: `${upstream}__${t.name}` }));
const byName = <T extends Named>(items: T[]) => [...items].sort((a, b) => a.name.localeCompare(b.name));
/** What the route lists of several upstreams' resources: each URI once, from the first upstream in configuration order that lists it. */
const firstOfEachUri = (lists: { uri: string }[][]) => lists.flat().filter((r, i, all) => all.findIndex((x) => x.uri === r.uri) === i);

/** The same requests, by shown name through the route and by own name directly. */
const PROMPTS = [{ upstream: 'http', name: 'simple-prompt' }, { upstream: 'sse', name: 'simple-prompt' }] as const;
const CALLS = [
  { upstream: 'http', name: 'echo', arguments: { message: 'over streamable http' } },
  { upstream: 'sse', name: 'echo', arguments: { message: 'over legacy sse' } },
  { upstream: 'http', name: 'get-sum', arguments: { a: 2, b: 3 } },
  { upstream: 'memory', name: 'read_graph', arguments: {} },
  { upstream: 'files', name: 'list_allowed_directories', arguments: {} },
  { upstream: 'files', name: 'read_text_file', arguments: { path: 'NOTE' } },
] as const;
const callArguments = (args: Record<string, unknown>) => (args.path === 'NOTE' ? { path: join(root, 'note.txt') } : args);

describe('four servers behind one route, TS SDK: what the client sees equals each server reached directly', () => {
  it('every tool, prompt, resource and template of every page; every resource reads as directly; prompts and calls as directly', async () => {
    const via = await connectClient(stage.url(ROUTE), await stage.token(ROUTE));
    const direct = Object.fromEntries(await Promise.all(UPSTREAMS.map(async (u) => {
      const client = new Client({ name: 'direct', version: '1' });
      await client.connect(directTransport(u));
      return [u, client] as const;
    }))) as Record<Upstream, Client>;
    try {
      const route = await survey(via.client);
      const each = Object.fromEntries(await Promise.all(UPSTREAMS.map(async (u) => [u, await survey(direct[u])] as const))) as Record<Upstream, Survey>;
      expect(each.http.tools.length).toBeGreaterThan(5);
      expect(each.sse.tools.length).toBeGreaterThan(5);
      expect(each.memory.tools.length).toBeGreaterThan(3);
      expect(each.files.tools.length).toBeGreaterThan(3);
      expect(byName(route.tools)).toEqual(byName(UPSTREAMS.flatMap((u) => shown(each[u].tools, u))));
      expect(byName(route.prompts)).toEqual(byName(UPSTREAMS.flatMap((u) => shown(each[u].prompts, u))));
      // Both everything servers list the same URIs: shown once, served by the first (http).
      expect(each.sse.resources.length).toBeGreaterThan(1);
      expect(route.resources).toEqual(firstOfEachUri(UPSTREAMS.map((u) => each[u].resources)));
      expect(route.templates).toEqual(UPSTREAMS.flatMap((u) => each[u].templates));
      const servedBy = new Map(UPSTREAMS.slice().reverse().flatMap((u) => each[u].resources.map((r) => [r.uri, direct[u]] as const)));
      for (const { uri } of route.resources) expect(await via.client.readResource({ uri })).toEqual(await servedBy.get(uri)!.readResource({ uri }));
      for (const p of PROMPTS) expect(await via.client.getPrompt({ name: `${p.upstream}__${p.name}` })).toEqual(await direct[p.upstream].getPrompt({ name: p.name }));
      for (const c of CALLS) {
        const args = callArguments(c.arguments);
        expect(await via.client.callTool({ name: `${c.upstream}__${c.name}`, arguments: args }), c.name).toEqual(await direct[c.upstream].callTool({ name: c.name, arguments: args }));
      }
    } finally {
      await Promise.allSettled([via.client.close(), ...Object.values(direct).map((c) => c.close())]);
    }
  }, 120_000);
});

const execPython = promisify(execFile);
const script = new URL('../clients/python/list_server.py', import.meta.url).pathname;

interface PySurvey {
  tools: Named[];
  prompts: Named[];
  resources: { uri: string }[];
  templates: unknown[];
  reads: unknown[];
  got: unknown[];
  calls: unknown[];
}

/** The Python SDK's survey of one server: the route (with a token) or a server directly. */
async function pythonSurvey(target: Record<string, unknown>): Promise<PySurvey> {
  const { stdout } = await execPython(venvPython, [script, JSON.stringify(target)], { timeout: 90_000, maxBuffer: 32 * 1024 * 1024 });
  return JSON.parse(stdout) as PySurvey;
}

function pythonDirect(upstream: Upstream, requests: { prompts: unknown[]; calls: unknown[] }): Record<string, unknown> {
  if (upstream === 'http') return { http: everything.url, ...requests };
  if (upstream === 'sse') return { sse: everythingSse.url, ...requests };
  const env = upstream === 'memory' ? { MEMORY_FILE_PATH: freshMemoryFile() } : {};
  return { stdio: { command: process.execPath, args: upstream === 'memory' ? memoryArgs() : filesArgs(), env }, ...requests };
}

describe('four servers behind one route, Python SDK: the same survey through the route as of each server directly', () => {
  it('lists of every page, reads, prompts and calls compare with the four direct surveys', async () => {
    const own = (u: Upstream) => ({
      prompts: PROMPTS.filter((p) => p.upstream === u).map((p) => ({ name: p.name })),
      calls: CALLS.filter((c) => c.upstream === u).map((c) => ({ name: c.name, arguments: callArguments(c.arguments) })),
    });
    const throughRoute = {
      http: stage.url(ROUTE),
      token: await stage.token(ROUTE),
      prompts: UPSTREAMS.flatMap((u) => own(u).prompts.map((p) => ({ ...p, name: `${u}__${p.name}` }))),
      calls: UPSTREAMS.flatMap((u) => own(u).calls.map((c) => ({ ...c, name: `${u}__${c.name}` }))),
    };
    const [route, ...directs] = await Promise.all([pythonSurvey(throughRoute), ...UPSTREAMS.map((u) => pythonSurvey(pythonDirect(u, own(u))))]);
    const each = Object.fromEntries(UPSTREAMS.map((u, i) => [u, directs[i]!])) as Record<Upstream, PySurvey>;
    expect(each.http.tools.length).toBeGreaterThan(5);
    expect(byName(route.tools)).toEqual(byName(UPSTREAMS.flatMap((u) => shown(each[u].tools, u))));
    expect(byName(route.prompts)).toEqual(byName(UPSTREAMS.flatMap((u) => shown(each[u].prompts, u))));
    expect(route.resources).toEqual(firstOfEachUri(UPSTREAMS.map((u) => each[u].resources)));
    expect(route.templates).toEqual(UPSTREAMS.flatMap((u) => each[u].templates));
    // Reads: the route's resources are the http server's (first on every clash) and the others'.
    const directReads = new Map(UPSTREAMS.slice().reverse().flatMap((u) => each[u].resources.map((r, i) => [r.uri, each[u].reads[i]] as const)));
    expect(route.reads).toEqual(route.resources.map((r) => directReads.get(r.uri)));
    expect(route.got).toEqual(UPSTREAMS.flatMap((u) => each[u].got));
    expect(route.calls).toEqual(UPSTREAMS.flatMap((u) => each[u].calls));
  }, 180_000);
});

describe('an upstream killed mid-session and started again', () => {
  it('its tools leave the lists and its calls fail; the others are served throughout; it comes back in the same session', async () => {
    const via = await connectClient(stage.url(ROUTE), await stage.token(ROUTE, 'restart-test'));
    const names = async () => (await via.client.listTools()).tools.map((t) => t.name);
    try {
      expect(await names()).toEqual(expect.arrayContaining(['http__echo', 'sse__echo', 'memory__read_graph', 'files__read_text_file']));
      const port = Number(new URL(everythingSse.url).port);
      await everythingSse.close();
      await waitFor(async () => !(await names()).some((n) => n.startsWith('sse__')), 30_000, 'the killed server to leave the list');
      const without = await names();
      expect(without).toEqual(expect.arrayContaining(['http__echo', 'memory__read_graph', 'files__read_text_file']));
      await expect(via.client.callTool({ name: 'sse__echo', arguments: { message: 'x' } })).rejects.toThrow(/Upstream sse is unavailable/);
      expect(resultText(await via.client.callTool({ name: 'http__echo', arguments: { message: 'unaffected' } }))).toContain('unaffected');
      expect(resultText(await via.client.callTool({ name: 'files__list_allowed_directories', arguments: {} }))).toContain(root);
      everythingSse = await startEverythingServer('sse', port);
      await waitFor(async () => (await names()).includes('sse__echo'), 30_000, 'the restarted server to come back');
      expect(resultText(await via.client.callTool({ name: 'sse__echo', arguments: { message: 'back' } }))).toContain('back');
    } finally {
      await via.client.close();
    }
  }, 90_000);
});

describe('two principals behind the same route', () => {
  it('each has their own stdio processes: what one writes to server-memory the other never reads', async () => {
    const alice = await connectClient(stage.url(ROUTE), await stage.token(ROUTE, 'alice'));
    const bob = await connectClient(stage.url(ROUTE), await stage.token(ROUTE, 'bob'));
    try {
      await alice.client.callTool({ name: 'memory__create_entities', arguments: { entities: [{ name: 'alice-secret', entityType: 'note', observations: ['only alice'] }] } });
      await bob.client.callTool({ name: 'memory__create_entities', arguments: { entities: [{ name: 'bob-note', entityType: 'note', observations: ['only bob'] }] } });
      const aliceGraph = resultText(await alice.client.callTool({ name: 'memory__read_graph', arguments: {} }));
      const bobGraph = resultText(await bob.client.callTool({ name: 'memory__read_graph', arguments: {} }));
      expect(aliceGraph).toContain('alice-secret');
      expect(aliceGraph).not.toContain('bob-note');
      expect(bobGraph).toContain('bob-note');
      expect(bobGraph).not.toContain('alice-secret');
      // Bob presenting Alice's session id is refused, and learns nothing of her graph.
      const res = await fetch(stage.url(ROUTE), {
        method: 'POST',
        headers: { authorization: `Bearer ${await stage.token(ROUTE, 'bob')}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': alice.transport.sessionId!, 'mcp-protocol-version': '2025-06-18' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'memory__read_graph', arguments: {} } }),
      });
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(await res.text()).not.toContain('alice-secret');
    } finally {
      await Promise.allSettled([alice.client.close(), bob.client.close()]);
    }
  }, 60_000);
});
