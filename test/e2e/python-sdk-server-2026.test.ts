/**
 * A published server that speaks the 2026-07-28 wire, the official Python SDK's MCPServer (mcp
 * 2.3.0, test/tools/py/wire_2026_server.py), directly and behind a route of the real gateway
 * (DESIGN §8.4, issue 24 item 4): server/discover alike, an InputRequiredResult round trip with the
 * SDK's sealed requestState, each retry judged anew, subscriptions/listen carrying a resource
 * update, a listen watching what the caller may not read refused, and the SDK's own refusals
 * (404/-32601, 400/-32020, its answer to a GET) reaching the client as it sent them. Over stdio and
 * legacy HTTP+SSE, where one user's requests share one upstream session, each goes upstream under an
 * id of the gateway's: two with the same id in flight at once, a call reusing an open listen's id,
 * progress under one token, each answered as its own; closing a listen cancels it upstream.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/net.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { serverBin, waitFor } from '../helpers/stdio-stage.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';
import { ensurePythonSdk, venvPython } from '../tools/python-sdk.js';
import { post2026, readEventsUntil, WIRE_2026, type Wire2026Options } from '../helpers/wire-2026.js';

const VERSION = WIRE_2026;
const ROUTE = '/py/mcp';
/** The same server, started by the gateway over stdio. */
const STDIO = '/py-stdio/mcp';
/** A legacy (handshake-era) stdio server: server-memory. */
const LEGACY_STDIO = '/memory/mcp';
/** The same server over the legacy HTTP+SSE transport. */
const SSE = '/py-sse/mcp';
/** A legacy (handshake-era) server over HTTP+SSE: server-everything. */
const LEGACY_SSE = '/everything-sse/mcp';
/** The SSE server again, with the default upstream_timeout: requests held open at once. */
const IDS_SSE = '/py-sse-ids/mcp';
const script = join(dirname(fileURLToPath(import.meta.url)), '..', 'tools', 'py', 'wire_2026_server.py');

let child: ChildProcess;
let sseChild: ChildProcess;
let everything: UpstreamHandle;
let direct: string;
let issuer: TestIssuer;
let gw: TestGateway;
let reader: string;
let writer: string;
const readers: Record<string, string> = {};
const writers: Record<string, string> = {};

beforeAll(async () => {
  ensurePythonSdk();
  const port = await freePort();
  child = spawn(venvPython, ['-u', script, String(port)], { stdio: ['ignore', 'ignore', 'pipe'] });
  direct = `http://127.0.0.1:${port}/mcp`;
  await waitFor(async () => (await fetch(direct, { method: 'POST' }).catch(() => undefined)) !== undefined, 30_000, 'the Python SDK server listening');
  const ssePort = await freePort();
  sseChild = spawn(venvPython, ['-u', script, 'sse', String(ssePort)], { stdio: ['ignore', 'ignore', 'pipe'] });
  const sseUrl = `http://127.0.0.1:${ssePort}/sse`;
  await waitFor(async () => (await fetch(`http://127.0.0.1:${ssePort}/messages/`, { method: 'POST' }).catch(() => undefined)) !== undefined, 30_000, 'the Python SDK SSE server listening');
  everything = await startEverythingServer('sse');
  issuer = await startTestIssuer('RS256');
  const rules = [
    { match: { method: 'resources/read', uri: 'file:///secret/**' }, require_scopes: ['mcp:write'] },
    { match: { method: 'tools/call', tool: 'greet' }, require_scopes: ['mcp:write'] },
  ];
  gw = await startTestGateway({
    'gateway.yaml': gatewayYaml({ log_level: 'warn' }),
    'py.yaml': jwtRoute(ROUTE, direct, issuer, { rules }),
    'py-stdio.yaml': { ...jwtRoute(STDIO, direct, issuer, { rules, limits: { max_get_streams_per_user: 1 } }), upstream: { stdio: { command: venvPython, args: ['-u', script, 'stdio'] } } },
    // A short upstream_timeout: a listen, once acknowledged, outlives it.
    'py-sse.yaml': { ...jwtRoute(SSE, direct, issuer, { rules, limits: { upstream_timeout: '2s', max_get_streams_per_user: 1 } }), upstream: { sse: sseUrl } },
    'py-sse-ids.yaml': { ...jwtRoute(IDS_SSE, direct, issuer, { rules }), upstream: { sse: sseUrl } },
    'everything-sse.yaml': { ...jwtRoute(LEGACY_SSE, direct, issuer), upstream: { sse: everything.url } },
    'memory.yaml': { ...jwtRoute(LEGACY_STDIO, direct, issuer), upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } },
  });
  for (const path of [ROUTE, STDIO, LEGACY_STDIO, SSE, LEGACY_SSE, IDS_SSE]) {
    readers[path] = await issuer.mint({ aud: resourceOf(path), sub: 'reader', client_id: 'app', scope: 'mcp:read' });
    writers[path] = await issuer.mint({ aud: resourceOf(path), sub: 'writer', client_id: 'app', scope: 'mcp:read mcp:write' });
  }
  reader = readers[ROUTE]!;
  writer = writers[ROUTE]!;
}, 120_000);

