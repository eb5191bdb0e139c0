/**
 * J54: floods of the built-in AS's unauthenticated endpoints. Every endpoint anyone may call without a
 * credential (/authorize GET and POST, the consent and login posts, /register, /token, /revoke) answers
 * 429 with Retry-After and a JSON error past its per-address limit, before reading the body or writing
 * anything; the address is the socket peer, or the trust_proxy hop's X-Forwarded-For entry and only
 * then; the store failing lets requests through (counted). A flood of /authorize from many addresses
 * never evicts a session binding, a grant or a registration on the memory store.
 */
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAddress, rateLimitAddress } from '../../src/authorization-server/helpers/client-ip.js';
import { floodLimitOf } from '../../src/authorization-server/endpoints/flood-limits.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { pendingAuthorizationKey, sessionBindingKey, grantKey, clientKey, rateLimitKey } from '../../src/store/key-names.js';
import { StoreUnavailableError, type Store } from '../../src/store/store.js';
import { headlessUser, startAsGateway, startBoundedAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { startTestGateway } from '../helpers/gateway.js';
import { devAuthorizationServer, originYaml } from '../helpers/gateway-config.js';
import { connectWithOAuth } from '../helpers/mcp-client.js';
import { codeRequestUrl, newVerifier } from '../helpers/oauth-requests.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';

/** Small limits in windows long enough that no test straddles two of them. */
const SMALL = { requests: 3, window: '1h' };
const SMALL_LIMITS = { authorize: SMALL, token: SMALL, register: SMALL, interaction: SMALL, registrations: { requests: 2, window: '1h' } };

/** A distinct IPv4 address per call (from 10.0.0.0/8, far more than any test uses). */
let next = 0;
const newAddress = () => {
  next++;
  return `10.${(next >> 16) & 255}.${(next >> 8) & 255}.${next & 255}`;
};

interface Sent {
  status: number;
  headers: Headers;
  json: Record<string, unknown>;
}

async function send(base: string, endpoint: Endpoint, headers: Record<string, string> = {}): Promise<Sent> {
  const res = await fetch(`${base}${endpoint.path}`, { method: endpoint.method, headers: { ...endpoint.headers, ...headers }, body: endpoint.body, redirect: 'manual' });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  if ((res.headers.get('content-type') ?? '').includes('json') && text) json = JSON.parse(text) as Record<string, unknown>;
  return { status: res.status, headers: res.headers, json };
}

interface Endpoint {
  name: string;
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
}

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };
/** Every unauthenticated endpoint, each with a request it refuses or answers cheaply (the limit comes first either way). */
const ENDPOINTS: Endpoint[] = [
  { name: 'GET /authorize', method: 'GET', path: '/authorize?client_id=nobody&response_type=code' },
  { name: 'POST /authorize', method: 'POST', path: '/authorize', headers: FORM, body: 'client_id=nobody&response_type=code' },
  { name: 'POST /authorize/consent', method: 'POST', path: '/authorize/consent', headers: FORM, body: 'interaction=x&csrf=y&decision=approve' },
  { name: 'POST /authorize/login/dev', method: 'POST', path: '/authorize/login/dev', headers: FORM, body: 'interaction=x&username=eve' },
  { name: 'POST /register', method: 'POST', path: '/register', headers: { 'content-type': 'application/json' }, body: '{}' },
  { name: 'POST /token', method: 'POST', path: '/token', headers: FORM, body: 'grant_type=authorization_code&code=x&client_id=nobody' },
  { name: 'POST /revoke', method: 'POST', path: '/revoke', headers: FORM, body: 'token=x&client_id=nobody' },
];

function expectTooMany(res: Sent, maxRetryAfter: number): void {
  expect(res.status).toBe(429);
  const retryAfter = res.headers.get('retry-after') ?? '';
  expect(retryAfter).toMatch(/^[1-9][0-9]*$/);
  expect(Number(retryAfter)).toBeLessThanOrEqual(maxRetryAfter);
  expect(res.json).toEqual({ error: 'too_many_requests', error_description: expect.any(String) });
}

