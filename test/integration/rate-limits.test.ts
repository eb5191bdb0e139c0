/**
 * Route rate limits (`rate_limits`, DESIGN §7.3) through the real gateway:
 * JWTs of a local issuer for several principals, a recording upstream (what
 * reached it), and
 * - one process on the memory store: per principal, per client, per subject,
 *   a `match` on tools/call + a tool glob, batches, GET, the 429 itself
 *   (Retry-After, JSON body, audit line, metric), and a reload;
 * - two replicas on one real redis-server, requests alternating between them:
 *   exactly the configured number pass, in sequence and all at once;
 * - that redis-server paused mid-load: the limits fail open within
 *   `store.command_timeout`, counted in mag_route_rate_limit_fail_open_total.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { AuditEvent } from '../../src/observability/audit.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml, PUBLIC_URL } from '../helpers/gateway-config.js';
import { startLocalIssuer, type LocalIssuer } from '../helpers/local-issuer.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';

let issuer: LocalIssuer;
let upstream: ScriptedUpstream;
let redis: RedisServer;
const gateways: TestGateway[] = [];

beforeAll(async () => {
  [issuer, upstream, redis] = await Promise.all([startLocalIssuer(), startScriptedUpstream(), startRedisServer()]);
});

afterAll(async () => {
  await Promise.all(gateways.map((g) => g.stop()));
  await Promise.all([issuer?.close(), upstream?.close()]);
  await redis?.stop();
});

/** A route at `path` taking the local issuer's tokens, with `rateLimits`. */
function route(path: string, rateLimits: unknown[]): Record<string, unknown> {
  return {
    path,
    upstream: upstream.url,
    authorization_servers: [issuer.issuer],
    token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['ES256'] } },
    rate_limits: rateLimits,
  };
}

async function start(files: Record<string, unknown>, audit?: AuditEvent[]): Promise<TestGateway> {
  const gateway = await startTestGateway(files, {}, audit ? { audit: { enabled: true, record: (event) => audit.push(structuredClone(event)) } } : {});
  gateways.push(gateway);
  return gateway;
}

const token = (path: string, sub: string, clientId: string) => issuer.token({ audience: `${PUBLIC_URL}${path}`, sub, clientId });
const call = (name: string, id = 1) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {} } });
const list = (id = 1) => ({ jsonrpc: '2.0', id, method: 'tools/list', params: {} });

