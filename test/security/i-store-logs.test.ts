/**
 * SECURITY-CASES group I (store and logs, cases 43–45) for the built-in AS on a real redis-server
 * that persists as deployed (appendonly, fsync always):
 * - I43: Redis paused (SIGSTOP: hung) or killed → /register, /token, /authorize and /revoke answer
 *   503 temporarily_unavailable within the store timeout, issue nothing (no client, no token, no
 *   code), the gateway stays up, and it recovers without a restart — a code obtained before the
 *   outage is still redeemable after it (nothing was consumed while failing);
 * - I44: ids holding `:` and `*` get keys of their own (hashed), and KEYS patterns built from raw ids
 *   match nothing; a registration flood against Redis stays within the rate limit.
 * - I44/I45 over a whole flow (no secret in logs, metrics, errors or the Redis dump): secrets-canary.test.ts.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { newVerifier } from '../helpers/oauth-requests.js';
import { authorize, dumpRedis, registerClient, startRedisAsGateway, tokenRequest, type RedisAsGateway } from './fixtures/as-on-redis.js';

const STORE_TIMEOUT_MS = 500;
/** HTTP and scheduling on a loaded machine, on top of the store timeout. */
const SLACK_MS = 600;
const PREFIX = 'istore:';

let redisDir: string;
let redis: RedisServer;
let gateway: RedisAsGateway;

beforeAll(async () => {
  redisDir = await mkdtemp(join(tmpdir(), 'mag-redis-'));
  redis = await startRedisServer(['--dir', redisDir, '--appendonly', 'yes', '--appendfsync', 'always', '--maxmemory-policy', 'noeviction']);
  gateway = await startRedisAsGateway({
    redisUrl: redis.url,
    keyPrefix: PREFIX,
    upstream: 'http://127.0.0.1:9/mcp',
    storeTimeout: `${STORE_TIMEOUT_MS}ms`,
    trustProxy: true,
    registrationRateLimit: { max: 5, windowMs: 60_000 },
  });
});
afterAll(async () => {
  await gateway?.stop();
  await redis?.stop();
  await rm(redisDir, { recursive: true, force: true });
});

let ip = 0;
const freshIp = () => `198.51.100.${++ip}`;

async function timed(request: () => Promise<Response>) {
  const started = performance.now();
  const res = await request();
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, ms: performance.now() - started };
}

