/**
 * The proxy guarantees on a legacy HTTP+SSE upstream (`upstream: { sse: URL }`):
 * the client's token reaches neither the GET stream nor any POST, the upstream's
 * own challenge is not relayed, a session is bound to the principal that
 * started it (its own upstream connection, never shared), and the `endpoint`
 * event cannot send the gateway to another origin.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startLegacySseServer, type LegacySseServer } from '../helpers/legacy-sse-server.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, tokenSecrets, type TestIssuer } from '../helpers/security-fixtures.js';

const PATH = '/legacy/mcp';
const UPSTREAM_SECRET = 'legacy-upstream-pat-6c1f0e9a';
const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } });

let issuer: TestIssuer;
let up: LegacySseServer;
let refusing: LegacySseServer;
let elsewhere: LegacySseServer;
let gw: TestGateway;
const tokens = { alice: '', bob: '', refusing: '', elsewhere: '' };

beforeAll(async () => {
  issuer = await startTestIssuer('RS256');
  [up, refusing] = await Promise.all([startLegacySseServer(), startLegacySseServer({ refuseGet: true })]);
  // Its endpoint names the first server: a real MCP endpoint, but on another origin.
  elsewhere = await startLegacySseServer({ endpoint: (id) => `${new URL(up.url).origin}/message?sessionId=${id}` });
  gw = await startTestGateway(
    {
      'gateway.yaml': gatewayYaml(),
      'legacy.yaml': jwtRoute(PATH, '', issuer, { upstream: { sse: up.url }, upstream_auth: { kind: 'static', value: { env: 'LEGACY_PAT' } } }),
      'refusing.yaml': jwtRoute('/refusing/mcp', '', issuer, { upstream: { sse: refusing.url } }),
      'elsewhere.yaml': jwtRoute('/elsewhere/mcp', '', issuer, { upstream: { sse: elsewhere.url } }),
    },
    { LEGACY_PAT: UPSTREAM_SECRET },
  );
  tokens.alice = await issuer.mint({ aud: resourceOf(PATH), sub: 'alice' });
  tokens.bob = await issuer.mint({ aud: resourceOf(PATH), sub: 'bob' });
  tokens.refusing = await issuer.mint({ aud: resourceOf('/refusing/mcp') });
  tokens.elsewhere = await issuer.mint({ aud: resourceOf('/elsewhere/mcp') });
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([issuer?.close(), up?.close(), refusing?.close(), elsewhere?.close()]);
});

function send(path: string, token: string, init: { method?: string; body?: string; session?: string } = {}): Promise<Response> {
  return fetch(`${gw.url}${path}`, {
    method: init.method ?? 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      accept: 'application/json, text/event-stream',
      ...(init.body !== undefined && { 'content-type': 'application/json' }),
      ...(init.session !== undefined && { 'mcp-session-id': init.session }),
    },
    body: init.body,
  });
}

async function startSession(token: string): Promise<string> {
  const res = await send(PATH, token, { body: INITIALIZE });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return res.headers.get('mcp-session-id')!;
}

describe('legacy SSE upstream: credentials', () => {
  it('[H34] the client token is on neither the GET stream nor any POST; the configured credential is on every one', async () => {
    const before = up.requests.length;
    const session = await startSession(tokens.alice);
    const call = await send(PATH, tokens.alice, { session, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: {} } }) });
    expect(call.status).toBe(200);
    const note = await send(PATH, tokens.alice, { session, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
    expect(note.status).toBe(202);
    const seen = up.requests.slice(before);
    expect(seen.map((r) => r.method)).toEqual(['GET', 'POST', 'POST', 'POST']);
    for (const r of seen) {
      expect(r.headers.authorization).toBe(`Bearer ${UPSTREAM_SECRET}`);
      const everything = JSON.stringify(r);
      for (const secret of tokenSecrets(tokens.alice)) expect(everything).not.toContain(secret);
    }
  });

  it('[H36] an upstream refusing the gateway credential on its GET stream is a 502, its challenge not relayed', async () => {
    const res = await send('/refusing/mcp', tokens.refusing, { body: INITIALIZE });
    expect(res.status).toBe(502);
    expect(await res.json()).toEqual({ error: 'bad_gateway', error_description: "Upstream rejected the gateway's credential" });
    expect(res.headers.get('www-authenticate')).toBeNull();
  });
});

describe('legacy SSE upstream: sessions', () => {
  it('[H42] a session id minted for alice is 404 for bob on POST, GET and DELETE, and nothing reaches the upstream', async () => {
    const session = await startSession(tokens.alice);
    const count = up.requests.length;
    const tries = [
      send(PATH, tokens.bob, { session, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }) }),
      send(PATH, tokens.bob, { session, method: 'GET' }),
      send(PATH, tokens.bob, { session, method: 'DELETE' }),
    ];
    for (const res of await Promise.all(tries)) {
      expect(res.status).toBe(404);
      expect(await res.json()).toEqual({ error: 'not_found', error_description: 'Unknown session' });
    }
    expect(up.requests.length).toBe(count);
    // Still alice's, and working.
    const own = await send(PATH, tokens.alice, { session, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }) });
    expect(await own.json()).toEqual({ jsonrpc: '2.0', id: 2, result: { echo: 'ping' } });
  });

  it('[H42] each session, of one principal or two, is its own upstream connection: never shared', async () => {
    const open = up.openStreams();
    const sessions = await Promise.all([startSession(tokens.alice), startSession(tokens.alice), startSession(tokens.bob)]);
    expect(new Set(sessions).size).toBe(3);
    expect(up.openStreams()).toBe(open + 3);
    const upstreamSessions = up.requests.filter((r) => r.body.includes('"initialize"')).map((r) => new URL(r.url, 'http://x').searchParams.get('sessionId'));
    expect(new Set(upstreamSessions).size).toBe(upstreamSessions.length);
  });

  it('[H42] an unknown or malformed session id is refused before anything is sent', async () => {
    const count = up.requests.length;
    expect((await send(PATH, tokens.alice, { session: 'never-minted', body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' })).status).toBe(404);
    const tooLong = await send(PATH, tokens.alice, { session: 'x'.repeat(300), body: '{"jsonrpc":"2.0","id":1,"method":"ping"}' });
    expect(tooLong.status).toBe(400);
    expect(await tooLong.json()).toMatchObject({ error: 'invalid_request' });
    expect(up.requests.length).toBe(count);
  });
});

describe('legacy SSE upstream: the endpoint event', () => {
  it('naming another origin (even a real MCP endpoint) is refused with 502: no POST leaves the gateway for it', async () => {
    const before = up.requests.length;
    const res = await send('/elsewhere/mcp', tokens.elsewhere, { body: INITIALIZE });
    expect(res.status).toBe(502);
    expect(up.requests.length).toBe(before);
    expect(elsewhere.requests.map((r) => r.method)).toEqual(['GET']);
    expect(gw.logs.join('')).toContain('upstream endpoint is not on the origin of its SSE URL');
  });
});
