/**
 * Sessions are a shared resource (DESIGN.md §8.3; SECURITY-CASES K66, K80, K81), on stdio and
 * legacy SSE routes alike: a full route refuses a newcomer with 503, Retry-After and a JSON body
 * rather than end another principal's idle session (for a stateful server, that user's data);
 * only the caller's own idle sessions make room. Caps count the user (issuer + subject): a user
 * who registers more clients does not get more sessions, and one user at its cap leaves every
 * other user and /healthz served. The rules themselves are also a fast-check property over
 * random claims in test/unit/proxy-session-admission.test.ts.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GET_STREAMS_PER_USER } from '../../src/proxy/stream-quota.js';
import { startLegacySseServer, type LegacySseServer } from '../helpers/legacy-sse-server.js';
import { FIXTURE_SERVER, isAlive, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';

const probe = (stdio: Record<string, unknown>) => ({ upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER, 'probe'], ...stdio } }, limits: { upstream_timeout: '10s' } });

const LISTEN_SHARE = 3;
let stage: StdioStage;
let sse: Record<'full' | 'user', LegacySseServer>;
/** A Streamable HTTP upstream whose GET streams stay open (and idle) until the client goes. */
let streaming: Server;

beforeAll(async () => {
  const [full, user] = await Promise.all([startLegacySseServer(), startLegacySseServer()]);
  sse = { full, user };
  streaming = createServer((req, res) => {
    if (req.method !== 'GET') return void res.writeHead(405).end();
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(': open\n\n');
  });
  await new Promise<void>((resolve) => streaming.listen(0, '127.0.0.1', resolve));
  const port = (streaming.address() as { port: number }).port;
  stage = await startStdioStage({
    '/http/mcp': { upstream: `http://127.0.0.1:${port}/mcp` },
    '/stdio-full/mcp': probe({ max_processes: 2, max_processes_per_principal: 2 }),
    '/stdio-user/mcp': probe({ max_processes: 10, max_processes_per_principal: 2 }),
    '/sse-full/mcp': { upstream: { sse: { url: full.url, max_sessions: 2, max_sessions_per_principal: 2 } }, limits: { upstream_timeout: '10s' } },
    '/sse-user/mcp': { upstream: { sse: { url: user.url, max_sessions: 10, max_sessions_per_principal: 2 } }, limits: { upstream_timeout: '10s' } },
    // Three long-lived streams per user, for the listens below.
    '/stdio-listen/mcp': { ...probe({ max_processes: 10, max_processes_per_principal: 2 }), limits: { upstream_timeout: '10s', max_get_streams_per_user: LISTEN_SHARE } },
    '/sse-listen/mcp': { upstream: { sse: { url: user.url, max_sessions: 10, max_sessions_per_principal: 2 } }, limits: { upstream_timeout: '10s', max_get_streams_per_user: LISTEN_SHARE } },
  });
}, 60_000);

afterAll(async () => {
  await stage?.close();
  streaming?.closeAllConnections();
  await new Promise((resolve) => streaming?.close(resolve));
  await Promise.all(Object.values(sse ?? {}).map((s) => s.close()));
});

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

/** A token of `sub` through the client `client` (a user may register many). */
const token = (path: string, sub: string, client = 'client-a') =>
  stage.issuer.token({ audience: stage.gw.config.routes.find((r) => r.path === path)!.resource, sub, clientId: client, scope: 'mcp:read' });

async function post(path: string, body: unknown, who: { sub: string; client?: string }, sessionId?: string): Promise<Response> {
  return fetch(stage.url(path), {
    method: 'POST',
    headers: {
      authorization: `Bearer ${await token(path, who.sub, who.client)}`,
      'content-type': 'application/json',
      // stdio answers JSON to a client that takes it; the legacy SSE transport answers on a stream.
      accept: path.startsWith('/stdio') ? 'application/json' : 'application/json, text/event-stream',
      ...(sessionId && { 'mcp-session-id': sessionId }),
    },
    body: JSON.stringify(body),
  });
}

async function initialize(path: string, who: { sub: string; client?: string }): Promise<string> {
  const res = await post(path, INITIALIZE, who);
  expect(res.status).toBe(200);
  await res.text();
  return res.headers.get('mcp-session-id')!;
}

