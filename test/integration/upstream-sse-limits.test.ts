/**
 * Legacy SSE routes shared by several principals (issue 14): 2026-07-28 clients without a session
 * get one upstream session per principal, opened and initialized by the gateway, as on stdio
 * routes — shown with the unmodified server-everything in its `sse` mode behind a recording hop —
 * and `max_sessions_per_principal` / `max_sessions` keep one principal from taking every upstream
 * stream: at her cap alice's least recently used idle session ends (404, its upstream stream
 * closed) and bob is untouched; with all hers busy she gets 503 with Retry-After, and so does
 * carol on a full route: bob's idle session is never ended for her. The bounds are
 * shown on the scripted legacy server (test/helpers/legacy-sse-server.ts), whose `hang` method
 * keeps a request in flight on demand.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startLegacySseServer, type LegacySseServer } from '../helpers/legacy-sse-server.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

let everything: UpstreamHandle;
let hop: RecordingHop;
let issuer: TestIssuer;
let gw: TestGateway;
const servers: Record<'capped' | 'busy' | 'mixed', LegacySseServer> = {} as never;

const INITIALIZE = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } };

beforeAll(async () => {
  [everything, issuer, servers.capped, servers.busy, servers.mixed] = await Promise.all([
    startEverythingServer('sse'),
    startTestIssuer('RS256'),
    startLegacySseServer(),
    startLegacySseServer(),
    startLegacySseServer(),
  ]);
  hop = await startRecordingHop(everything.url);
  gw = await startTestGateway({
    'gateway.yaml': gatewayYaml(),
    'everything.yaml': jwtRoute('/everything/mcp', '', issuer, { upstream: { sse: hop.url } }),
    'capped.yaml': jwtRoute('/capped/mcp', '', issuer, { upstream: { sse: { url: servers.capped.url, max_sessions: 3, max_sessions_per_principal: 2 } } }),
    'busy.yaml': jwtRoute('/busy/mcp', '', issuer, { upstream: { sse: { url: servers.busy.url, max_sessions: 3, max_sessions_per_principal: 2 } }, limits: { upstream_timeout: '10s' } }),
    'mixed.yaml': jwtRoute('/mixed/mcp', '', issuer, { upstream: { sse: { url: servers.mixed.url, max_sessions_per_principal: 1 } } }),
  });
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  await Promise.all([hop?.close(), issuer?.close(), ...Object.values(servers).map((s) => s.close())]);
  await everything?.close();
});

const token = (path: string, sub: string) => issuer.mint({ aud: resourceOf(path), sub, scope: 'mcp:read' });

async function post(path: string, sub: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${await token(path, sub)}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
}

async function initialize(path: string, sub: string): Promise<string> {
  const res = await post(path, sub, INITIALIZE);
  expect(res.status).toBe(200);
  await res.text();
  return res.headers.get('mcp-session-id')!;
}

/** A request on a session; its status once answered. */
const call = async (path: string, sub: string, session: string, method = 'ping') => (await post(path, sub, { jsonrpc: '2.0', id: 5, method }, { 'mcp-session-id': session })).status;