async function post(gateway: TestGateway, path: string, bearer: string, payload: unknown) {
  const res = await fetch(`${gateway.url}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify(payload),
  });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

const statuses = async (n: number, send: (i: number) => Promise<{ status: number }>) => {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await send(i)).status);
  return out;
};

async function metric(gateway: TestGateway, name: string, labels: string): Promise<number> {
  const text = await gateway.metrics.registry.metrics();
  return Number(new RegExp(`^${name}\\{${labels.replace(/[[\]]/g, '\\$&')}\\} (\\d+)`, 'm').exec(text)?.[1] ?? 0);
}

describe('rate limits on one process (memory store)', () => {
  let gateway: TestGateway;
  const audit: AuditEvent[] = [];
  beforeAll(async () => {
    gateway = await start(
      {
        'gateway.yaml': gatewayYaml(),
        'principal.yaml': route('/principal/mcp', [{ per: 'principal', requests: 3, window: '1m' }]),
        'client.yaml': route('/client/mcp', [{ per: 'client', requests: 3, window: '1m' }]),
        'subject.yaml': route('/subject/mcp', [{ per: 'subject', requests: 3, window: '1m' }]),
        'tools.yaml': route('/tools/mcp', [{ per: 'principal', match: { method: 'tools/call', tool: 'delete_*' }, requests: 2, window: '1h' }]),
      },
      audit,
    );
  });

  it('per principal: the fourth request of alice through app is 429; alice through another client and bob are counted apart', async () => {
    const path = '/principal/mcp';
    const [aliceApp, aliceOther, bobApp] = await Promise.all([token(path, 'alice', 'app'), token(path, 'alice', 'other'), token(path, 'bob', 'app')]);
    expect(await statuses(4, () => post(gateway, path, aliceApp, list()))).toEqual([200, 200, 200, 429]);
    expect((await post(gateway, path, aliceOther, list())).status).toBe(200);
    expect((await post(gateway, path, bobApp, list())).status).toBe(200);
    // A fresh token of the same principal is the same principal.
    expect((await post(gateway, path, await token(path, 'alice', 'app'), list())).status).toBe(429);
  });

  it('per client: every user of one client shares its window; another client has its own', async () => {
    const path = '/client/mcp';
    const [aliceApp, bobApp, aliceOther] = await Promise.all([token(path, 'alice', 'app'), token(path, 'bob', 'app'), token(path, 'alice', 'other')]);
    expect(await statuses(3, (i) => post(gateway, path, i % 2 ? bobApp : aliceApp, list()))).toEqual([200, 200, 200]);
    expect((await post(gateway, path, bobApp, list())).status).toBe(429);
    expect((await post(gateway, path, aliceOther, list())).status).toBe(200);
  });

  it('per subject: a user cannot dodge the limit by switching clients', async () => {
    const path = '/subject/mcp';
    const [aliceApp, aliceOther, bobApp] = await Promise.all([token(path, 'alice', 'app'), token(path, 'alice', 'other'), token(path, 'bob', 'app')]);
    expect(await statuses(3, (i) => post(gateway, path, i % 2 ? aliceOther : aliceApp, list()))).toEqual([200, 200, 200]);
    expect((await post(gateway, path, aliceOther, list())).status).toBe(429);
    expect((await post(gateway, path, bobApp, list())).status).toBe(200);
  });

  it('a match on tools/call + tool glob counts only those calls; over it: 429 with Retry-After, a JSON body, an audit line, a metric, and nothing upstream', async () => {
    const path = '/tools/mcp';
    const bearer = await token(path, 'carol', 'app');
    expect(await statuses(5, (i) => post(gateway, path, bearer, i % 2 ? list(i) : call('echo', i)))).toEqual([200, 200, 200, 200, 200]);
    expect(await statuses(2, (i) => post(gateway, path, bearer, call(`delete_${i}`)))).toEqual([200, 200]);
    const upstreamBefore = upstream.methods.length;
    const refused = await post(gateway, path, bearer, call('delete_repo'));
    expect(refused.status).toBe(429);
    const retryAfter = refused.headers.get('retry-after')!;
    expect(retryAfter).toMatch(/^[1-9][0-9]*$/);
    // 1 h window, both uses in the current slot: room when that slot leaves the window, 54 to 66 minutes from now.
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(54 * 60);
    expect(Number(retryAfter)).toBeLessThanOrEqual(66 * 60);
    expect(refused.headers.get('content-type')).toMatch(/^application\/json/);
    expect(JSON.parse(refused.body)).toEqual({ error: 'too_many_requests', error_description: expect.stringMatching(/at most 2 per 3600 s \(rate_limits\[0\]\)/) as unknown });
    // A batch holding one matching call is refused whole; calls the limit does not match still pass.
    expect((await post(gateway, path, bearer, [call('echo', 1), call('delete_x', 2)])).status).toBe(429);
    expect(upstream.methods.length).toBe(upstreamBefore);
    expect((await post(gateway, path, bearer, call('echo'))).status).toBe(200);
    expect(await metric(gateway, 'mag_route_rate_limited_total', 'route="/tools/mcp",limit="rate_limits[0]"')).toBe(2);
    const line = audit.find((e) => e.route === path && e.name === 'delete_repo');
    expect(line).toMatchObject({ event: 'decision', decision: 'deny', reason: 'rate_limited', status: 429, sub: 'carol', client_id: 'app' });
    expect(line?.limit).toMatch(/tools\.yaml:\d+$/);
  });

  it('a batch counts each message against a limit without match; bigger than the limit, it never passes', async () => {
    const path = '/principal/mcp';
    const bearer = await token(path, 'dave', 'app');
    expect((await post(gateway, path, bearer, [list(1), list(2)])).status).toBe(200);
    expect((await post(gateway, path, bearer, [list(1), list(2)])).status).toBe(429);
    expect((await post(gateway, path, bearer, list(3))).status).toBe(200);
    const erin = await token(path, 'erin', 'app');
    expect((await post(gateway, path, erin, [list(1), list(2), list(3), list(4)])).status).toBe(429);
  });

  it('a GET counts once against a limit without match', async () => {
    const path = '/principal/mcp';
    const bearer = await token(path, 'frank', 'app');
    expect(await statuses(3, () => post(gateway, path, bearer, list()))).toEqual([200, 200, 200]);
    const res = await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${bearer}`, accept: 'text/event-stream' } });
    await res.body?.cancel();
    expect(res.status).toBe(429);
    expect(audit.find((e) => e.route === path && e.sub === 'frank' && e.reason === 'rate_limited')).toMatchObject({ status: 429, limit: expect.stringMatching(/principal\.yaml:\d+$/) as unknown });
  });

  it('a reload starts with the new limits; a changed limit counts afresh', async () => {
    const path = '/reloaded/mcp';
    await gateway.writeConfig({ 'reloaded.yaml': route(path, [{ per: 'principal', requests: 1, window: '1m' }]) });
    await gateway.reload(await loadConfig(gateway.dir, {}));
    const bearer = await token(path, 'gina', 'app');
    expect(await statuses(2, () => post(gateway, path, bearer, list()))).toEqual([200, 429]);
    await gateway.writeConfig({ 'reloaded.yaml': route(path, [{ per: 'principal', requests: 3, window: '1m' }]) });
    await gateway.reload(await loadConfig(gateway.dir, {}));
    expect(await statuses(4, () => post(gateway, path, bearer, list()))).toEqual([200, 200, 200, 429]);
  });
});