describe('[J54] per-address limits on every unauthenticated endpoint (trust_proxy)', () => {
  let gateway: AsGateway;
  beforeAll(async () => {
    gateway = await startAsGateway({ upstream: 'http://127.0.0.1:9/mcp', gateway: { trust_proxy: true }, authorizationServer: { rate_limits: SMALL_LIMITS } });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it.each(ENDPOINTS.map((e) => [e.name, e] as const))('[J54] %s → 429 with Retry-After and a JSON error past the limit, nothing stored, other addresses unaffected', async (_name, endpoint) => {
    const flooder = newAddress();
    for (let i = 0; i < SMALL.requests; i++) expect((await send(gateway.issuer, endpoint, { 'x-forwarded-for': flooder })).status).not.toBe(429);
    const mark = gateway.recording.writes.length;
    const refused = await Promise.all(Array.from({ length: 5 }, () => send(gateway.issuer, endpoint, { 'x-forwarded-for': flooder })));
    for (const res of refused) expectTooMany(res, 3600);
    expect(gateway.recording.writes.slice(mark)).toEqual([]);
    expect((await send(gateway.issuer, endpoint, { 'x-forwarded-for': newAddress() })).status).not.toBe(429);
  });

  it('[J54] a concurrent burst from one address passes exactly the limit (atomic counter, no read-modify-write race)', async () => {
    const flooder = newAddress();
    const results = await Promise.all(Array.from({ length: 30 }, () => send(gateway.issuer, ENDPOINTS[0]!, { 'x-forwarded-for': flooder })));
    expect(results.filter((r) => r.status !== 429)).toHaveLength(SMALL.requests);
  });

  it('[J54] the bucket is the entry the trusted hop appended: entries the client wrote before it change nothing', async () => {
    const real = newAddress();
    for (let i = 0; i < SMALL.requests; i++) expect((await send(gateway.issuer, ENDPOINTS[0]!, { 'x-forwarded-for': `${newAddress()}, ${real}` })).status).not.toBe(429);
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof(fc.ipV4(), fc.ipV6(), fc.constantFrom('unknown', '', '127.0.0.1')), { minLength: 1, maxLength: 4 }), async (spoofed) => {
        expectTooMany(await send(gateway.issuer, ENDPOINTS[0]!, { 'x-forwarded-for': [...spoofed, real].join(', ') }), 3600);
        // The same entries with another real client last: that client's own bucket.
        expect((await send(gateway.issuer, ENDPOINTS[5]!, { 'x-forwarded-for': [...spoofed, newAddress()].join(', ') })).status).not.toBe(429);
      }),
      { numRuns: 20 },
    );
  });

  it('[J54] IPv6 clients are one bucket per /64, and an IPv4-mapped address is its IPv4 address', async () => {
    const v6 = (host: number) => `2001:db8:${(next++ & 0xffff).toString(16)}:1::${host.toString(16)}`;
    const first = v6(1);
    const prefix = first.slice(0, first.lastIndexOf('::'));
    for (let i = 0; i < SMALL.requests; i++) expect((await send(gateway.issuer, ENDPOINTS[0]!, { 'x-forwarded-for': `${prefix}::${i + 1}` })).status).not.toBe(429);
    expectTooMany(await send(gateway.issuer, ENDPOINTS[0]!, { 'x-forwarded-for': `[${prefix}::ffff]:443` }), 3600);

    const v4 = newAddress();
    for (let i = 0; i < SMALL.requests; i++) await send(gateway.issuer, ENDPOINTS[0]!, { 'x-forwarded-for': v4 });
    expectTooMany(await send(gateway.issuer, ENDPOINTS[0]!, { 'x-forwarded-for': `::ffff:${v4}` }), 3600);
  });

  it('[J54] registrations: each real client behind the ingress has its own budget', async () => {
    const body = JSON.stringify({ redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'none' });
    const register = (address: string) => send(gateway.issuer, { name: 'register', method: 'POST', path: '/register', headers: { 'content-type': 'application/json' }, body }, { 'x-forwarded-for': address });
    const alice = newAddress();
    const bob = newAddress();
    expect((await register(alice)).status).toBe(201);
    expect((await register(alice)).status).toBe(201);
    expectTooMany(await register(alice), 3600);
    expect((await register(bob)).status).toBe(201);
  });
});

