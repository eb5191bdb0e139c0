/**
 * Legacy SSE upstreams misbehaving (issue 14): an endpoint on another origin,
 * no endpoint at all, the GET stream dropped mid-session, a request never
 * answered, and the bounds the gateway keeps meanwhile. The upstreams are the
 * scripted legacy server (test/helpers/legacy-sse-server.ts), since a real one
 * does none of this on demand; the client is plain fetch, so every status is seen.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startLegacySseServer, type LegacySseServer } from '../helpers/legacy-sse-server.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';

let issuer: TestIssuer;
let gw: TestGateway;
const servers: Record<'good' | 'foreign' | 'relative' | 'silent' | 'refusing', LegacySseServer> = {} as never;
const tokens: Record<string, string> = {};

const ROUTES = ['good', 'foreign', 'relative', 'silent', 'refusing'] as const;
const INITIALIZE = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } };

beforeAll(async () => {
  issuer = await startTestIssuer('RS256');
  servers.good = await startLegacySseServer();
  // Another port on the same host is another origin, as are another host and a protocol-relative URL.
  servers.foreign = await startLegacySseServer({ endpoint: (id, origin) => `${origin.replace(/:\d+$/, ':1')}/message?sessionId=${id}` });
  servers.relative = await startLegacySseServer({ endpoint: (id) => `//evil.example/message?sessionId=${id}` });
  servers.silent = await startLegacySseServer({ endpoint: () => undefined });
  servers.refusing = await startLegacySseServer({ refusePost: true });
  const files: Record<string, unknown> = { 'gateway.yaml': gatewayYaml() };
  for (const name of ROUTES) {
    files[`${name}.yaml`] = jwtRoute(`/${name}/mcp`, '', issuer, { upstream: { sse: servers[name].url }, limits: { upstream_timeout: '1s', max_body_bytes: 65536 } });
  }
  gw = await startTestGateway(files);
  for (const name of ROUTES) tokens[name] = await issuer.mint({ aud: resourceOf(`/${name}/mcp`), sub: 'alice' });
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([issuer?.close(), ...Object.values(servers).map((s) => s.close())]);
});

function post(route: (typeof ROUTES)[number], body: unknown, session?: string): Promise<Response> {
  return fetch(`${gw.url}/${route}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${tokens[route]}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(session !== undefined && { 'mcp-session-id': session }),
    },
    body: JSON.stringify(body),
  });
}

async function initialize(route: (typeof ROUTES)[number]): Promise<string> {
  const res = await post(route, INITIALIZE);
  expect(res.status).toBe(200);
  expect(await res.json()).toMatchObject({ id: 0, result: { serverInfo: { name: 'scripted-legacy-sse' } } });
  return res.headers.get('mcp-session-id')!;
}

const upstreamErrors = async (route: string, kind: string): Promise<number> => {
  const text = await gw.metrics.registry.metrics();
  const line = text.split('\n').find((l) => l.startsWith(`mag_upstream_errors_total{route="/${route}/mcp",kind="${kind}"}`));
  return line === undefined ? 0 : Number(line.split(' ').pop());
};

const waitFor = async (check: () => boolean, ms = 3000) => {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('the endpoint event', () => {
  it.each(['foreign', 'relative'] as const)('naming another origin (%s): 502, logged, nothing POSTed anywhere, the stream closed', async (route) => {
    const res = await post(route, INITIALIZE);
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual({ error: 'bad_gateway', error_description: 'upstream endpoint is not on the origin of its SSE URL' });
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(servers[route].requests.map((r) => r.method)).toEqual(['GET']);
    await waitFor(() => servers[route].openStreams() === 0);
    expect(gw.logs.join('')).toContain('upstream endpoint is not on the origin of its SSE URL');
    expect(await upstreamErrors(route, 'protocol')).toBeGreaterThanOrEqual(1);
  });

  it('never sent: 504 within upstream_timeout, and the stream is closed', async () => {
    const started = Date.now();
    const res = await post('silent', INITIALIZE);
    expect(res.status).toBe(504);
    expect(await res.json()).toMatchObject({ error: 'gateway_timeout' });
    expect(Date.now() - started).toBeLessThan(3000);
    await waitFor(() => servers.silent.openStreams() === 0);
    expect(await upstreamErrors('silent', 'timeout')).toBe(1);
  });
});

describe('a session', () => {
  it('whose initialize the upstream refuses is not kept: 502, and its upstream stream is closed at once', async () => {
    const res = await post('refusing', INITIALIZE);
    expect(res.status).toBe(502);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(await upstreamErrors('refusing', 'protocol')).toBe(1);
    await waitFor(() => servers.refusing.openStreams() === 0);
  });

  it('without a session id: a POST that is not initialize goes to the principal\'s own session (2026-07-28), a GET is 400', async () => {
    const res = await post('good', { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    expect(await res.json()).toMatchObject({ id: 1, result: { echo: 'tools/list' } });
    const get = await fetch(`${gw.url}/good/mcp`, { headers: { authorization: `Bearer ${tokens.good}`, accept: 'text/event-stream' } });
    expect(get.status).toBe(400);
  });

  it('a session-less request to an upstream that refuses the gateway\'s initialize: 502, and its stream is closed', async () => {
    const res = await post('refusing', { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(res.status).toBe(502);
    await waitFor(() => servers.refusing.openStreams() === 0);
  });

  it('a session-less request to an upstream that never sends its endpoint: 504 within upstream_timeout', async () => {
    const res = await post('silent', { jsonrpc: '2.0', id: 1, method: 'tools/list' });
    expect(res.status).toBe(504);
    await waitFor(() => servers.silent.openStreams() === 0);
  });

  it('answers a request by id; a request never answered gets 504 at upstream_timeout and a cancellation upstream', async () => {
    const session = await initialize('good');
    const ok = await post('good', { jsonrpc: '2.0', id: 'a', method: 'tools/list' }, session);
    expect(await ok.json()).toEqual({ jsonrpc: '2.0', id: 'a', result: { echo: 'tools/list' } });
    const hang = await post('good', { jsonrpc: '2.0', id: 7, method: 'hang' }, session);
    expect(hang.status).toBe(504);
    await waitFor(() => servers.good.requests.some((r) => r.body.includes('notifications/cancelled') && r.body.includes('"requestId":7')));
    // The session goes on.
    const again = await post('good', { jsonrpc: '2.0', id: 8, method: 'ping' }, session);
    expect(await again.json()).toEqual({ jsonrpc: '2.0', id: 8, result: { echo: 'ping' } });
  });

  it('answers a batch as one JSON array, each answer matched by id', async () => {
    const session = await initialize('good');
    const res = await post('good', [{ jsonrpc: '2.0', id: 1, method: 'a' }, { jsonrpc: '2.0', method: 'notifications/x' }, { jsonrpc: '2.0', id: '1', method: 'b' }], session);
    const answers = (await res.json()) as Array<{ id: unknown; result: unknown }>;
    expect(answers).toHaveLength(2);
    expect(answers).toEqual(expect.arrayContaining([{ jsonrpc: '2.0', id: 1, result: { echo: 'a' } }, { jsonrpc: '2.0', id: '1', result: { echo: 'b' } }]));
  });

  it('ends when the upstream drops its GET stream: the client GET stream ends, a waiting POST gets 502, then the id is 404 and a new session works', async () => {
    const session = await initialize('good');
    const stream = await fetch(`${gw.url}/good/mcp`, { headers: { authorization: `Bearer ${tokens.good}`, 'mcp-session-id': session, accept: 'text/event-stream' } });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe('text/event-stream');
    const waiting = post('good', { jsonrpc: '2.0', id: 1, method: 'hang' }, session);
    await waitFor(() => servers.good.requests.some((r) => r.body.includes('"hang"')));
    const before = await upstreamErrors('good', 'reset');
    // Every session of the route still open (earlier tests' too) loses its stream, and each is counted.
    const dropped = servers.good.openStreams();
    servers.good.dropStreams();
    const answer = await waiting;
    expect(answer.status).toBe(502);
    expect(await answer.json()).toEqual({ error: 'bad_gateway', error_description: 'Upstream connection failed' });
    // The client's GET stream ends cleanly.
    expect(await stream.text()).toBe('');
    expect(await upstreamErrors('good', 'reset')).toBe(before + dropped);
    const stale = await post('good', { jsonrpc: '2.0', id: 2, method: 'ping' }, session);
    expect(stale.status).toBe(404);
    const fresh = await initialize('good');
    expect(fresh).not.toEqual(session);
  });

  it('DELETE closes its upstream stream', async () => {
    const open = servers.good.openStreams();
    const session = await initialize('good');
    expect(servers.good.openStreams()).toBe(open + 1);
    const res = await fetch(`${gw.url}/good/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${tokens.good}`, 'mcp-session-id': session } });
    expect(res.status).toBe(200);
    await waitFor(() => servers.good.openStreams() === open);
  });

  it('a client closing its response cancels the request upstream at once (notifications/cancelled)', async () => {
    const session = await initialize('good');
    const abort = new AbortController();
    const pending = fetch(`${gw.url}/good/mcp`, {
      method: 'POST',
      signal: abort.signal,
      headers: { authorization: `Bearer ${tokens.good}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-session-id': session },
      body: JSON.stringify({ jsonrpc: '2.0', id: 'gone-1', method: 'hang' }),
    }).catch((err: unknown) => err);
    await waitFor(() => servers.good.requests.some((r) => r.body.includes('"gone-1"')));
    abort.abort();
    await pending;
    const cancellation = () => servers.good.requests.find((r) => r.body.includes('notifications/cancelled') && r.body.includes('"requestId":"gone-1"'));
    await waitFor(() => cancellation() !== undefined);
    // The cancellation came from the client leaving, not upstream_timeout (1 s): its reason says which,
    // where a wall-clock bound under the timeout broke on a loaded machine.
    expect(JSON.parse(cancellation()!.body)).toMatchObject({ params: { reason: 'The client closed the response' } });
  });

  it('counts the GET stream in mag_open_streams while it is open', async () => {
    const gauge = async () => {
      const line = (await gw.metrics.registry.metrics()).split('\n').find((l) => l.startsWith('mag_open_streams{route="/good/mcp"}'));
      return line === undefined ? 0 : Number(line.split(' ').pop());
    };
    const session = await initialize('good');
    const before = await gauge();
    const abort = new AbortController();
    const stream = await fetch(`${gw.url}/good/mcp`, { signal: abort.signal, headers: { authorization: `Bearer ${tokens.good}`, 'mcp-session-id': session, accept: 'text/event-stream' } });
    expect(stream.status).toBe(200);
    expect(await gauge()).toBe(before + 1);
    abort.abort();
    await stream.text().catch(() => '');
    const until = Date.now() + 2000;
    while ((await gauge()) !== before && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(await gauge()).toBe(before);
  });

  it('a second GET stream for one session is 409', async () => {
    const session = await initialize('good');
    const headers = { authorization: `Bearer ${tokens.good}`, 'mcp-session-id': session, accept: 'text/event-stream' };
    const first = await fetch(`${gw.url}/good/mcp`, { headers });
    const second = await fetch(`${gw.url}/good/mcp`, { headers });
    expect([first.status, second.status]).toEqual([200, 409]);
    await first.body?.cancel();
  });
});

describe('reload and shutdown', () => {
  it('a reload that leaves the route as it was keeps its sessions (they are live upstream streams)', async () => {
    const session = await initialize('good');
    const open = servers.good.openStreams();
    await gw.reload(gw.config);
    const res = await post('good', { jsonrpc: '2.0', id: 1, method: 'ping' }, session);
    expect(await res.json()).toEqual({ jsonrpc: '2.0', id: 1, result: { echo: 'ping' } });
    expect(servers.good.openStreams()).toBe(open);
  });

  it('shutdown closes every upstream stream (and the client\'s GET stream)', async () => {
    const own = await startTestGateway({ 'gateway.yaml': gatewayYaml(), 'good.yaml': jwtRoute('/good/mcp', '', issuer, { upstream: { sse: servers.good.url } }) });
    const open = servers.good.openStreams();
    const headers = { authorization: `Bearer ${tokens.good}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await fetch(`${own.url}/good/mcp`, { method: 'POST', headers, body: JSON.stringify(INITIALIZE) });
    const session = init.headers.get('mcp-session-id')!;
    const stream = await fetch(`${own.url}/good/mcp`, { headers: { ...headers, 'mcp-session-id': session } });
    expect(servers.good.openStreams()).toBe(open + 1);
    await own.stop();
    await waitFor(() => servers.good.openStreams() === open);
    // stop() cuts connections at once (drain would end the stream cleanly first): either way it is over.
    await stream.text().catch(() => '');
  });
});
