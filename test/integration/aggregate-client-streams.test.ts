/**
 * What the upstreams of an aggregated route send the client besides answers (issue 22,
 * docs/aggregation.md), with two unmodified server-everything processes behind recording hops
 * and the TS SDK as client:
 * - a client that never opens a GET stream gets the progress of its calls and the upstreams'
 *   sampling and elicitation requests on each call's own answer stream (an event stream, since
 *   something came before the answer), and its answers reach the upstream that asked, under
 *   that upstream's id; a call with nothing to say first is answered as JSON;
 * - logging: logging/setLevel reaches every upstream, their notifications/message reach the
 *   client;
 * - resources: `subscribe` is announced (server-everything has it), a subscription goes to the
 *   upstream that listed the URI, its notifications/resources/updated reach the client;
 * - an upstream restarted (killed, started again at its port) is joined afresh and told again
 *   the client's logging level and subscriptions, whose updates then reach the client.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema, LoggingMessageNotificationSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readPostAnswer, type RpcMessage } from '../helpers/post-answer.js';
import { connectClient, resultText, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const ALL = '/all/mcp';
const LONG = 'a__trigger-long-running-operation';
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

/** The JSON-RPC messages a hop saw POSTed to its server. */
const posted = (hop: RecordingHop) => hop.requests.filter((r) => r.method === 'POST' && r.body.length > 0).map((r) => JSON.parse(r.body.toString('utf8')) as RpcMessage);

/** The SDK client whose transport never gets a GET stream (its GET answered 405 before it leaves the process), with sampling and elicitation handlers. */
async function clientWithoutGetStream(): Promise<{ client: Client; asked: { method: string; id: string | number }[]; gets: () => number; end(): Promise<void> }> {
  let gets = 0;
  const noGet = (url: string | URL, init?: RequestInit) => ((init?.method ?? 'GET') === 'GET' ? (gets++, Promise.resolve(new Response(null, { status: 405 }))) : fetch(url, init));
  const transport = new StreamableHTTPClientTransport(new URL(stage.url(ALL)), { requestInit: { headers: { authorization: `Bearer ${await stage.token(ALL)}` } }, fetch: noGet });
  const client = new Client({ name: 'no-get', version: '1' }, { capabilities: { sampling: {}, elicitation: {} } });
  const asked: { method: string; id: string | number }[] = [];
  client.setRequestHandler(CreateMessageRequestSchema, (req, extra) => {
    asked.push({ method: req.method, id: extra.requestId });
    const text = (req.params.messages[0]!.content as { text: string }).text;
    return { model: 'test-model', role: 'assistant', content: { type: 'text', text: `sampled(${text})` } };
  });
  client.setRequestHandler(ElicitRequestSchema, (req, extra) => {
    asked.push({ method: req.method, id: extra.requestId });
    return { action: 'accept', content: { name: 'Ada Lovelace', check: true } };
  });
  await client.connect(transport);
  // Each session ends with its test: the restart below counts what the gateway tells that upstream.
  const end = async () => (await transport.terminateSession(), await client.close());
  return { client, asked, gets: () => gets, end };
}

