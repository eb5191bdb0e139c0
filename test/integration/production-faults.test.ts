/**
 * Faults at gateway level (issue 5, item 3) with the store on a real
 * redis-server that persists as deployed (appendonly):
 * - Redis paused (SIGSTOP: hung) or killed: what needs the store (a request
 *   carrying Mcp-Session-Id, an initialize that creates a session) gets 503
 *   temporarily_unavailable within the bounded time and no session id is
 *   handed out unbound; requests that need only JWT validation keep working;
 *   when Redis is back the same gateway recovers and the binding acknowledged
 *   before the outage is still there;
 * - the upstream killed mid-stream: the event stream ends cleanly, the next
 *   request is 502, the gateway stays up and works again once it returns.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { startLocalIssuer, type LocalIssuer } from '../helpers/local-issuer.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';

const STORE_TIMEOUT_MS = 500;
/** Scheduling and HTTP on a loaded 2-core machine, on top of the store timeout. */
const SLACK_MS = 400;
const PUBLIC_URL = 'http://127.0.0.1:18082';
const RESOURCE = `${PUBLIC_URL}/mcp`;

let redisDir: string;
let redis: RedisServer;
let issuer: LocalIssuer;
let upstream: ScriptedUpstream;
let gateway: TestGateway;
let alice: string;

beforeAll(async () => {
  redisDir = await mkdtemp(join(tmpdir(), 'mag-redis-'));
  // As deployed: every acknowledged write is in the append-only file before the reply.
  const persistence = ['--dir', redisDir, '--appendonly', 'yes', '--appendfsync', 'everysec', '--maxmemory-policy', 'noeviction'];
  [redis, issuer, upstream] = await Promise.all([startRedisServer(persistence), startLocalIssuer(), startScriptedUpstream({ sessions: true, tickMs: 50 })]);
  gateway = await startTestGateway({
    'gateway.yaml': gatewayYaml({
      public_url: PUBLIC_URL,
      log_level: 'info',
      store: { kind: 'redis', url: redis.url, key_prefix: 'faults:', command_timeout: `${STORE_TIMEOUT_MS}ms` },
      limits: { store_timeout: `${STORE_TIMEOUT_MS}ms` },
    }),
    'mcp.yaml': {
      path: '/mcp',
      upstream: upstream.url,
      authorization_servers: [issuer.issuer],
      token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['ES256'] } },
    },
  });
  alice = await issuer.token({ audience: RESOURCE, sub: 'alice' });
});

afterAll(async () => {
  await gateway?.stop();
  await Promise.all([issuer?.close(), upstream?.close()]);
  await redis?.stop();
  await rm(redisDir, { recursive: true, force: true });
});

const rpc = (method: string) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: {} });

async function post(method: string, headers: Record<string, string> = {}) {
  const started = performance.now();
  const res = await fetch(`${gateway.url}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: rpc(method),
  });
  const body = await res.text();
  return { status: res.status, headers: res.headers, json: JSON.parse(body) as Record<string, unknown>, ms: performance.now() - started };
}

async function newSession(): Promise<Record<string, string>> {
  const init = await post('initialize');
  expect(init.status).toBe(200);
  return { 'mcp-session-id': init.headers.get('mcp-session-id')! };
}

let lastSeen = '';
async function eventually(check: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > timeoutMs) throw new Error(`did not recover in time (last: ${lastSeen})`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return performance.now() - started;
}

/** The store's own error counter, as /metrics shows it. */
async function storeErrors(operation: string): Promise<number> {
  const text = await (await fetch(`${gateway.url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`mag_store_errors_total{backend="redis",operation="${operation}",kind="unavailable"}`));
  return line ? Number(line.split(' ').pop()) : 0;
}