/** A request on a session: `report` on stdio (its pid), `ping` on SSE; its status. */
async function use(path: string, who: { sub: string; client?: string }, sessionId: string): Promise<number> {
  const body = path.startsWith('/stdio')
    ? { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'report', arguments: {} } }
    : { jsonrpc: '2.0', id: 7, method: 'ping' };
  const res = await post(path, body, who, sessionId);
  await res.text();
  return res.status;
}

/** Keeps a session busy: a stdio call that sleeps, an SSE request the scripted server never answers. */
function busy(path: string, who: { sub: string; client?: string }, sessionId: string): Promise<number> {
  const body = path.startsWith('/stdio')
    ? { jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'sleep', arguments: { ms: 3_000 } } }
    : { jsonrpc: '2.0', id: 8, method: 'hang' };
  return post(path, body, who, sessionId).then(async (res) => (await res.text(), res.status));
}

async function expectRefused(res: Response): Promise<void> {
  expect(res.status).toBe(503);
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(res.headers.get('content-type')).toMatch(/application\/json/);
  expect(await res.json()).toMatchObject({ error: 'temporarily_unavailable' });
}

const alice = { sub: 'alice' };
const carol = { sub: 'carol' };

describe.each(['/stdio-full/mcp', '/sse-full/mcp'])('[K66] %s full of another principal\'s idle sessions', (path) => {
  it("a newcomer gets 503 with Retry-After and a JSON body, and every one of alice's sessions lives on", async () => {
    const sessions = [await initialize(path, alice), await initialize(path, alice)];
    for (const id of sessions) expect(await use(path, alice, id)).toBe(200);
    // carol, under her own cap, on a route full of alice's idle sessions.
    for (let i = 0; i < 3; i++) await expectRefused(await post(path, INITIALIZE, carol));
    for (const id of sessions) expect(await use(path, alice, id)).toBe(200);
    expect((await fetch(stage.url('/healthz'))).status).toBe(200);
    // alice herself may make room from her own idle session: the least recently used one ends.
    const third = await initialize(path, alice);
    expect(await use(path, alice, third)).toBe(200);
    expect(await use(path, alice, sessions[0]!)).toBe(404);
    expect(await use(path, alice, sessions[1]!)).toBe(200);
    for (const id of [sessions[1]!, third]) {
      await fetch(stage.url(path), { method: 'DELETE', headers: { authorization: `Bearer ${await token(path, 'alice')}`, 'mcp-session-id': id } });
    }
    // Room again: carol gets her session.
    await waitFor(async () => (await post(path, INITIALIZE, carol)).status === 200, 10_000, 'a slot for carol');
  }, 60_000);
});

describe.each(['/stdio-user/mcp', '/sse-user/mcp'])('[K81] %s: the per-principal cap counts the user, not the client', (path) => {
  it('alice through three registered clients holds at most her cap of 2: a new session ends her own least recently used idle one, whichever client opened it', async () => {
    const viaA = await initialize(path, { sub: 'alice', client: 'client-a' });
    const viaB = await initialize(path, { sub: 'alice', client: 'client-b' });
    expect(await use(path, { sub: 'alice', client: 'client-a' }, viaA)).toBe(200);
    expect(await use(path, { sub: 'alice', client: 'client-b' }, viaB)).toBe(200);
    const viaC = await initialize(path, { sub: 'alice', client: 'client-c' });
    expect(await use(path, { sub: 'alice', client: 'client-c' }, viaC)).toBe(200);
    // Three clients, one share: the oldest (client-a's) made room.
    expect(await use(path, { sub: 'alice', client: 'client-a' }, viaA)).toBe(404);
    expect(await use(path, { sub: 'alice', client: 'client-b' }, viaB)).toBe(200);
    // Sessions stay bound to the client that opened them.
    expect(await use(path, { sub: 'alice', client: 'client-c' }, viaB)).not.toBe(200);
    for (const [id, client] of [[viaB, 'client-b'], [viaC, 'client-c']] as const) {
      await fetch(stage.url(path), { method: 'DELETE', headers: { authorization: `Bearer ${await token(path, 'alice', client)}`, 'mcp-session-id': id } });
    }
  }, 60_000);

  it('[K80] alice at her cap with every session busy: 503 through any of her clients, while bob and /healthz keep being served', async () => {
    const sessions = [await initialize(path, { sub: 'alice', client: 'client-a' }), await initialize(path, { sub: 'alice', client: 'client-b' })];
    const calls = [busy(path, { sub: 'alice', client: 'client-a' }, sessions[0]!), busy(path, { sub: 'alice', client: 'client-b' }, sessions[1]!)];
    await new Promise((r) => setTimeout(r, 500));
    for (const client of ['client-a', 'client-b', 'client-new-1', 'client-new-2']) await expectRefused(await post(path, INITIALIZE, { sub: 'alice', client }));
    expect((await fetch(stage.url('/healthz'))).status).toBe(200);
    const bob = await initialize(path, { sub: 'bob' });
    expect(await use(path, { sub: 'bob' }, bob)).toBe(200);
    for (const [id, client] of [[sessions[0]!, 'client-a'], [sessions[1]!, 'client-b']] as const) {
      await fetch(stage.url(path), { method: 'DELETE', headers: { authorization: `Bearer ${await token(path, 'alice', client)}`, 'mcp-session-id': id } });
    }
    await fetch(stage.url(path), { method: 'DELETE', headers: { authorization: `Bearer ${await token(path, 'bob')}`, 'mcp-session-id': bob } });
    await Promise.all(calls);
  }, 60_000);
});

