/**
 * An aggregated route on two gateway replicas sharing one real redis-server (issue 22; the decision
 * in docs/aggregation.md, "Sessions and replicas"): a client session lives in the replica that
 * opened it, with its upstream sessions and their event streams. On the other replica its id is
 * 404 with a JSON error for POST, GET and DELETE, nothing is sent upstream and the session on its
 * own replica goes on; the client initializes again there and is served. Upstreams: server-everything
 * behind a recording hop, and a second server-everything.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { startLocalIssuer, type LocalIssuer } from '../helpers/local-issuer.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const PATH = '/all/mcp';
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
let redis: RedisServer;
let issuer: LocalIssuer;
let servers: UpstreamHandle[] = [];
let hop: RecordingHop;
let A: TestGateway;
let B: TestGateway;

beforeAll(async () => {
  [redis, issuer, servers] = await Promise.all([startRedisServer(), startLocalIssuer(), Promise.all([startEverythingServer(), startEverythingServer()])]);
  hop = await startRecordingHop(servers[0]!.url);
  const files = {
    'gateway.yaml': gatewayYaml({ store: { kind: 'redis', url: redis.url, key_prefix: 'agg-replicas:' } }),
    'all.yaml': {
      path: PATH,
      authorization_servers: [issuer.issuer],
      token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['ES256'] } },
      scopes_supported: ['mcp:read'],
      upstreams: { a: { upstream: hop.url }, b: { upstream: servers[1]!.url } },
    },
  };
  [A, B] = await Promise.all([startTestGateway(files), startTestGateway(files)]);
}, 60_000);
afterAll(async () => {
  await Promise.allSettled([A?.stop(), B?.stop()]);
  await Promise.allSettled([hop?.close(), ...servers.map((s) => s.close()), issuer?.close(), redis?.stop()]);
});

async function tokenOf(sub: string): Promise<string> {
  return issuer.token({ audience: A.config.routes.find((r) => r.path === PATH)!.resource, sub, scope: 'mcp:read' });
}

/** One raw request to a replica's aggregated route. */
async function send(replica: TestGateway, method: 'POST' | 'GET' | 'DELETE', token: string, sessionId?: string, body?: unknown): Promise<Response> {
  const headers: Record<string, string> = { ...HEADERS, authorization: `Bearer ${token}`, ...(sessionId && { 'mcp-session-id': sessionId }) };
  if (method === 'GET') headers.accept = 'text/event-stream';
  return fetch(`${replica.url}${PATH}`, { method, headers, ...(body !== undefined && { body: JSON.stringify(body) }) });
}

async function initialize(replica: TestGateway, token: string): Promise<string> {
  const res = await send(replica, 'POST', token, undefined, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'replicas', version: '1' } } });
  expect(res.status).toBe(200);
  const id = res.headers.get('mcp-session-id')!;
  expect((await send(replica, 'POST', token, id, { jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
  return id;
}

const listTools = (replica: TestGateway, token: string, id: string) => send(replica, 'POST', token, id, { jsonrpc: '2.0', id: 2, method: 'tools/list' });

async function notFound(res: Response): Promise<void> {
  expect(res.status).toBe(404);
  expect(res.headers.get('content-type')).toContain('application/json');
  expect(((await res.json()) as { error?: string }).error).toBe('not_found');
}

describe('an aggregated session on two replicas sharing Redis', () => {
  it('is served by its own replica only: the other answers 404 (POST, GET, DELETE), sends nothing upstream, and the session goes on; initialize there works', async () => {
    const alice = await tokenOf('alice');
    const id = await initialize(A, alice);
    expect(JSON.stringify(await (await listTools(A, alice, id)).json())).toContain('a__echo');
    const seen = hop.requests.length;

    await notFound(await listTools(B, alice, id));
    await notFound(await send(B, 'POST', alice, id, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'a__echo', arguments: { message: 'x' } } }));
    await notFound(await send(B, 'GET', alice, id));
    await notFound(await send(B, 'DELETE', alice, id));
    // Another principal presenting it on either replica is refused too.
    const bob = await tokenOf('bob');
    for (const replica of [A, B]) expect((await listTools(replica, bob, id)).status).toBe(404);
    expect(hop.requests.length).toBe(seen);

    // The session on A is untouched by B's refusals (its DELETE did not end it).
    const call = await send(A, 'POST', alice, id, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'a__echo', arguments: { message: 'still on A' } } });
    expect(JSON.stringify(await call.json())).toContain('still on A');
    // The client starts again on B, as MCP says after a 404, and B serves it.
    const onB = await initialize(B, alice);
    expect(onB).not.toBe(id);
    expect(JSON.stringify(await (await listTools(B, alice, onB)).json())).toContain('b__echo');
    expect((await send(B, 'DELETE', alice, onB)).status).toBe(200);
    expect((await send(A, 'DELETE', alice, id)).status).toBe(200);
  });
});
