/**
 * Aggregated routes, issue 22 (DESIGN §8.2): reads of URIs only a resource template covers,
 * `completion/complete`, traces and metrics per upstream, and `match: { upstream }` on resources,
 * prompts and completions. Two unmodified server-everything over Streamable HTTP (each behind a
 * recording hop, to see which one a request reached and with which name) and server-memory over
 * stdio behind one route, the TS SDK as the client, compared with server-everything reached
 * directly; spans exported over OTLP to a real receiver in this test.
 */
import { randomBytes } from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { connectClient, serverBin, startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const TC = '/tc/mcp';
const MEM = '/mem/mcp';
const RULED = '/ruled/mcp';
const TEMPLATE = 'demo://resource/dynamic/text/{resourceId}';
const memory = { upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } };

let first: UpstreamHandle;
let second: UpstreamHandle;
let hopFirst: RecordingHop;
let hopSecond: RecordingHop;
let receiver: OtlpReceiver;
let stage: StdioStage;

beforeAll(async () => {
  [first, second, receiver] = await Promise.all([startEverythingServer(), startEverythingServer(), startOtlpReceiver()]);
  [hopFirst, hopSecond] = await Promise.all([startRecordingHop(first.url), startRecordingHop(second.url)]);
  stage = await startStdioStage(
    {
      [TC]: { upstreams: { first: { upstream: hopFirst.url }, second: { upstream: hopSecond.url }, mem: memory } },
      [MEM]: { upstreams: { mem: memory } },
      [RULED]: {
        upstreams: { mem: memory, every: { upstream: first.url } },
        rules: [
          { match: { upstream: 'every', method: 'resources/read' }, deny: true },
          { match: { upstream: 'every', method: 'prompts/get' }, deny: true },
          { match: { upstream: 'every', method: 'completion/complete' }, deny: true },
        ],
      },
    },
    { OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/` },
  );
}, 90_000);

afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([hopFirst?.close(), hopSecond?.close(), first?.close(), second?.close(), receiver?.close()]);
});

async function direct(url: string): Promise<Client> {
  const client = new Client({ name: 'direct', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

/** A dynamic resource's contents without the time it was made at (server-everything stamps each read). */
function untimed(result: { contents: Record<string, unknown>[] }) {
  const at = / created at .*$/;
  return result.contents.map((c) => ({ ...c, ...(typeof c.text === 'string' && { text: c.text.replace(at, '') }), ...(typeof c.blob === 'string' && { blob: Buffer.from(c.blob, 'base64').toString('utf8').replace(at, '') }) }));
}

/** The JSON-RPC bodies a hop forwarded for `method`. */
const bodies = (hop: RecordingHop, method: string) =>
  hop.requests.map((r) => r.body.toString('utf8')).filter((b) => b.includes(`"method":"${method}"`)).map((b) => JSON.parse(b) as { params?: Record<string, unknown> });

describe('reads of URIs only a template covers', () => {
  it('go to the first upstream (configuration order) whose template matches, read as directly; the clash is logged once; a URI nothing covers is -32002', async () => {
    const via = await connectClient(stage.url(TC), await stage.token(TC));
    const ev = await direct(first.url);
    try {
      const listed = (await via.client.listResources()).resources.map((r) => r.uri);
      const templates = (await via.client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
      expect(templates.filter((t) => t === TEMPLATE)).toHaveLength(2); // both servers list it
      const reads = ['demo://resource/dynamic/text/7', 'demo://resource/dynamic/text/12', 'demo://resource/dynamic/blob/3'];
      for (const uri of reads) {
        expect(listed).not.toContain(uri);
        const [through, directly] = await Promise.all([via.client.readResource({ uri }), ev.readResource({ uri })]);
        expect(untimed(through)).toEqual(untimed(directly));
        expect(untimed(through)[0]).toMatchObject({ uri, mimeType: 'text/plain' });
      }
      expect(bodies(hopFirst, 'resources/read').map((b) => b.params?.uri)).toEqual(reads);
      expect(bodies(hopSecond, 'resources/read')).toEqual([]);
      const clashes = stage.gw.logs.filter((l) => l.includes('resource templates of two upstreams match one URI'));
      expect(clashes).toHaveLength(2); // one per pair of templates (text, blob), not per read
      await expect(via.client.readResource({ uri: 'nothing://covers/this' })).rejects.toThrow(/-32002|Resource not found/);
    } finally {
      await Promise.allSettled([via.client.close(), ev.close()]);
    }
  }, 60_000);
});

describe('completion/complete', () => {
  it('a ref/prompt by shown name reaches its upstream with the upstream’s own name; a ref/resource template the upstream that lists it; answers as directly', async () => {
    const via = await connectClient(stage.url(TC), await stage.token(TC));
    const ev = await direct(second.url);
    try {
      expect(via.client.getServerCapabilities()?.completions).toEqual({});
      const prompt = { argument: { name: 'department', value: 'E' } };
      const viaPrompt = await via.client.complete({ ref: { type: 'ref/prompt', name: 'second__completable-prompt' }, ...prompt });
      expect(viaPrompt).toEqual(await ev.complete({ ref: { type: 'ref/prompt', name: 'completable-prompt' }, ...prompt }));
      expect(viaPrompt.completion.values).toEqual(['Engineering']);
      expect(bodies(hopSecond, 'completion/complete').map((b) => b.params?.ref)).toEqual([{ type: 'ref/prompt', name: 'completable-prompt' }]);
      const withContext = { ref: { type: 'ref/prompt' as const, name: 'completable-prompt' }, argument: { name: 'name', value: '' }, context: { arguments: { department: 'Sales' } } };
      expect(await via.client.complete({ ...withContext, ref: { ...withContext.ref, name: 'second__completable-prompt' } })).toEqual(await ev.complete(withContext));

      const resource = { ref: { type: 'ref/resource' as const, uri: TEMPLATE }, argument: { name: 'resourceId', value: '1' } };
      expect(await via.client.complete(resource)).toEqual(await ev.complete(resource));
      expect(bodies(hopFirst, 'completion/complete').map((b) => b.params?.ref)).toEqual([resource.ref]);
      await expect(via.client.complete({ ref: { type: 'ref/prompt', name: 'nobody__x' }, argument: { name: 'a', value: '' } })).rejects.toThrow(/-32602|Unknown prompt/);
    } finally {
      await Promise.allSettled([via.client.close(), ev.close()]);
    }
  }, 60_000);

  it('a route none of whose upstreams offers completions announces none', async () => {
    const via = await connectClient(stage.url(MEM), await stage.token(MEM));
    try {
      expect(via.client.getServerCapabilities()?.completions).toBeUndefined();
      expect(via.client.getServerCapabilities()?.resources).toBeDefined();
    } finally {
      await via.client.close();
    }
  }, 30_000);
});

describe('match: { upstream } on resources, prompts and completions', () => {
  it('a read routed to the named upstream (listed or by template) is denied by policy, the other upstream’s read is not; its prompts and completions too', async () => {
    const via = await connectClient(stage.url(RULED), await stage.token(RULED));
    try {
      const graph = await via.client.readResource({ uri: 'memory://knowledge-graph' });
      expect(graph.contents[0]?.uri).toBe('memory://knowledge-graph');
      const listed = (await via.client.listResources()).resources.map((r) => r.uri).find((u) => u.startsWith('demo://'))!;
      for (const uri of [listed, 'demo://resource/dynamic/text/5']) await expect(via.client.readResource({ uri })).rejects.toThrow(/denied by policy/);
      await expect(via.client.getPrompt({ name: 'every__simple-prompt' })).rejects.toThrow(/denied by policy/);
      await expect(via.client.complete({ ref: { type: 'ref/prompt', name: 'every__completable-prompt' }, argument: { name: 'department', value: '' } })).rejects.toThrow(/denied by policy/);
      await expect(via.client.complete({ ref: { type: 'ref/resource', uri: TEMPLATE }, argument: { name: 'resourceId', value: '' } })).rejects.toThrow(/denied by policy/);
    } finally {
      await via.client.close();
    }
  }, 60_000);
});

describe('traces and metrics per upstream', () => {
  it('a routed call’s server span names its upstream; a merged list has a span per upstream; durations and errors are counted per upstream', async () => {
    const traceId = randomBytes(16).toString('hex');
    const token = await stage.token(TC);
    const transport = new StreamableHTTPClientTransport(new URL(stage.url(TC)), { requestInit: { headers: { authorization: `Bearer ${token}`, traceparent: `00-${traceId}-${randomBytes(8).toString('hex')}-01` } } });
    const client = new Client({ name: 'traced', version: '1' });
    await client.connect(transport);
    try {
      await client.getPrompt({ name: 'second__simple-prompt' });
      await client.listTools();
      // server-everything refuses a resource id that is not a number with a JSON-RPC error.
      await expect(client.readResource({ uri: 'demo://resource/dynamic/text/not-a-number' })).rejects.toThrow(/Unknown resource|-32/);
    } finally {
      await client.close();
    }
    const inTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
    await receiver.waitFor(() => inTrace().filter((s) => s.name === 'tools/list' && s.kind === 1).length === 3 && inTrace().some((s) => s.attributes['gen_ai.prompt.name'] === 'second__simple-prompt'));
    const promptSpan = inTrace().find((s) => s.kind === 2 && s.attributes['gen_ai.prompt.name'] === 'second__simple-prompt')!;
    expect(promptSpan.attributes['mag.upstream.name']).toBe('second');
    const listSpan = inTrace().find((s) => s.kind === 2 && s.attributes['mcp.method.name'] === 'tools/list')!;
    expect(listSpan.attributes['mag.upstream.name']).toBeUndefined();
    const perUpstream = inTrace().filter((s) => s.parentSpanId === listSpan.spanId && s.name === 'tools/list');
    expect(perUpstream.map((s) => s.attributes['mag.upstream.name']).sort()).toEqual(['first', 'mem', 'second']);
    // The upstream's own HTTP exchange is a child of its upstream's span.
    const firstList = perUpstream.find((s) => s.attributes['mag.upstream.name'] === 'first')!;
    expect(inTrace().some((s) => s.parentSpanId === firstList.spanId && s.kind === 3)).toBe(true);

    const metrics = await (await fetch(`${stage.gw.url}/metrics`)).text();
    for (const upstream of ['first', 'second', 'mem']) expect(metrics).toMatch(new RegExp(`mag_aggregate_upstream_request_duration_seconds_count\\{route="/tc/mcp",upstream="${upstream}"\\} [1-9]`));
    expect(metrics).toMatch(/mag_aggregate_upstream_errors_total\{route="\/tc\/mcp",upstream="first",reason="rpc_error"\} [1-9]/);
  }, 60_000);
});