afterAll(async () => {
  await gw?.stop();
  await issuer?.close();
  child?.kill();
  sseChild?.kill();
  await everything?.close();
});

type Target = 'direct' | 'gateway';

/** A 2026-07-28 request, directly or through the gateway (with a token: the writer's unless given). */
function send(target: Target, method: string, params: Record<string, unknown> = {}, options: Wire2026Options & { path?: string } = {}): Promise<Response> {
  const path = options.path ?? ROUTE;
  const url = target === 'direct' ? direct : `${gw.url}${path}`;
  return post2026(url, method, params, { capabilities: { elicitation: {} }, ...options, token: target === 'gateway' ? (options.token ?? writers[path]) : undefined });
}

interface RpcAnswer {
  id?: unknown;
  result?: { resultType?: string; requestState?: string; [member: string]: unknown };
  error?: { code: number; message: string };
}
/** The answer's status and JSON-RPC body, sent as JSON or (the gateway's stdio bridge) as an event stream ending in it. */
const answer = async (res: Response) => {
  const text = await res.text();
  const json = res.headers.get('content-type')?.startsWith('text/event-stream') ? text.match(/^data: (.*)$/gm)!.at(-1)!.slice('data: '.length) : text;
  return { status: res.status, body: JSON.parse(json) as RpcAnswer };
};