const waitFor = async (check: () => boolean, ms = 5_000) => {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe('2026-07-28 clients (no session, no initialize) on a legacy SSE route: one upstream session per principal, initialized by the gateway', () => {
  const statelessEcho = async (sub: string, id: number, message: string) => {
    const res = await post('/everything/mcp', sub, { jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { message }, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } } }, {
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': 'echo',
      accept: 'application/json',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeNull();
    const body = (await res.json()) as { id: number; result: { content: Array<{ text: string }> } };
    expect(body.id).toBe(id);
    return body.result.content[0]!.text;
  };
  /** The upstream session ids (server-everything's `sessionId` query) the hop saw POSTs for, in order. */
  const postedSessions = () => hop.requests.filter((r) => r.method === 'POST').map((r) => new URL(r.url, 'http://x').searchParams.get('sessionId'));
  const bodies = () =>
    hop.requests.filter((r) => r.method === 'POST').map((r) => JSON.parse(r.body.toString()) as { method?: string; id?: unknown; params?: { arguments?: { message?: string } } });
  /**
   * The upstream session an echo went to, found by its message. Not by id: on a session-less session
   * every request goes upstream under an id of the gateway's own (upstream-ids.ts), numbered in the
   * order requests reach their sessions, so which principal's call is upstream id 1 depends on whose
   * session opened first — with two opened at once, on the machine's load (the failure f0260ac
   * reverted 5480995 for).
   */
  const sessionOfEcho = (message: string) => {
    const posted = postedSessions();
    const sent = bodies().flatMap((b, i) => (b.method === 'tools/call' && b.params?.arguments?.message === message ? [posted[i]] : []));
    expect(sent).toHaveLength(1);
    return sent[0];
  };

  it("alice's requests share one upstream session, bob's get another; the gateway's own initialize answer never reaches them", async () => {
    const [a1, b1] = await Promise.all([statelessEcho('alice', 1, 'from alice'), statelessEcho('bob', 2, 'from bob')]);
    expect(a1).toBe('Echo: from alice');
    expect(b1).toBe('Echo: from bob');
    expect(await statelessEcho('alice', 3, 'again')).toBe('Echo: again');
    // Two GET streams (one per principal), each initialized once by the gateway before the client's request.
    expect(hop.requests.filter((r) => r.method === 'GET')).toHaveLength(2);
    expect(bodies().filter((b) => b.method === 'initialize')).toHaveLength(2);
    expect(bodies().filter((b) => b.method === 'notifications/initialized')).toHaveLength(2);
    expect(sessionOfEcho('from alice')).toBe(sessionOfEcho('again'));
    expect(sessionOfEcho('from bob')).not.toBe(sessionOfEcho('from alice'));
  });

  it("the principal whose session opened second keeps to it too: dave's opens before carol's, so the gateway's upstream ids start with his calls", async () => {
    const streamsBefore = hop.requests.filter((r) => r.method === 'GET').length;
    expect(await statelessEcho('dave', 1, 'from dave')).toBe('Echo: from dave');
    const [c1, d2] = await Promise.all([statelessEcho('carol', 1, 'from carol'), statelessEcho('dave', 2, 'dave again')]);
    expect([c1, d2]).toEqual(['Echo: from carol', 'Echo: dave again']);
    expect(await statelessEcho('carol', 2, 'carol again')).toBe('Echo: carol again');
    expect(hop.requests.filter((r) => r.method === 'GET').length - streamsBefore).toBe(2);
    expect(sessionOfEcho('from carol')).toBe(sessionOfEcho('carol again'));
    expect(sessionOfEcho('from dave')).toBe(sessionOfEcho('dave again'));
    expect(sessionOfEcho('from carol')).not.toBe(sessionOfEcho('from dave'));
  });

  it('counts in the caps: with max_sessions_per_principal 1, her initialize ends her idle session-less one, and the next session-less request opens another', async () => {
    const stateless = await post('/mixed/mcp', 'alice', { jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'ping' });
    expect(stateless.status).toBe(200);
    expect(await stateless.json()).toMatchObject({ id: 1, result: { echo: 'ping' } });
    expect(servers.mixed.openStreams()).toBe(1);
    const session = await initialize('/mixed/mcp', 'alice');
    await waitFor(() => servers.mixed.openStreams() === 1);
    expect(await call('/mixed/mcp', 'alice', session)).toBe(200);
    const again = await post('/mixed/mcp', 'alice', { jsonrpc: '2.0', id: 2, method: 'ping' }, { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'ping' });
    expect(again.status).toBe(200);
    await again.text();
    // That one made room in turn: her named session is gone.
    expect(await call('/mixed/mcp', 'alice', session)).toBe(404);
    expect(servers.mixed.openStreams()).toBe(1);
  });
});

describe('max_sessions_per_principal on a legacy SSE route', () => {
  it("alice at her cap: her least recently used idle session ends (404, its upstream stream closed); bob still gets a session and hers are untouched", async () => {
    const first = await initialize('/capped/mcp', 'alice');
    const second = await initialize('/capped/mcp', 'alice');
    expect(await call('/capped/mcp', 'alice', second)).toBe(200);
    expect(servers.capped.openStreams()).toBe(2);
    const third = await initialize('/capped/mcp', 'alice');
    expect(await call('/capped/mcp', 'alice', first)).toBe(404);
    await waitFor(() => servers.capped.openStreams() === 2);
    expect(await call('/capped/mcp', 'alice', second)).toBe(200);
    expect(await call('/capped/mcp', 'alice', third)).toBe(200);
    const bob = await initialize('/capped/mcp', 'bob');
    expect(await call('/capped/mcp', 'bob', bob)).toBe(200);
    expect([await call('/capped/mcp', 'alice', second), await call('/capped/mcp', 'alice', third)]).toEqual([200, 200]);
    expect(servers.capped.openStreams()).toBe(3);
  });

  it('alice with all her sessions busy: 503 with Retry-After and a JSON body, logged; bob still gets a session', async () => {
    const sessions = [await initialize('/busy/mcp', 'alice'), await initialize('/busy/mcp', 'alice')];
    const hanging = sessions.map((id) => call('/busy/mcp', 'alice', id, 'hang'));
    await waitFor(() => servers.busy.requests.filter((r) => r.body.includes('"hang"')).length === 2);
    const refused = await post('/busy/mcp', 'alice', INITIALIZE);
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await refused.json()).toMatchObject({ error: 'temporarily_unavailable' });
    expect(gw.logs.some((l) => l.includes('max_sessions_per_principal reached and every session busy'))).toBe(true);
    expect(servers.busy.openStreams()).toBe(2);
    const bob = await initialize('/busy/mcp', 'bob');
    expect(await call('/busy/mcp', 'bob', bob)).toBe(200);
    // The route is now full of busy and idle sessions: carol is refused, never given room from bob's idle one or alice's busy ones.
    const carol = await post('/busy/mcp', 'carol', INITIALIZE);
    expect(carol.status).toBe(503);
    expect(Number(carol.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await call('/busy/mcp', 'bob', bob)).toBe(200);
    await fetch(`${gw.url}/busy/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${await token('/busy/mcp', 'bob')}`, 'mcp-session-id': bob } });
    for (const id of sessions) await fetch(`${gw.url}/busy/mcp`, { method: 'DELETE', headers: { authorization: `Bearer ${await token('/busy/mcp', 'alice')}`, 'mcp-session-id': id } });
    expect(await Promise.all(hanging)).toEqual([404, 404]);
  });
});
