/**
 * A published server that speaks the 2026-07-28 wire, the official Python SDK's MCPServer (mcp
 * 2.3.0, test/tools/py/wire_2026_server.py), directly and behind a route of the real gateway
 * (DESIGN §8.4, issue 24 item 4): server/discover alike, an InputRequiredResult round trip with the
 * SDK's sealed requestState, each retry judged anew, subscriptions/listen carrying a resource
 * update, a listen watching what the caller may not read refused, and the SDK's own refusals
 * (404/-32601, 400/-32020, its answer to a GET) reaching the client as it sent them.
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
    'everything-sse.yaml': { ...jwtRoute(LEGACY_SSE, direct, issuer), upstream: { sse: everything.url } },
    'memory.yaml': { ...jwtRoute(LEGACY_STDIO, direct, issuer), upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } },
  });
  for (const path of [ROUTE, STDIO, LEGACY_STDIO, SSE, LEGACY_SSE]) {
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
    // Another id than the listen's (1): on the legacy SSE transport the server holds one id space per session.
    const touched = await answer(await send('gateway', 'tools/call', { name: 'touch', arguments: { uri: 'file:///public/readme.txt' } }, { path: STDIO, token: readers[STDIO], id: 2 }));
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