describe('rate limits shared by two replicas on one redis-server', () => {
  let replicas: TestGateway[];
  const path = '/shared/mcp';
  beforeAll(async () => {
    const files = {
      'gateway.yaml': gatewayYaml({ store: { kind: 'redis', url: redis.url, key_prefix: `rl-${randomUUID()}:`, command_timeout: '300ms' } }),
      'shared.yaml': route(path, [
        { per: 'principal', requests: 7, window: '1m' },
        { per: 'principal', match: { method: 'tools/call', tool: 'delete_*' }, requests: 3, window: '1h' },
      ]),
    };
    replicas = [await start(files), await start(files)];
  });

  it('requests alternating between the replicas: exactly the configured number pass, and only they reach the upstream', async () => {
    const bearer = await token(path, `alt-${randomUUID()}`, 'app');
    const before = upstream.methods.length;
    const results = await statuses(12, (i) => post(replicas[i % 2]!, path, bearer, list(i)));
    expect(results).toEqual([...Array<number>(7).fill(200), ...Array<number>(5).fill(429)]);
    expect(upstream.methods.length - before).toBe(7);
  });

  it('30 requests at once over both replicas: exactly 7 pass (one atomic script per decision)', async () => {
    const bearer = await token(path, `burst-${randomUUID()}`, 'app');
    const results = await Promise.all(Array.from({ length: 30 }, (_, i) => post(replicas[i % 2]!, path, bearer, list(i))));
    expect(results.filter((r) => r.status === 200)).toHaveLength(7);
    expect(results.filter((r) => r.status === 429)).toHaveLength(23);
  });

  it('the tool limit applies only to matching calls, across replicas', async () => {
    const bearer = await token(path, `tools-${randomUUID()}`, 'app');
    const results = await statuses(6, (i) => post(replicas[i % 2]!, path, bearer, call(i < 4 ? `delete_${i}` : 'echo', i)));
    expect(results).toEqual([200, 200, 200, 429, 200, 200]);
  });

  it('redis paused mid-load: the limits fail open within command_timeout, counted', async () => {
    const bearer = await token(path, `paused-${randomUUID()}`, 'app');
    // Used up first, so a request that passes can only have failed open.
    await statuses(7, (i) => post(replicas[i % 2]!, path, bearer, list(i)));
    expect((await post(replicas[0]!, path, bearer, list())).status).toBe(429);
    const failOpenBefore = await Promise.all(replicas.map((r) => metric(r, 'mag_route_rate_limit_fail_open_total', 'route="/shared/mcp",limit="rate_limits[0]"')));
    await redis.pause(5_000);
    const timed = await Promise.all(
      Array.from({ length: 6 }, async (_, i) => {
        const started = performance.now();
        const res = await post(replicas[i % 2]!, path, bearer, list(i));
        return { status: res.status, ms: performance.now() - started };
      }),
    );
    expect(timed.map((t) => t.status)).toEqual(Array<number>(6).fill(200));
    // command_timeout 300 ms, plus the request itself on a loaded machine: well before the pause ends,
    // so no request waited for the counter.
    for (const { ms } of timed) expect(ms).toBeLessThan(3_000);
    const failOpenAfter = await Promise.all(replicas.map((r) => metric(r, 'mag_route_rate_limit_fail_open_total', 'route="/shared/mcp",limit="rate_limits[0]"')));
    expect(failOpenAfter[0]! - failOpenBefore[0]!).toBe(3);
    expect(failOpenAfter[1]! - failOpenBefore[1]!).toBe(3);
    // Once the server answers again (resumed now rather than after the rest of the 5 s), the limit holds again.
    await redis.resume();
    await expect.poll(async () => (await post(replicas[1]!, path, bearer, list())).status, { timeout: 10_000, interval: 200 }).toBe(429);
  });
});