describe("a client without a GET stream gets what belongs to its calls on each call's own stream", () => {
  it('progress of a long call: every step, as it comes, before the answer', async () => {
    const { client, gets, end } = await clientWithoutGetStream();
    await client.listTools();
    const events: string[] = [];
    const result = client.callTool({ name: LONG, arguments: { duration: 1.2, steps: 4 } }, undefined, { onprogress: (p) => void events.push(`progress ${p.progress}/${p.total}`) });
    await waitFor(() => events.length > 0, 10_000, 'first progress');
    expect(events.length).toBeLessThan(4); // the first came while the call ran
    expect(resultText(await result)).toContain('Steps: 4.');
    expect(events).toEqual(['progress 1/4', 'progress 2/4', 'progress 3/4', 'progress 4/4']);
    expect(gets()).toBeGreaterThan(0); // it tried, and was told there is none
    await end();
  });

  it('sampling on both upstreams at once and an elicitation: each request on its call, each answer to the upstream that asked, under its id', async () => {
    const { client, asked, end } = await clientWithoutGetStream();
    await client.listTools();
    const sampledAt = (hop: RecordingHop) => posted(hop).filter((m) => m.method === undefined && (m.result as { model?: string } | undefined)?.model !== undefined);
    const before = { a: sampledAt(hops.a).length, b: sampledAt(hops.b).length };
    const [ra, rb] = await Promise.all([
      client.callTool({ name: 'a__trigger-sampling-request', arguments: { prompt: 'from-a' } }),
      client.callTool({ name: 'b__trigger-sampling-request', arguments: { prompt: 'from-b' } }),
    ]);
    expect(JSON.stringify(ra)).toContain('sampled(Resource trigger-sampling-request context: from-a)');
    expect(JSON.stringify(rb)).toContain('sampled(Resource trigger-sampling-request context: from-b)');
    for (const [hop, mine, other, n] of [[hops.a, 'from-a', 'from-b', before.a], [hops.b, 'from-b', 'from-a', before.b]] as const) {
      const answers = sampledAt(hop).slice(n);
      expect(answers).toHaveLength(1);
      expect(typeof answers[0]!.id).toBe('number');
      expect(JSON.stringify(answers[0]!.result)).toContain(mine);
      expect(JSON.stringify(answers[0]!.result)).not.toContain(other);
    }
    expect(JSON.stringify(await client.callTool({ name: 'b__trigger-elicitation-request', arguments: {} }))).toContain('Name: Ada Lovelace');
    expect(asked.map((a) => a.method).sort()).toEqual(['elicitation/create', 'sampling/createMessage', 'sampling/createMessage']);
    for (const a of asked) expect(String(a.id)).toMatch(/^mag-/);
    expect(new Set(asked.map((a) => a.id)).size).toBe(3);
    await end();
  });

  it('on the wire: an event stream when progress goes before the answer (the answer last), JSON when nothing does or the client takes only JSON', async () => {
    const token = await stage.token(ALL);
    const base = { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'mcp-protocol-version': '2025-06-18' };
    const both = { ...base, accept: 'application/json, text/event-stream' };
    const init = await fetch(stage.url(ALL), { method: 'POST', headers: both, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }) });
    const session = { 'mcp-session-id': init.headers.get('mcp-session-id')! };
    await init.body?.cancel();
    const post = (accept: string, body: unknown) => fetch(stage.url(ALL), { method: 'POST', headers: { ...base, ...session, accept }, body: JSON.stringify(body) });
    expect((await post(both.accept, { jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
    const long = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: LONG, arguments: { duration: 0.4, steps: 2 }, _meta: { progressToken: `t${id}` } } });

    const streamed = await post(both.accept, long(2));
    expect(streamed.headers.get('content-type')).toBe('text/event-stream');
    const before: RpcMessage[] = [];
    const answer = (await readPostAnswer(streamed, before)) as RpcMessage;
    expect(before.map((m) => [m.method, m.params?.progressToken, m.params?.progress])).toEqual([
      ['notifications/progress', 't2', 1],
      ['notifications/progress', 't2', 2],
    ]);
    expect(answer.id).toBe(2);
    expect(JSON.stringify(answer.result)).toContain('Steps: 2.');

    const plain = await post(both.accept, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'a__echo', arguments: { message: 'hi' } } });
    expect(plain.headers.get('content-type')).toBe('application/json');
    expect(JSON.stringify(await plain.json())).toContain('Echo: hi');

    const jsonOnly = await post('application/json', long(4));
    expect(jsonOnly.headers.get('content-type')).toBe('application/json');
    expect(JSON.stringify(await jsonOnly.json())).toContain('Steps: 2.');
    expect((await fetch(stage.url(ALL), { method: 'DELETE', headers: { ...base, ...session } })).status).toBe(200);
  });
});

