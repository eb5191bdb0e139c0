/**
 * Requests of a server to the client through an aggregated route (issue 22 item 3): two unmodified
 * server-everything processes behind recording hops, one route, driven by the TS SDK client with
 * sampling, elicitation and roots handlers. Each upstream numbers its own requests from 0, so
 * their ids meet; the client sees ids of the gateway's (distinct), and each answer reaches the
 * upstream session that asked, with that upstream's own id, and no other upstream.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resultText, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const ALL = '/all/mcp';
let servers: UpstreamHandle[] = [];
let hops: Record<'a' | 'b', RecordingHop>;
let stage: StdioStage;

beforeAll(async () => {
  servers = await Promise.all([startEverythingServer(), startEverythingServer()]);
  const [a, b] = await Promise.all(servers.map((s) => startRecordingHop(s.url)));
  hops = { a: a!, b: b! };
  stage = await startStdioStage({ [ALL]: { upstreams: { a: { upstream: hops.a.url }, b: { upstream: hops.b.url } } } });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([...Object.values(hops ?? {}).map((h) => h.close()), ...servers.map((s) => s.close())]);
});

interface Seen {
  method: string;
  id: string | number;
}

/** The SDK client announcing sampling, elicitation and roots; what its handlers were asked is in `seen`. */
async function connect(roots: { uri: string; name: string }[]): Promise<{ client: Client; seen: Seen[]; roots: typeof roots }> {
  const seen: Seen[] = [];
  const client = new Client({ name: 'asker', version: '1' }, { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } });
  client.setRequestHandler(CreateMessageRequestSchema, (req, extra) => {
    seen.push({ method: req.method, id: extra.requestId });
    const text = (req.params.messages[0]!.content as { text: string }).text;
    return { model: 'test-model', role: 'assistant', content: { type: 'text', text: `sampled(${text})` } };
  });
  client.setRequestHandler(ElicitRequestSchema, (req, extra) => {
    seen.push({ method: req.method, id: extra.requestId });
    return { action: 'accept', content: { name: 'Ada Lovelace', check: true } };
  });
  client.setRequestHandler(ListRootsRequestSchema, (req, extra) => {
    seen.push({ method: req.method, id: extra.requestId });
    return { roots };
  });
  const transport = new StreamableHTTPClientTransport(new URL(stage.url(ALL)), { requestInit: { headers: { authorization: `Bearer ${await stage.token(ALL)}` } } });
  await client.connect(transport);
  return { client, seen, roots };
}

interface Posted {
  id?: unknown;
  method?: string;
  result?: Record<string, unknown>;
}
/** The client's answers (messages without a method) the hop saw POSTed to its server. */
const answersAt = (hop: RecordingHop) =>
  hop.requests
    .filter((r) => r.method === 'POST' && r.body.length > 0)
    .map((r) => JSON.parse(r.body.toString('utf8')) as Posted)
    .filter((m) => m.method === undefined);

describe('requests of the upstreams to the client through an aggregated route', () => {
  it('roots: both upstreams ask the client, under ids of the gateway, and each gets the answer with its own id', async () => {
    const { client, seen } = await connect([{ uri: 'file:///work/project', name: 'project' }]);
    const beforeA = answersAt(hops.a).length;
    const beforeB = answersAt(hops.b).length;
    // server-everything asks for roots 350 ms after initialized, on its GET stream.
    await waitFor(() => seen.filter((s) => s.method === 'roots/list').length >= 2, 15_000, 'roots asked by both upstreams');
    await waitFor(() => answersAt(hops.a).length > beforeA && answersAt(hops.b).length > beforeB, 10_000, 'roots answered to both');
    const ids = seen.filter((s) => s.method === 'roots/list').map((s) => s.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(String(id)).toMatch(/^mag-/);
    // Each upstream received one answer, with the id it gave its request, and the roots as the client sent them.
    for (const hop of [hops.a, hops.b]) {
      const answer = answersAt(hop).at(-1)!;
      expect(typeof answer.id).toBe('number');
      expect(answer.result).toEqual({ roots: [{ uri: 'file:///work/project', name: 'project' }] });
    }
    expect(resultText(await client.callTool({ name: 'a__get-roots-list', arguments: {} }))).toContain('file:///work/project');
    await client.close();
  });

  it('sampling on both upstreams at once: each answer returns to the upstream that asked, and only to it', async () => {
    const { client, seen } = await connect([]);
    await client.listTools();
    const sampledAt = (hop: RecordingHop) => answersAt(hop).filter((m) => m.result?.model !== undefined);
    const before = { a: sampledAt(hops.a).length, b: sampledAt(hops.b).length };
    const [ra, rb] = await Promise.all([
      client.callTool({ name: 'a__trigger-sampling-request', arguments: { prompt: 'from-a' } }),
      client.callTool({ name: 'b__trigger-sampling-request', arguments: { prompt: 'from-b' } }),
    ]);
    expect(JSON.stringify(ra)).toContain('sampled(Resource trigger-sampling-request context: from-a)');
    expect(JSON.stringify(ra)).not.toContain('from-b');
    expect(JSON.stringify(rb)).toContain('sampled(Resource trigger-sampling-request context: from-b)');
    expect(JSON.stringify(rb)).not.toContain('from-a');
    const sampled = seen.filter((s) => s.method === 'sampling/createMessage');
    expect(sampled).toHaveLength(2);
    expect(sampled[0]!.id).not.toEqual(sampled[1]!.id);
    // One sampling answer more at each upstream, under an id of its own numbering, never the client's.
    const newA = sampledAt(hops.a).slice(before.a);
    const newB = sampledAt(hops.b).slice(before.b);
    expect(newA).toHaveLength(1);
    expect(newB).toHaveLength(1);
    expect(JSON.stringify(newA[0]!.result)).toContain('from-a');
    expect(JSON.stringify(newB[0]!.result)).toContain('from-b');
    for (const m of [...newA, ...newB]) expect(typeof m.id).toBe('number');
    await client.close();
  });

  it('elicitation: the form reaches the client and its accepted content reaches the upstream', async () => {
    const { client, seen } = await connect([]);
    await client.listTools();
    const result = await client.callTool({ name: 'b__trigger-elicitation-request', arguments: {} });
    expect(JSON.stringify(result)).toContain('Name: Ada Lovelace');
    expect(seen.filter((s) => s.method === 'elicitation/create')).toHaveLength(1);
    await client.close();
  });

  it("roots/list_changed from the client reaches every upstream, which ask again and see the new roots", async () => {
    const { client, seen, roots } = await connect([{ uri: 'file:///first', name: 'first' }]);
    await waitFor(() => seen.filter((s) => s.method === 'roots/list').length >= 2, 15_000, 'first roots');
    roots.splice(0, 1, { uri: 'file:///second', name: 'second' });
    await client.sendRootsListChanged();
    await waitFor(() => seen.filter((s) => s.method === 'roots/list').length >= 4, 15_000, 'roots asked again by both');
    for (const name of ['a', 'b']) expect(resultText(await client.callTool({ name: `${name}__get-roots-list`, arguments: {} }))).toContain('file:///second');
    await client.close();
  });
});