const register = () =>
  timed(() =>
    fetch(`${gateway.issuer}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': freshIp() },
      body: JSON.stringify({ client_name: 'outage', redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'none' }),
    }),
  );

const clientKeys = async () => (await dumpRedis(gateway.redis, `${PREFIX}client:`)).length;

/** Everything that needs the store is refused the same way: typed 503, bounded, nothing issued. */
async function expectRefusedDuringOutage(client: Awaited<ReturnType<typeof registerClient>>, code: string, verifier: string, boundMs: number) {
  const [reg, tok, page, revoke, health] = await Promise.all([
    register(),
    tokenRequest(gateway, { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri, client_id: client.id }),
    timed(() => fetch(`${gateway.issuer}/authorize?client_id=${client.id}&response_type=code`, { redirect: 'manual' })),
    timed(() => fetch(`${gateway.issuer}/revoke`, { method: 'POST', body: new URLSearchParams({ token: 'x', client_id: client.id }) })),
    timed(() => fetch(`${gateway.issuer}/healthz`)),
  ]);
  expect(reg.status, reg.text).toBe(503);
  expect(JSON.parse(reg.text)).toMatchObject({ error: 'temporarily_unavailable' });
  expect(reg.text).not.toContain('client_id');
  expect(reg.ms).toBeLessThan(boundMs);
  expect(tok.status, tok.text).toBe(503);
  expect(tok.json).toMatchObject({ error: 'temporarily_unavailable' });
  expect(tok.json).not.toHaveProperty('access_token');
  expect(tok.headers.get('cache-control')).toBe('no-store');
  expect(tok.ms).toBeLessThan(boundMs);
  expect(page.status).toBe(503);
  expect(page.headers.get('location')).toBeNull();
  expect(page.headers.get('content-type')).toMatch(/^text\/html/);
  expect(page.ms).toBeLessThan(boundMs);
  expect(revoke.status).toBe(503);
  expect(revoke.ms).toBeLessThan(boundMs);
  expect(health.status).toBe(200);
}

async function eventually(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const started = performance.now();
  while (!(await check())) {
    if (performance.now() - started > timeoutMs) throw new Error('did not recover in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('[I43] Redis down or paused: 503 within a bounded time, nothing issued, recovery without a restart', () => {
  it('paused (SIGSTOP): every AS endpoint that needs the store answers 503 within the store timeout; the code survives', async () => {
    const client = await registerClient(gateway);
    const verifier = newVerifier();
    const code = (await authorize(gateway, client, { verifier })).searchParams.get('code')!;
    const before = await clientKeys();
    const pauseMs = 2_500;
    const pausedAt = performance.now();
    await redis.pause(pauseMs);

    await expectRefusedDuringOutage(client, code, verifier, STORE_TIMEOUT_MS + SLACK_MS);
    const readyz = await fetch(`${gateway.issuer}/readyz`);
    expect(readyz.status).toBe(200);
    expect(await readyz.json()).toMatchObject({ store: 'unavailable' });
    expect(performance.now() - pausedAt).toBeLessThan(pauseMs);

    await redis.resume(); // seen what the pause shows: no need to wait out the rest of it
    await eventually(async () => (await register()).status === 201, pauseMs + 3_000);
    // The refused registration left nothing; only the one after recovery was stored.
    expect(await clientKeys()).toBe(before + 1);
    const redeemed = await tokenRequest(gateway, { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri, client_id: client.id });
    expect(redeemed.status, redeemed.text).toBe(200);
  });

  it('killed: fast 503s; restarted: the same gateway recovers, and what was stored before is still there', async () => {
    const client = await registerClient(gateway);
    const verifier = newVerifier();
    const code = (await authorize(gateway, client, { verifier })).searchParams.get('code')!;
    await redis.kill();
    await expectRefusedDuringOutage(client, code, verifier, STORE_TIMEOUT_MS + SLACK_MS);
    // Once the connection is known to be gone, refusals are immediate.
    const again = await register();
    expect(again.status).toBe(503);
    expect(again.ms).toBeLessThan(SLACK_MS);

    await redis.restart();
    await eventually(async () => (await register()).status === 201, 5_000);
    const redeemed = await tokenRequest(gateway, { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri, client_id: client.id });
    expect(redeemed.status, redeemed.text).toBe(200);
    expect(redeemed.json.access_token).toBeTruthy();
  });
});

describe('[I44] key names cannot collide through ":" or "*" in ids', () => {
  it('users "eve:*", "eve" and "*" of one client get three consent keys, hashed; raw-id patterns match nothing', async () => {
    const client = await registerClient(gateway);
    const before = new Set((await dumpRedis(gateway.redis, `${PREFIX}consent:`)).map((k) => k.key));
    for (const user of ['eve:*', 'eve', '*']) {
      const callback = await authorize(gateway, client, { verifier: newVerifier(), user });
      expect(callback.searchParams.get('code')).toBeTruthy();
    }
    const added = (await dumpRedis(gateway.redis, `${PREFIX}consent:`)).filter((k) => !before.has(k.key));
    expect(added).toHaveLength(3);
    for (const { key } of added) expect(key).toMatch(/^istore:consent(?::[A-Za-z0-9_-]{43}){3}$/);
    for (const pattern of [`${PREFIX}consent:*eve*`, `${PREFIX}*:eve:*`, `${PREFIX}consent:*:${client.id}`, `${PREFIX}*${client.id}*`]) {
      expect(await gateway.redis.keys(pattern), pattern).toEqual([]);
    }
  });

  it('[D18] a concurrent registration flood from one IP against Redis stays within the limit', async () => {
    const floodIp = '203.0.113.99';
    const results = await Promise.all(
      Array.from({ length: 30 }, () =>
        fetch(`${gateway.issuer}/register`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-forwarded-for': floodIp },
          body: JSON.stringify({ redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'none' }),
        }).then((r) => r.status),
      ),
    );
    expect(results.every((s) => s === 201 || s === 429)).toBe(true);
    expect(results.filter((s) => s === 201).length).toBeLessThanOrEqual(5);
  });
});