describe('[K80] idle GET streams are held by sessions, and sessions by the user\'s cap (stdio)', () => {
  it('alice opening sessions and a GET stream on each through ever new clients never holds more than her cap of processes; bob and /healthz are served', async () => {
    const path = '/stdio-user/mcp';
    const streams: AbortController[] = [];
    const pids: number[] = [];
    for (let i = 0; i < 6; i++) {
      const who = { sub: 'alice', client: `client-${i}` };
      const id = await initialize(path, who);
      const res = await post(path, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'report', arguments: {} } }, who, id);
      pids.push((JSON.parse(((await res.json()) as { result: { content: { text: string }[] } }).result.content[0]!.text) as { pid: number }).pid);
      const controller = new AbortController();
      streams.push(controller);
      const get = await fetch(stage.url(path), {
        headers: { authorization: `Bearer ${await token(path, 'alice', who.client)}`, accept: 'text/event-stream', 'mcp-session-id': id },
        signal: controller.signal,
      });
      expect(get.status).toBe(200);
    }
    await waitFor(() => pids.filter(isAlive).length <= 2, 10_000, "alice's processes to be within her cap");
    expect(pids.slice(-2).every(isAlive)).toBe(true);
    const bob = await initialize(path, { sub: 'bob' });
    expect(await use(path, { sub: 'bob' }, bob)).toBe(200);
    expect((await fetch(stage.url('/healthz'))).status).toBe(200);
    for (const c of streams) c.abort();
  }, 60_000);
});

describe('[K80] legacy SSE: a GET stream lives in a session (one each), and sessions in the user\'s cap', () => {
  it('alice opening sessions and a GET stream on each through ever new clients never holds more than her cap; a second GET on a session is 409; bob and /healthz are served', async () => {
    const path = '/sse-user/mcp';
    const streams: AbortController[] = [];
    const opened: Array<{ id: string; who: { sub: string; client: string } }> = [];
    for (let i = 0; i < 6; i++) {
      const who = { sub: 'alice', client: `client-${i}` };
      const res = await post(path, INITIALIZE, who);
      await res.text();
      // Her own idle session makes room, or (if the gateway counts a held stream as busy) 503: never a third.
      expect([200, 503]).toContain(res.status);
      if (res.status !== 200) continue;
      const id = res.headers.get('mcp-session-id')!;
      opened.push({ id, who });
      const controller = new AbortController();
      streams.push(controller);
      const get = await fetch(stage.url(path), { headers: { authorization: `Bearer ${await token(path, 'alice', who.client)}`, accept: 'text/event-stream', 'mcp-session-id': id }, signal: controller.signal });
      expect(get.status).toBe(200);
      const second = await fetch(stage.url(path), { headers: { authorization: `Bearer ${await token(path, 'alice', who.client)}`, accept: 'text/event-stream', 'mcp-session-id': id } });
      expect(second.status).toBe(409);
      await second.text();
    }
    let live = 0;
    for (const { id, who } of opened) if ((await use(path, who, id)) === 200) live++;
    expect(live).toBeGreaterThan(0);
    expect(live).toBeLessThanOrEqual(2);
    const bob = await initialize(path, { sub: 'bob' });
    expect(await use(path, { sub: 'bob' }, bob)).toBe(200);
    expect((await fetch(stage.url('/healthz'))).status).toBe(200);
    for (const c of streams) c.abort();
    for (const { id, who } of opened) await fetch(stage.url(path), { method: 'DELETE', headers: { authorization: `Bearer ${await token(path, 'alice', who.client)}`, 'mcp-session-id': id } });
    await fetch(stage.url(path), { method: 'DELETE', headers: { authorization: `Bearer ${await token(path, 'bob')}`, 'mcp-session-id': bob } });
  }, 60_000);
});