describe('logging and resource subscriptions through an aggregated route', () => {
  it("logging/setLevel reaches every upstream; an upstream's logging messages reach the client", async () => {
    const { client, transport } = await connectClient(stage.url(ALL), await stage.token(ALL));
    const logs: { level: string; data: unknown }[] = [];
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void logs.push(n.params));
    expect(client.getServerCapabilities()?.logging).toEqual({});
    const levels = (hop: RecordingHop) => posted(hop).filter((m) => m.method === 'logging/setLevel').length;
    const before = { a: levels(hops.a), b: levels(hops.b) };
    await client.setLoggingLevel('debug');
    expect(levels(hops.a)).toBe(before.a + 1);
    expect(levels(hops.b)).toBe(before.b + 1);
    expect(resultText(await client.callTool({ name: 'b__toggle-simulated-logging', arguments: {} }))).toMatch(/Started/);
    // server-everything sends one at once (on its session's GET stream), then one every 5 s.
    await waitFor(() => logs.length > 0, 10_000, 'a logging message');
    // server-everything picks a random level; its alert reads "Alert level-message".
    expect(String(logs[0]!.data)).toMatch(/[- ]level[- ]message - SessionId /);
    await client.callTool({ name: 'b__toggle-simulated-logging', arguments: {} });
    await transport.terminateSession();
    await client.close();
  });

  it('subscribe is announced; a subscription goes to the upstream that listed the URI, and its updates reach the client until unsubscribed', async () => {
    const { client, transport } = await connectClient(stage.url(ALL), await stage.token(ALL));
    expect(client.getServerCapabilities()?.resources).toMatchObject({ subscribe: true, listChanged: true });
    const updated: string[] = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri));
    const uri = (await client.listResources()).resources[0]!.uri;
    const subscribes = (hop: RecordingHop, method: string) => posted(hop).filter((m) => m.method === method && m.params?.uri === uri).length;
    const before = { a: subscribes(hops.a, 'resources/subscribe'), b: subscribes(hops.b, 'resources/subscribe') };
    await client.subscribeResource({ uri });
    // Both servers list it; the first in configuration order (a) serves it, and only a is asked.
    expect(subscribes(hops.a, 'resources/subscribe')).toBe(before.a + 1);
    expect(subscribes(hops.b, 'resources/subscribe')).toBe(before.b);
    await client.callTool({ name: 'a__toggle-subscriber-updates', arguments: {} });
    await waitFor(() => updated.includes(uri), 10_000, 'resources/updated');
    const unsubscribed = subscribes(hops.a, 'resources/unsubscribe');
    await client.unsubscribeResource({ uri });
    expect(subscribes(hops.a, 'resources/unsubscribe')).toBe(unsubscribed + 1);
    await client.callTool({ name: 'a__toggle-subscriber-updates', arguments: {} });
    await transport.terminateSession();
    await client.close();
  });

  it('an upstream restarted at its port is joined afresh and told again the level and the subscription: its updates reach the same client session', async () => {
    const { client, transport } = await connectClient(stage.url(ALL), await stage.token(ALL));
    const updated: string[] = [];
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri));
    await client.setLoggingLevel('info');
    const uri = (await client.listResources()).resources[0]!.uri;
    await client.subscribeResource({ uri });
    const mark = posted(hops.a).length;
    const port = Number(new URL(servers[0]!.url).port);
    await servers[0]!.close();
    servers[0] = await startEverythingServer('streamableHttp', port);
    // No request of the client's: the gateway finds its session forgotten and opens a new one, telling it again.
    await waitFor(() => posted(hops.a).slice(mark).some((m) => m.method === 'resources/subscribe'), 30_000, 'the subscription told again');
    const told = posted(hops.a).slice(mark).map((m) => m.method).filter((m) => m !== undefined && !m.startsWith('notifications/'));
    // An initialize sent while the restarted server was not yet listening may be tried again first.
    const joined = told.lastIndexOf('initialize');
    expect(told.slice(0, joined).every((m) => m === 'initialize')).toBe(true);
    expect(told.slice(joined)).toEqual(['initialize', 'logging/setLevel', 'resources/subscribe']);
    await client.callTool({ name: 'a__toggle-subscriber-updates', arguments: {} });
    await waitFor(() => updated.includes(uri), 10_000, 'resources/updated from the restarted upstream');
    expect(transport.sessionId).toBeDefined();
    await transport.terminateSession();
    await client.close();
  }, 90_000);
});