/** What needs the store is refused fast and typed; no session id leaks out unbound. */
async function expectStoreDependentRequestsRefused(session: Record<string, string>) {
  const [withSession, creatingSession, jwtOnly] = await Promise.all([post('tools/list', session), post('initialize'), post('tools/list')]);
  expect(withSession.status).toBe(503);
  expect(withSession.json).toMatchObject({ error: 'temporarily_unavailable' });
  expect(withSession.headers.get('retry-after')).toBe('1');
  expect(withSession.ms).toBeLessThan(STORE_TIMEOUT_MS + SLACK_MS);
  expect(creatingSession.status).toBe(503);
  expect(creatingSession.headers.get('mcp-session-id')).toBeNull();
  expect(creatingSession.ms).toBeLessThan(STORE_TIMEOUT_MS + SLACK_MS);
  // Needs only the JWT: unaffected.
  expect(jwtOnly.status).toBe(200);
  expect(jwtOnly.json).toMatchObject({ result: { method: 'tools/list' } });
}

describe('Redis faults', () => {
  it('paused: 503 within the store timeout for what needs the store, JWT-only requests pass, then it recovers', async () => {
    const session = await newSession();
    const errorsBefore = await storeErrors('get');
    const pauseMs = 2_500;
    const pausedAt = performance.now();
    await redis.pause(pauseMs);

    await expectStoreDependentRequestsRefused(session);
    const readyz = await fetch(`${gateway.url}/readyz`);
    expect(readyz.status).toBe(200); // readiness does not fail on the store: JWT routes still work
    expect(await readyz.json()).toMatchObject({ status: 'ready', store: 'unavailable' });
    expect(performance.now() - pausedAt).toBeLessThan(pauseMs); // all of that happened while it slept

    await redis.resume(); // seen what the pause shows: no need to wait out the rest of it
    await eventually(async () => (await post('tools/list', session)).status === 200, pauseMs + 3_000);
    expect(await storeErrors('get')).toBeGreaterThan(errorsBefore);
  });

  it('killed: fast 503, JWT-only requests pass; restarted: the same gateway recovers and the binding survived', async () => {
    const session = await newSession();
    await redis.kill();
    await expectStoreDependentRequestsRefused(session);
    // Once the connection is known to be gone, refusals are immediate rather than timeouts.
    const again = await post('tools/list', session);
    expect(again.status).toBe(503);
    expect(again.ms).toBeLessThan(SLACK_MS);

    await redis.restart();
    // Reconnect attempts back off to one every 2 s; the rest is slack for a loaded CI machine.
    const recoveredIn = await eventually(async () => {
      const reply = await post('tools/list', session);
      lastSeen = `${reply.status} ${JSON.stringify(reply.json)}`;
      return reply.status === 200;
    }, 10_000);
    expect(recoveredIn).toBeLessThan(10_000);
    // Another principal still cannot use it: the binding itself came back, not a hole.
    const bob = await issuer.token({ audience: RESOURCE, sub: 'bob' });
    const intruder = await fetch(`${gateway.url}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bob}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...session },
      body: rpc('tools/list'),
    });
    expect(intruder.status).toBe(404);
  });
});

describe('upstream faults', () => {
  it('killed mid-stream: the stream ends cleanly, an in-flight POST gets 502, the gateway stays up and recovers', async () => {
    const stream = await new Promise<{ events: () => number; closed: Promise<boolean> }>((resolve, reject) => {
      const req = request(`${gateway.url}/mcp`, { headers: { authorization: `Bearer ${alice}`, accept: 'text/event-stream' }, agent: false }, (res) => {
        if (res.statusCode !== 200) return reject(new Error(`stream answered ${res.statusCode}`));
        let events = 0;
        res.setEncoding('utf8').on('data', (chunk: string) => (events += chunk.split('\n\n').length - 1));
        res.on('error', () => undefined);
        resolve({ events: () => events, closed: new Promise((done) => res.once('close', () => done(res.complete))) });
      });
      req.once('error', reject);
      req.end();
    });
    await eventually(async () => stream.events() >= 3, 2_000);
    const inFlight = post('tools/list', { 'x-test-delay-ms': '5000' });
    await new Promise((r) => setTimeout(r, 100));

    await upstream.kill();
    expect(await stream.closed).toBe(true); // a clean end: the client reconnects with Last-Event-ID
    const cut = await inFlight;
    expect(cut.status).toBe(502);
    expect(cut.json).toMatchObject({ error: 'bad_gateway' });

    const down = await post('tools/list');
    expect(down.status).toBe(502);
    expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);

    await upstream.restart();
    expect((await post('tools/list')).status).toBe(200);
  });
});