describe('the Python SDK server (2026-07-28) behind the gateway', () => {
  it('server/discover answers alike', async () => {
    const [d, g] = [await answer(await send('direct', 'server/discover')), await answer(await send('gateway', 'server/discover'))];
    expect(d).toMatchObject({ status: 200, body: { result: { supportedVersions: [VERSION] } } });
    expect(g).toEqual(d);
  });

  it('an InputRequiredResult round trip completes through the gateway, and the retry is judged as a new request', async () => {
    const first = await answer(await send('gateway', 'tools/call', { name: 'greet', arguments: {} }));
    expect(first.body.result).toMatchObject({ resultType: 'input_required', inputRequests: { name: { method: 'elicitation/create' } } });
    const retry = { name: 'greet', arguments: {}, inputResponses: { name: { action: 'accept', content: { name: 'Ada' } } }, requestState: first.body.result?.requestState };
    const refused = await send('gateway', 'tools/call', retry, { token: reader });
    expect(refused.status).toBe(403);
    await refused.body?.cancel();
    expect(await answer(await send('gateway', 'tools/call', retry))).toMatchObject({ status: 200, body: { result: { content: [{ text: 'Hello, Ada' }] } } });
  });

  it('subscriptions/listen carries a resource update through the gateway; watching what the caller may not read is refused', async () => {
    const refused = await send('gateway', 'subscriptions/listen', { notifications: { resourceSubscriptions: ['file:///secret/key.txt'] } }, { token: reader });
    expect(refused.status).toBe(403);
    await refused.body?.cancel();

    const aborted = new AbortController();
    const res = await send('gateway', 'subscriptions/listen', { notifications: { resourceSubscriptions: ['file:///public/readme.txt'] } }, { token: reader, signal: aborted.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    await readEventsUntil(res, (t) => t.includes('notifications/subscriptions/acknowledged'));
    expect((await answer(await send('gateway', 'tools/call', { name: 'touch', arguments: { uri: 'file:///public/readme.txt' } }, { token: reader }))).status).toBe(200);
    const update = await readEventsUntil(res, (t) => t.includes('notifications/resources/updated'));
    expect(update).toContain('"uri":"file:///public/readme.txt"');
    aborted.abort();
  });

  it("the SDK's own refusals reach the client as it sent them", async () => {
    const unknown = [await answer(await send('direct', 'ping')), await answer(await send('gateway', 'ping'))];
    expect(unknown[0]).toMatchObject({ status: 404, body: { error: { code: -32601 } } });
    expect(unknown[1]).toEqual(unknown[0]);
    const get = [await fetch(direct), await fetch(`${gw.url}${ROUTE}`, { headers: { authorization: `Bearer ${writer}`, accept: 'text/event-stream' } })];
    const [d, g] = await Promise.all(get.map(async (r) => ({ status: r.status, error: ((JSON.parse(await r.text()) as { error?: { code: number } }).error ?? {}).code })));
    expect(g).toEqual(d);
    // A mismatch the gateway sees first: refused with the SDK's status and code, never forwarded.
    const mismatch = [await answer(await send('direct', 'tools/list', {}, { headers: { 'mcp-method': 'prompts/list' } })), await answer(await send('gateway', 'tools/list', {}, { headers: { 'mcp-method': 'prompts/list' } }))];
    expect(mismatch.map((m) => [m.status, m.body.error?.code])).toEqual([[400, -32020], [400, -32020]]);
  });
});

describe.each([
  ['stdio, started by the gateway', STDIO],
  ['the legacy HTTP+SSE transport', SSE],
])('the same server over %s (probed with server/discover, so spoken to as modern)', (_transport, STDIO) => {
  it('server/discover answers as the server does over HTTP', async () => {
    const [d, g] = [await answer(await send('direct', 'server/discover')), await answer(await send('gateway', 'server/discover', {}, { path: STDIO }))];
    expect(g).toEqual(d);
  });

  it("subscriptions/listen carries a resource update, named by the client's listen id; watching what the caller may not read is refused", async () => {
    const refused = await send('gateway', 'subscriptions/listen', { notifications: { resourceSubscriptions: ['file:///secret/key.txt'] } }, { path: STDIO, token: readers[STDIO] });
    expect(refused.status).toBe(403);
    await refused.body?.cancel();

    const aborted = new AbortController();
    const res = await send('gateway', 'subscriptions/listen', { notifications: { resourceSubscriptions: ['file:///public/readme.txt'] } }, { path: STDIO, token: readers[STDIO], signal: aborted.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    const ack = await readEventsUntil(res, (t) => t.includes('notifications/subscriptions/acknowledged'));
    // post2026 sends id 1: the process saw an id of the gateway's, the client reads its own.
    expect(ack).toContain('"io.modelcontextprotocol/subscriptionId":1');
    // One open listen is this user's whole share here (max_get_streams_per_user: 1): a second is 429.
    const second = await send('gateway', 'subscriptions/listen', { notifications: { toolsListChanged: true } }, { path: STDIO, token: readers[STDIO], id: 3 });
    expect(second.status).toBe(429);
    expect(second.headers.get('retry-after')).toBeTruthy();
    await second.body?.cancel();
    // Past the SSE route's upstream_timeout (2 s): the listen is held open, not timed out.
    if (STDIO === SSE) await new Promise((resolve) => setTimeout(resolve, 3_000));
    // The listen's own id (1): it went upstream under an id of the gateway's, and so does this call.
    const touched = await answer(await send('gateway', 'tools/call', { name: 'touch', arguments: { uri: 'file:///public/readme.txt' } }, { path: STDIO, token: readers[STDIO], id: 1 }));
    expect(touched).toMatchObject({ status: 200, body: { result: { content: [{ text: 'touched file:///public/readme.txt' }] } } });
    const update = await readEventsUntil(res, (t) => t.includes('notifications/resources/updated'));
    expect(update).toContain('"uri":"file:///public/readme.txt"');
    aborted.abort();
  });

  it("the SDK's refusal of a method it does not serve reaches the client as over HTTP (404, -32601)", async () => {
    const unknown = [await answer(await send('direct', 'ping')), await answer(await send('gateway', 'ping', {}, { path: STDIO }))];
    expect(unknown[0]).toMatchObject({ status: 404, body: { error: { code: -32601 } } });
    expect(unknown[1]).toMatchObject({ status: 404, body: { error: { code: -32601 } } });
  });
});

describe.each([
  ['stdio (server-memory)', LEGACY_STDIO, 'read_graph'],
  ['HTTP+SSE (server-everything)', LEGACY_SSE, 'get-sum'],
])('a legacy (handshake era) server over %s for a 2026-07-28 client, initialized by the gateway', (_server, path, tool) => {
  it('subscriptions/listen, which it does not serve, is 404 with -32601, as a modern server without it answers; its tools still work', async () => {
    const listen = await answer(await send('gateway', 'subscriptions/listen', { notifications: { toolsListChanged: true } }, { path }));
    expect(listen).toMatchObject({ status: 404, body: { jsonrpc: '2.0', id: 1, error: { code: -32601 } } });
    const args = tool === 'get-sum' ? { a: 2, b: 3 } : {};
    const called = await answer(await send('gateway', 'tools/call', { name: tool, arguments: args }, { path, headers: { accept: 'application/json' } }));
    expect(called).toMatchObject({ status: 200, body: { result: { content: [{ type: 'text' }] } } });
  });
});

/** What the Python server itself got (its `seen` tool): the ids of the listens it was sent, and the request ids it was told were cancelled. */
async function seenBy(path: string, token: string): Promise<{ listens: Array<{ id: unknown }>; cancelled: unknown[] }> {
  const seen = await answer(await send('gateway', 'tools/call', { name: 'seen', arguments: {} }, { path, token, id: 'seen' }));
  return JSON.parse((seen.body.result?.content as Array<{ text: string }>)[0]!.text) as { listens: Array<{ id: unknown }>; cancelled: unknown[] };
}

describe.each([
  ['stdio', STDIO],
  ['the legacy HTTP+SSE transport', IDS_SSE],
])("one user's requests over %s share one upstream session, each under an id of the gateway's", (_transport, path) => {
  // The writer: on the stdio route, a process (and a listen share) of its own.
  const token = () => writers[path]!;

  it('two requests with the same id in flight at once are each answered, under that id, with its own answer', async () => {
    // `meet` answers only once two calls of it are in flight at once.
    const meet = async (text: string) => answer(await send('gateway', 'tools/call', { name: 'meet', arguments: { text } }, { path, token: token(), id: 7 }));
    const [first, second] = await Promise.all([meet('first app'), meet('second app')]);
    expect(first).toMatchObject({ status: 200, body: { id: 7, result: { content: [{ text: 'first app' }] } } });
    expect(second).toMatchObject({ status: 200, body: { id: 7, result: { content: [{ text: 'second app' }] } } });
  });

  it("a call may use an open listen's id; closing the listen cancels it upstream, under the id the server was sent", async () => {
    const aborted = new AbortController();
    const listen = await send('gateway', 'subscriptions/listen', { notifications: { resourceSubscriptions: ['file:///public/readme.txt'] } }, { path, token: token(), id: 'shared', signal: aborted.signal });
    expect(listen.status).toBe(200);
    const ack = await readEventsUntil(listen, (t) => t.includes('notifications/subscriptions/acknowledged'));
    expect(ack).toContain('"io.modelcontextprotocol/subscriptionId":"shared"');
    // The latest listen the server got is this one (the tests of a file run one at a time).
    const upstreamId = (await seenBy(path, token())).listens.at(-1)!.id;
    expect(upstreamId).not.toBe('shared');
    const touched = await answer(await send('gateway', 'tools/call', { name: 'touch', arguments: { uri: 'file:///public/readme.txt' } }, { path, token: token(), id: 'shared' }));
    expect(touched).toMatchObject({ status: 200, body: { id: 'shared', result: { content: [{ text: 'touched file:///public/readme.txt' }] } } });
    const update = await readEventsUntil(listen, (t) => t.includes('notifications/resources/updated'));
    expect(update).toContain('"io.modelcontextprotocol/subscriptionId":"shared"');
    aborted.abort();
    await waitFor(async () => (await seenBy(path, token())).cancelled.includes(upstreamId), 20_000, 'the listen cancelled upstream');
    expect((await seenBy(path, token())).cancelled).not.toContain('shared');
  }, 40_000);

  it("the client's own notifications/cancelled for its listen reaches the server under the id the server was sent", async () => {
    const aborted = new AbortController();
    const listen = await send('gateway', 'subscriptions/listen', { notifications: { toolsListChanged: true } }, { path, token: token(), id: 'mine', signal: aborted.signal });
    expect(listen.status).toBe(200);
    await readEventsUntil(listen, (t) => t.includes('notifications/subscriptions/acknowledged'));
    const upstreamId = (await seenBy(path, token())).listens.at(-1)!.id;
    const cancel = await fetch(`${gw.url}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token()}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': VERSION, 'mcp-method': 'notifications/cancelled' },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'mine', reason: 'done' } }),
    });
    expect(cancel.status).toBe(202);
    await waitFor(async () => (await seenBy(path, token())).cancelled.includes(upstreamId), 20_000, 'the listen cancelled upstream');
    aborted.abort();
  }, 40_000);
});

/** The rest of a body part of which readEventsUntil already read. */
async function readRest(res: Response): Promise<string> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += decoder.decode(chunk.value, { stream: true });
  return text;
}

/** The JSON-RPC messages of an event stream's text. */
const eventsOf = (text: string) => (text.match(/^data: (.*)$/gm) ?? []).map((line) => JSON.parse(line.slice('data: '.length)) as { id?: unknown; method?: string; params?: Record<string, unknown>; result?: { content?: Array<{ text: string }> } });

describe('a legacy server over HTTP+SSE (server-everything): two requests of one user with the same id and progress token at once', () => {
  it('each gets its own progress and its own answer, under its own id and token', async () => {
    const call = (steps: number) =>
      send('gateway', 'tools/call', { name: 'trigger-long-running-operation', arguments: { duration: steps, steps } }, { path: LEGACY_SSE, id: 9, meta: { progressToken: 'p' } });
    const long = await call(4);
    expect(long.status).toBe(200);
    // The second is sent while the first is still working (its first progress came, three to go).
    const started = await readEventsUntil(long, (t) => t.includes('notifications/progress'));
    const short = await call(2);
    const [longRest, shortText] = await Promise.all([readRest(long), short.text()]);
    for (const [events, steps] of [[eventsOf(started + longRest), 4], [eventsOf(shortText), 2]] as const) {
      const progress = events.filter((e) => e.method === 'notifications/progress');
      expect(progress.map((e) => e.params)).toEqual(Array.from({ length: steps }, (_, i) => ({ progress: i + 1, total: steps, progressToken: 'p' })));
      const answers = events.filter((e) => e.method === undefined);
      expect(answers).toHaveLength(1);
      expect(answers[0]).toMatchObject({ id: 9 });
      expect(answers[0]!.result!.content![0]!.text).toContain(`Steps: ${steps}.`);
    }
  }, 40_000);
});