describe('[J54] without trust_proxy, X-Forwarded-For is never believed', () => {
  let gateway: AsGateway;
  beforeAll(async () => {
    gateway = await startAsGateway({ upstream: 'http://127.0.0.1:9/mcp', authorizationServer: { rate_limits: SMALL_LIMITS } });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('[J54] a client cannot pick its own bucket: every X-Forwarded-For value lands in the socket address\'s bucket', async () => {
    for (let i = 0; i < SMALL.requests; i++) expect((await send(gateway.issuer, ENDPOINTS[5]!, { 'x-forwarded-for': newAddress() })).status).not.toBe(429);
    await fc.assert(
      fc.asyncProperty(fc.oneof(fc.ipV4(), fc.ipV6(), fc.stringMatching(/^[\x21-\x7e]{0,40}$/)), async (spoofed) => {
        const res = await send(gateway.issuer, ENDPOINTS[5]!, { 'x-forwarded-for': spoofed, 'x-real-ip': spoofed, forwarded: `for=${spoofed}` });
        expectTooMany(res, 3600);
      }),
      { numRuns: 25 },
    );
  });

  it('[J54] registrations from behind one ingress share the ingress\'s bucket', async () => {
    const body = JSON.stringify({ redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'none' });
    const register = () => send(gateway.issuer, { name: 'register', method: 'POST', path: '/register', headers: { 'content-type': 'application/json' }, body }, { 'x-forwarded-for': newAddress() });
    expect((await register()).status).toBe(201);
    expect((await register()).status).toBe(201);
    expectTooMany(await register(), 3600);
  });
});

describe('[J54] trust_proxy: 2 (CDN + ingress): the client is the second entry from the right', () => {
  let gateway: AsGateway;
  beforeAll(async () => {
    gateway = await startAsGateway({ upstream: 'http://127.0.0.1:9/mcp', gateway: { trust_proxy: 2 }, authorizationServer: { rate_limits: SMALL_LIMITS } });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('[J54] every user behind one CDN node gets a bucket of their own, and what the client wrote before is ignored', async () => {
    const cdn = newAddress();
    const client = newAddress();
    for (let i = 0; i < SMALL.requests; i++) expect((await send(gateway.issuer, ENDPOINTS[0]!, { 'x-forwarded-for': `${newAddress()}, ${client}, ${cdn}` })).status).not.toBe(429);
    expectTooMany(await send(gateway.issuer, ENDPOINTS[0]!, { 'x-forwarded-for': `${newAddress()}, ${client}, ${newAddress()}` }), 3600);
    // Another user through the same CDN node: their own bucket.
    expect((await send(gateway.issuer, ENDPOINTS[0]!, { 'x-forwarded-for': `${client}, ${newAddress()}, ${cdn}` })).status).not.toBe(429);
    // One entry only (the ingress reached directly): the ingress's entry is the client.
    const direct = newAddress();
    for (let i = 0; i < SMALL.requests; i++) await send(gateway.issuer, ENDPOINTS[5]!, { 'x-forwarded-for': direct });
    expectTooMany(await send(gateway.issuer, ENDPOINTS[5]!, { 'x-forwarded-for': direct }), 3600);
  });
});

describe('[J54] pending authorizations: the budget across all addresses is not spent by invalid requests', () => {
  let gateway: AsGateway;
  beforeAll(async () => {
    gateway = await startAsGateway({
      upstream: 'http://127.0.0.1:9/mcp',
      gateway: { trust_proxy: true },
      authorizationServer: { rate_limits: { pending_authorizations: { requests: 5, window: '1h' } } },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  // Spent only by valid requests, each address first against its share (j-pending-authorization-budget.test.ts).
  it('[J54] invalid /authorize from ever new addresses never meets the global budget (issue 26); /token neither', async () => {
    for (let i = 0; i < 20; i++) expect((await send(gateway.issuer, ENDPOINTS[i % 2]!, { 'x-forwarded-for': newAddress() })).status).toBe(400);
    expect((await send(gateway.issuer, ENDPOINTS[5]!, { 'x-forwarded-for': newAddress() })).status).not.toBe(429);
  });
});

/** A memory store whose counters fail as an unreachable Redis would: at once, or only after `delayMs`. */
class CounterlessStore extends MemoryStore {
  constructor(private readonly delayMs = 0) {
    super({ maxEntries: 1000 });
  }
  override async increment(): Promise<number> {
    if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
    throw new StoreUnavailableError('redis INCR failed: no answer');
  }
}

async function startOnStore(store: Store | { redisUrl: string }, gatewayYaml: Record<string, unknown> = {}): Promise<{ issuer: string; stop(): Promise<void> }> {
  const gateway = await startTestGateway(
    (origin) => ({
      'gateway.yaml': originYaml(origin, {
        log_level: 'silent',
        authorization_server: devAuthorizationServer({ rate_limits: SMALL_LIMITS }),
        ...('redisUrl' in store && { store: { kind: 'redis', url: store.redisUrl, key_prefix: 'jflood:' } }),
        ...gatewayYaml,
      }),
      'everything.yaml': { path: '/everything/mcp', upstream: 'http://127.0.0.1:9/mcp', scopes_supported: ['mcp:read'] },
    }),
    {},
    { ...(!('redisUrl' in store) && { store }) },
  );
  return { issuer: gateway.url, stop: () => gateway.stop() };
}

const failOpenCount = async (issuer: string, limit: string) => {
  const metrics = await (await fetch(`${issuer}/metrics`)).text();
  return Number(new RegExp(`^mag_rate_limit_fail_open_total\\{limit="${limit}"\\} (\\d+)`, 'm').exec(metrics)?.[1] ?? 0);
};

describe('[J54] the store failing lets requests through (fail open), counted', () => {
  let failing: Awaited<ReturnType<typeof startOnStore>>;
  let slow: Awaited<ReturnType<typeof startOnStore>>;
  beforeAll(async () => {
    failing = await startOnStore(new CounterlessStore());
    slow = await startOnStore(new CounterlessStore(5_000));
  });
  afterAll(async () => {
    await failing?.stop();
    await slow?.stop();
  });

  it('[J54] over the limit with the counter unreachable: no 429, and mag_rate_limit_fail_open_total counts it', async () => {
    const { issuer } = failing;
    for (const endpoint of ENDPOINTS) {
      for (let i = 0; i < SMALL.requests + 3; i++) expect((await send(issuer, endpoint)).status, endpoint.name).not.toBe(429);
    }
    const n = SMALL.requests + 3;
    expect(await failOpenCount(issuer, 'authorize')).toBe(2 * n);
    // Invalid requests write no pending authorization, so they count against no budget of it (issue 26).
    expect(await failOpenCount(issuer, 'pending_authorizations')).toBe(0);
    expect(await failOpenCount(issuer, 'token')).toBe(2 * n);
    expect(await failOpenCount(issuer, 'interaction')).toBe(2 * n);
    expect(await failOpenCount(issuer, 'register')).toBe(n);
  });

  it('[J54] a counter that does not answer holds no request for long: the handler keeps its own store timeout', async () => {
    const { issuer } = slow;
    for (const endpoint of ENDPOINTS) {
      const started = performance.now();
      expect((await send(issuer, endpoint)).status, endpoint.name).not.toBe(429);
      // Well under the counter's 5 s (the handler did not wait for it), with room for a loaded machine.
      expect(performance.now() - started, endpoint.name).toBeLessThan(3_000);
    }
    expect(await failOpenCount(issuer, 'authorize')).toBe(2);
    expect(await failOpenCount(issuer, 'pending_authorizations')).toBe(0);
  });
});

describe('[J54] replicas on one Redis share every limit', () => {
  let redis: RedisServer;
  let replicas: Array<Awaited<ReturnType<typeof startOnStore>>> = [];
  beforeAll(async () => {
    redis = await startRedisServer();
    replicas = await Promise.all([0, 1].map(() => startOnStore({ redisUrl: redis.url }, { trust_proxy: true })));
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await redis?.stop();
  });

  it.each(ENDPOINTS.map((e) => [e.name, e] as const))('[J54] %s: a concurrent burst from one address over two replicas passes exactly the limit', async (_name, endpoint) => {
    const flooder = newAddress();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => send(replicas[i % 2]!.issuer, endpoint, { 'x-forwarded-for': flooder })));
    expect(results.filter((r) => r.status !== 429)).toHaveLength(SMALL.requests);
    for (const res of results.filter((r) => r.status === 429)) expectTooMany(res, 3600);
    expect((await send(replicas[0]!.issuer, endpoint, { 'x-forwarded-for': newAddress() })).status).not.toBe(429);
  });
});

describe('[J54] a flood of /authorize never evicts sessions, grants or registrations (memory store)', () => {
  let gateway: { issuer: string; stop(): Promise<void> };
  let issuer: string;
  const MAX_ENTRIES = 300;

  beforeAll(async () => {
    gateway = await startBoundedAsGateway(MAX_ENTRIES, { trust_proxy: true });
    issuer = gateway.issuer;
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('[J54] 2,500 pending authorizations from 2,500 addresses; the MCP session, the refresh token and the registration still work', async () => {
    const mcpUrl = `${issuer}/everything/mcp`;
    const conn = await connectWithOAuth(mcpUrl, { onPage: headlessUser('alice') });
    try {
      expect(conn.transport.sessionId).toBeTruthy();
      const client = { id: conn.provider.clientInformation()!.client_id, redirectUri: String(conn.provider.redirectUrl) };
      const authorization = (scope?: string) => codeRequestUrl(issuer, { client, verifier: newVerifier(), state: 's', resource: mcpUrl, scope });

      // The flood: valid authorization requests (each leaves a pending authorization), every one from a new address.
      const FLOOD = 2500;
      for (let batch = 0; batch < FLOOD; batch += 50) {
        const pages = await Promise.all(
          Array.from({ length: 50 }, () => {
            return fetch(authorization('mcp:read'), { headers: { 'x-forwarded-for': newAddress() }, redirect: 'manual' }).then(async (r) => (await r.text(), r.status));
          }),
        );
        expect(pages.every((s) => s === 200)).toBe(true);
      }

      // The session binding: the same MCP session keeps working.
      const echoed = await conn.client.callTool({ name: 'echo', arguments: { message: 'after the flood' } });
      expect(echoed.content).toEqual([{ type: 'text', text: 'Echo: after the flood' }]);
      // The grant: its refresh token still rotates.
      const before = conn.tokens()!;
      await expect(auth(conn.provider, { serverUrl: mcpUrl })).resolves.toBe('AUTHORIZED');
      expect(conn.tokens()!.refresh_token).not.toBe(before.refresh_token);
      // The registration: the client is still known (a consent page, not an unknown-client page).
      const page = await fetch(authorization(), { headers: { 'x-forwarded-for': newAddress() } });
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('mcp-auth-gateway test harness');
    } finally {
      await conn.close();
    }
    // 2,500 consent pages rendered: 12 s here, over the default 30 s when the machine is loaded.
  }, 120_000);
});

describe('[J54] memory store budgets per key class', () => {
  const ttl = 60_000;
  it('[J54] floods of pending authorizations and rate-limit counters never evict the main classes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 0, max: 3000 }), fc.integer({ min: 0, max: 3000 }), async (durable, pending, counters) => {
        const store: Store = new MemoryStore({ maxEntries: 50 });
        const kept = Array.from({ length: durable }, (_, i) => [sessionBindingKey('/r', `s${i}`), grantKey(`g${i}`), clientKey(`c${i}`)][i % 3]!);
        // A value each: sessions of one principal (one value) are capped per principal on their own.
        for (const key of kept) await store.set(key, `kept ${key}`, ttl);
        for (let i = 0; i < pending; i++) await store.set(pendingAuthorizationKey(`p${i}`), 'x', ttl);
        for (let i = 0; i < counters; i++) await store.increment(rateLimitKey('authorize', `a${i}`), ttl);
        for (const key of kept) expect(await store.get(key)).toBe(`kept ${key}`);
        // The flood's own classes stay bounded: the newest survive, the oldest go.
        if (pending > 1000) expect(await store.get(pendingAuthorizationKey('p0'))).toBeUndefined();
        if (pending > 0) expect(await store.get(pendingAuthorizationKey(`p${pending - 1}`))).toBe('x');
      }),
      { numRuns: 25 },
    );
  });
});

describe('[J54] which limit a path counts against', () => {
  it.each([
    ['/authorize', 'authorize'],
    ['/authorize/', 'interaction'],
    ['/authorize/consent', 'interaction'],
    ['/authorize/login/dev', 'interaction'],
    ['/authorize/login/oidc/callback', 'interaction'],
    ['/authorize/anything/else', 'interaction'],
    ['/token', 'token'],
    ['/revoke', 'token'],
    ['/register', 'register'],
    // Signed by the IdP, server to server: never dropped by a limit.
    ['/authorize/login/oidc/backchannel-logout', undefined],
    ['/jwks.json', undefined],
    ['/.well-known/oauth-authorization-server', undefined],
  ])('[J54] %s → %s', (path, limit) => {
    expect(floodLimitOf(path)).toBe(limit);
  });
});

describe('[J54] client addresses as rate limits key them', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    [' 203.0.113.7 ', '203.0.113.7'],
    ['203.0.113.7:51234', '203.0.113.7'],
    ['[2001:db8::1]:443', '2001:db8:0:0::/64'],
    ['2001:db8:0:0:ffff::1', '2001:db8:0:0::/64'],
    ['2001:DB8::abcd:1', '2001:db8:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['::ffff:cb00:7107', '203.0.113.7'],
    ['64:ff9b::203.0.113.7', '64:ff9b:0:0::/64'],
  ])('[J54] %j → bucket %j', (raw, bucket) => {
    const address = parseAddress(raw);
    expect(address).toBeDefined();
    expect(rateLimitAddress(address!)).toBe(bucket);
  });

  it.each(['', 'unknown', '_hidden', 'evil.example', '203.0.113.7.1', '999.1.1.1', '2001:db8::1::2', 'for=1.2.3.4', '01.2.3.4'])('[J54] %j is not an address (the socket address is used instead)', (raw) => {
    expect(parseAddress(raw)).toBeUndefined();
  });

  it('[J54] every address of one /64 is one bucket; different /64s are different buckets', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 8, maxLength: 8 }), fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 4, maxLength: 4 }), (groups, host) => {
        fc.pre(groups[0] !== 0); // not an IPv4-mapped address
        const a = groups.map((g) => g.toString(16)).join(':');
        const b = [...groups.slice(0, 4), ...host].map((g) => g.toString(16)).join(':');
        expect(rateLimitAddress(parseAddress(a)!)).toBe(rateLimitAddress(parseAddress(b)!));
        const other = [...groups.slice(0, 3), (groups[3]! + 1) & 0xffff, ...host].map((g) => g.toString(16)).join(':');
        expect(rateLimitAddress(parseAddress(other)!)).not.toBe(rateLimitAddress(parseAddress(a)!));
      }),
    );
  });
});