describe.each(['/stdio-listen/mcp', '/sse-listen/mcp'])('[K80] %s: subscriptions/listen POSTs count in the user\'s stream share', (path) => {
  /** A 2026-07-28 listen (no session: each is its own request), held open until `signal` aborts. */
  const listen = async (who: { sub: string; client: string }, signal: AbortSignal) =>
    fetch(stage.url(path), {
      method: 'POST',
      headers: {
        authorization: `Bearer ${await token(path, who.sub, who.client)}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'subscriptions/listen',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true }, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} } } }),
      signal,
    });

  it(`alice holds ${LISTEN_SHARE} listens through two clients, the rest 429 with Retry-After; bob's listen and /healthz are served; a closed one gives her room`, async () => {
    const held = new AbortController();
    const answers = [];
    // Two clients (each client's stateless listens share one process or upstream session, within her cap of 2).
    for (let i = 0; i < LISTEN_SHARE + 3; i++) answers.push(await listen({ sub: 'alice', client: `client-${i % 2}` }, held.signal));
    expect(answers.slice(0, LISTEN_SHARE).map((r) => r.status)).toEqual(Array(LISTEN_SHARE).fill(200));
    for (const refused of answers.slice(LISTEN_SHARE)) {
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await refused.json()).toMatchObject({ error: 'too_many_requests' });
    }
    const bob = new AbortController();
    expect((await listen({ sub: 'bob', client: 'client-b' }, bob.signal)).status).toBe(200);
    expect((await fetch(stage.url('/healthz'))).status).toBe(200);
    const one = new AbortController();
    held.abort();
    await waitFor(async () => {
      const res = await listen({ sub: 'alice', client: 'client-1' }, one.signal);
      if (res.status !== 200) await res.text();
      return res.status === 200;
    }, 5_000, 'room for alice once her listens closed');
    one.abort();
    bob.abort();
  }, 60_000);
});

describe('[K80] idle GET streams on a Streamable HTTP route are bounded per user', () => {
  const path = '/http/mcp';
  const openStream = async (sub: string, client: string, controller: AbortController) =>
    fetch(stage.url(path), { headers: { authorization: `Bearer ${await token(path, sub, client)}`, accept: 'text/event-stream' }, signal: controller.signal });

  it(`alice holds at most ${GET_STREAMS_PER_USER} through any number of clients (then 429, Retry-After, JSON); bob and /healthz are served; closing one gives her room`, async () => {
    const held: AbortController[] = [];
    for (let i = 0; i < GET_STREAMS_PER_USER; i++) {
      const controller = new AbortController();
      held.push(controller);
      expect((await openStream('alice', `client-${i}`, controller)).status).toBe(200);
    }
    for (const client of ['client-0', 'client-new']) {
      const refused = await openStream('alice', client, new AbortController());
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await refused.json()).toMatchObject({ error: 'too_many_requests' });
    }
    const bob = new AbortController();
    expect((await openStream('bob', 'client-b', bob)).status).toBe(200);
    expect((await fetch(stage.url('/healthz'))).status).toBe(200);
    held.pop()!.abort();
    await waitFor(async () => {
      const again = new AbortController();
      const res = await openStream('alice', 'client-late', again);
      if (res.status === 200) held.push(again);
      return res.status === 200;
    }, 5_000, 'room for alice once she closed a stream');
    for (const c of [...held, bob]) c.abort();
  }, 60_000);
});
