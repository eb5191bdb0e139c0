/**
 * DPoP replay markers at protected routes (DESIGN.md §8.3, "No principal can take what all share"):
 * - [K79] a proof's `jti` is claimed only once policy and rate limits admit the request: a
 *   rate-limited or denied request writes no marker (two replicas on a real redis-server, the
 *   markers counted in Redis), and each user has a share of the class: past it, 429 for that user
 *   alone while another user's DPoP requests pass (memory store of 1,000 entries); on the memory
 *   store too, refused requests spend nothing of it; the share itself on the memory store and on
 *   redis-server (a share of 5: any key, any client, one user).
 * - [K85] a proof accepted by one replica is refused by the other for as long as either could still
 *   accept its `iat`: the marker's lifetime in Redis covers the window both ways plus the replicas'
 *   clock skew, and a fast-check property runs the real proof check at every pair of replica clocks
 *   within that skew against the marker's expiry.
 */
import { Redis } from 'ioredis';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROOF_WINDOW_SECONDS, proofJtiTtlMs, verifyDpopProof } from '../../src/auth/dpop-proof.js';
import { DEFAULT_MAX_CLOCK_SKEW_MS } from '../../src/config/replica-clocks.js';
import { dpopMarkerShare, dpopProofClaimer, principalShareOwner } from '../../src/auth/dpop-replay.js';
import { hashKeyPart } from '../../src/store/key-names.js';
import { dpopKey, proof, type DpopKey } from '../helpers/dpop.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { describeOnEachStore } from '../helpers/store-backends.js';
import { gatewayYaml, jwtRoute, PUBLIC_URL, resourceOf, startRecordingUpstream, startTestIssuer, type RecordingUpstream, type TestIssuer } from '../helpers/security-fixtures.js';

const LIMITED = '/limited/mcp';
const DENYING = '/denying/mcp';
const OPEN = '/open/mcp';
const TOOLS_LIST = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';
const GET_ENV = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-env","arguments":{}}}';
const LIMIT = 3;
const KEY_PREFIX = 'k79:';
/** The default `store.max_clock_skew`, and so the markers' life. */
const REPLICA_CLOCK_SKEW_SECONDS = DEFAULT_MAX_CLOCK_SKEW_MS / 1000;
const PROOF_JTI_TTL_MS = proofJtiTtlMs(DEFAULT_MAX_CLOCK_SKEW_MS);

let issuer: TestIssuer;
let up: RecordingUpstream;
let redis: RedisServer;
let raw: Redis;
const replicas: TestGateway[] = [];

beforeAll(async () => {
  [issuer, up, redis] = await Promise.all([startTestIssuer('RS256'), startRecordingUpstream(), startRedisServer()]);
  raw = new Redis(redis.url, { lazyConnect: false });
  const upstream = `${up.origin}/mcp`;
  const files = {
    'gateway.yaml': gatewayYaml({ log_level: 'warn', store: { kind: 'redis', url: redis.url, key_prefix: KEY_PREFIX } }),
    'limited.yaml': jwtRoute(LIMITED, upstream, issuer, { rate_limits: [{ per: 'subject', requests: LIMIT, window: '1m' }] }),
    'denying.yaml': jwtRoute(DENYING, upstream, issuer, { rules: [{ match: { method: 'tools/call', tool: 'get-env' }, deny: true }] }),
  };
  replicas.push(await startTestGateway(files), await startTestGateway(files));
});

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.stop()));
  raw?.disconnect();
  await Promise.all([issuer?.close(), up?.close()]);
  await redis?.stop();
});

const bound = (key: DpopKey, sub: string, path: string) => issuer.mint({ sub, aud: resourceOf(path), scope: 'mcp:read', cnf: { jkt: key.jkt } });

async function call(replica: TestGateway, path: string, token: string, key: DpopKey, body = TOOLS_LIST, dpop?: string) {
  const res = await fetch(`${replica.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `DPoP ${token}`, dpop: dpop ?? (await proof(key, { htm: 'POST', htu: `${PUBLIC_URL}${path}`, token })) },
    body,
  });
  const text = await res.text();
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: text };
}

/** The replay markers Redis holds for one proof key. */
const markersOf = async (key: DpopKey) => (await raw.keys(`${KEY_PREFIX}dpop-jti:${hashKeyPart(key.jkt)}:*`)).length;

describe('[K79] a proof is spent only once policy and rate limits admit the request', () => {
  it('[K79] over a rate limit on two replicas: LIMIT pass, the rest are 429 and leave no marker in Redis', async () => {
    const key = await dpopKey();
    const token = await bound(key, 'flo', LIMITED);
    const results = await Promise.all(Array.from({ length: 4 * LIMIT }, (_, i) => call(replicas[i % 2]!, LIMITED, token, key)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(LIMIT);
    expect(results.filter((r) => r.status === 429)).toHaveLength(3 * LIMIT);
    expect(await markersOf(key)).toBe(LIMIT);
  });

  it('[K79] a request the policy denies leaves no marker; an allowed one on the same route does', async () => {
    const key = await dpopKey();
    const token = await bound(key, 'dee', DENYING);
    for (let i = 0; i < 5; i++) expect((await call(replicas[i % 2]!, DENYING, token, key, GET_ENV)).status).toBe(403);
    expect(await markersOf(key)).toBe(0);
    expect((await call(replicas[0]!, DENYING, token, key)).status).toBe(200);
    expect(await markersOf(key)).toBe(1);
  });

  it('[K79] a replay still refused after admission: the same proof twice, one 200 and one 401 invalid_dpop_proof, on either replica', async () => {
    const key = await dpopKey();
    const token = await bound(key, 'rae', DENYING);
    const dpop = await proof(key, { htm: 'POST', htu: `${PUBLIC_URL}${DENYING}`, token });
    const [first, second] = [await call(replicas[0]!, DENYING, token, key, TOOLS_LIST, dpop), await call(replicas[1]!, DENYING, token, key, TOOLS_LIST, dpop)];
    expect(first.status).toBe(200);
    expect(second.status).toBe(401);
    expect(second.body).toContain('invalid_dpop_proof');
  });
});

describe('[K79] each user has a share of the replay-marker class (memory store of 1,000 entries: 100 each)', () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({
      'gateway.yaml': gatewayYaml({ log_level: 'warn', store: { kind: 'memory', max_entries: 1000 } }),
      'open.yaml': jwtRoute(OPEN, `${up.origin}/mcp`, issuer),
      'limited.yaml': jwtRoute(LIMITED, `${up.origin}/mcp`, issuer, { rate_limits: [{ per: 'subject', requests: LIMIT, window: '1m' }] }),
      'denying.yaml': jwtRoute(DENYING, `${up.origin}/mcp`, issuer, { rules: [{ match: { method: 'tools/call', tool: 'get-env' }, deny: true }] }),
    });
  });
  afterAll(async () => {
    await gw?.stop();
  });

  it('[K79] one user past the share gets 429 with Retry-After, from any of their clients and keys; another user\'s proofs keep passing', async () => {
    const flooder = await Promise.all([dpopKey(), dpopKey()]);
    // Two clients (two keys, two tokens) of one user: one share.
    const tokens = await Promise.all(flooder.map((k, i) => issuer.mint({ sub: 'flood', client_id: `client-${i}`, aud: resourceOf(OPEN), scope: 'mcp:read', cnf: { jkt: k.jkt } })));
    const statuses = new Map<number, number>();
    for (let batch = 0; batch < 13; batch++) {
      const results = await Promise.all(Array.from({ length: 10 }, (_, i) => call(gw, OPEN, tokens[i % 2]!, flooder[i % 2]!)));
      for (const r of results) statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    }
    expect(Object.fromEntries(statuses)).toEqual({ 200: 100, 429: 30 });
    const refused = await call(gw, OPEN, tokens[0]!, flooder[0]!);
    expect(refused.status).toBe(429);
    expect(Number(refused.retryAfter)).toBeGreaterThan(0);
    const victimKey = await dpopKey();
    const victim = await issuer.mint({ sub: 'vic', client_id: 'client-0', aud: resourceOf(OPEN), scope: 'mcp:read', cnf: { jkt: victimKey.jkt } });
    for (let i = 0; i < 20; i++) expect((await call(gw, OPEN, victim, victimKey)).status).toBe(200);
  }, 60_000);

  it('[K79] on the memory store too, rate-limited and denied requests spend nothing of the share: after 60 of each, all but the 3 admitted of her 100 are left', async () => {
    const key = await dpopKey();
    const tokenFor = (path: string) => issuer.mint({ sub: 'lim', client_id: 'client-0', aud: resourceOf(path), scope: 'mcp:read', cnf: { jkt: key.jkt } });
    const [limited, denying, open] = await Promise.all([tokenFor(LIMITED), tokenFor(DENYING), tokenFor(OPEN)]);
    const overLimit = await Promise.all(Array.from({ length: 60 }, () => call(gw, LIMITED, limited, key)));
    expect(overLimit.filter((r) => r.status === 200)).toHaveLength(LIMIT);
    expect(overLimit.filter((r) => r.status === 429)).toHaveLength(60 - LIMIT);
    const denied = await Promise.all(Array.from({ length: 60 }, () => call(gw, DENYING, denying, key, GET_ENV)));
    expect(new Set(denied.map((r) => r.status))).toEqual(new Set([403]));
    const statuses: number[] = [];
    for (let batch = 0; batch < 10; batch++) statuses.push(...(await Promise.all(Array.from({ length: 10 }, () => call(gw, OPEN, open, key)))).map((r) => r.status));
    expect(statuses.filter((s) => s === 200)).toHaveLength(100 - LIMIT);
    expect(statuses.filter((s) => s === 429)).toHaveLength(LIMIT);
  }, 60_000);
});

describeOnEachStore('[K79] the marker share', (store) => {
  it('[K79] counts the user whatever the key or client: past it 429 with Retry-After for that user alone; a replay is still refused', async () => {
    const share = 5;
    const NOW = Math.floor(Date.now() / 1000);
    const rules = { share, markerTtlMs: PROOF_JTI_TTL_MS, nowSeconds: () => NOW };
    const claim = dpopProofClaimer(store(), rules);
    const user = principalShareOwner(issuer.issuer, `sam-${Math.random()}`);
    for (let i = 0; i < share; i++) expect(await claim({ jkt: `key-${i % 2}`, jti: `jti-${i}`, iat: NOW, owner: user })).toBe(true);
    const refused = await claim({ jkt: 'key-2', jti: 'jti-new', iat: NOW, owner: user }).then(() => undefined, (err: unknown) => err as { status?: number; headers?: Record<string, string> });
    expect(refused?.status).toBe(429);
    expect(Number(refused?.headers?.['retry-after'])).toBeGreaterThan(0);
    for (let i = 0; i < share; i++) expect(await dpopProofClaimer(store(), rules)({ jkt: 'key-0', jti: `other-${i}`, iat: NOW, owner: principalShareOwner(issuer.issuer, `tim-${Math.random()}`) })).toBe(true);
    // The same subject at another issuer is another user.
    expect(await claim({ jkt: 'key-0', jti: 'elsewhere', iat: NOW, owner: principalShareOwner('https://other.example', 'sam') })).toBe(true);
    const replayer = principalShareOwner(issuer.issuer, `rae-${Math.random()}`);
    expect(await claim({ jkt: 'k', jti: 'once', iat: NOW, owner: replayer })).toBe(true);
    expect(await claim({ jkt: 'k', jti: 'once', iat: NOW, owner: replayer })).toBe(false);
    expect(dpopMarkerShare({ kind: 'redis' } as Parameters<typeof dpopMarkerShare>[0])).toBe(10_000);
    expect(dpopMarkerShare({ kind: 'memory', maxEntries: 1000 } as Parameters<typeof dpopMarkerShare>[0])).toBe(100);
  });
});

describe('[K85] a marker lives as long as any replica could still accept its proof', () => {
  it('[K85] accepted on replica A, refused on B at once, and the marker in Redis outlives the iat window both ways plus the skew', async () => {
    const key = await dpopKey();
    const token = await bound(key, 'ivy', DENYING);
    const dpop = await proof(key, { htm: 'POST', htu: `${PUBLIC_URL}${DENYING}`, token });
    expect((await call(replicas[0]!, DENYING, token, key, TOOLS_LIST, dpop)).status).toBe(200);
    expect((await call(replicas[1]!, DENYING, token, key, TOOLS_LIST, dpop)).status).toBe(401);
    const [marker] = await raw.keys(`${KEY_PREFIX}dpop-jti:${hashKeyPart(key.jkt)}:*`);
    const ttl = await raw.pttl(marker!);
    expect(PROOF_JTI_TTL_MS).toBeGreaterThan((2 * PROOF_WINDOW_SECONDS + REPLICA_CLOCK_SKEW_SECONDS) * 1000);
    expect(ttl).toBeGreaterThan(PROOF_JTI_TTL_MS - 5_000);
    expect(ttl).toBeLessThanOrEqual(PROOF_JTI_TTL_MS);
  });

  it('[K85] for any two replica clocks within the skew, any proof A accepts is never accepted by B after its marker expired (the real proof check, fast-check)', async () => {
    const key = await dpopKey();
    const htu = `${PUBLIC_URL}${DENYING}`;
    const accepts = (dpop: string, nowSeconds: number) => verifyDpopProof(dpop, { method: 'POST', htu, nowSeconds }).then(() => true, () => false);
    const skew = REPLICA_CLOCK_SKEW_SECONDS;
    await fc.assert(
      fc.asyncProperty(
        // The edges (a window ahead, the whole skew either way) drawn often: that is where a short marker fails.
        fc.oneof(fc.constantFrom(PROOF_WINDOW_SECONDS, PROOF_WINDOW_SECONDS + skew), fc.integer({ min: -2 * PROOF_WINDOW_SECONDS, max: 2 * PROOF_WINDOW_SECONDS })),
        fc.oneof(fc.constantFrom(0, skew), fc.integer({ min: 0, max: skew })),
        fc.oneof(fc.constantFrom(0, skew), fc.integer({ min: 0, max: skew })),
        async (iatOffset, offsetA, offsetB) => {
          // Real time t; replica A's clock reads t + offsetA, B's t + offsetB (|offsetA - offsetB| ≤ skew).
          const t = 2_000_000_000;
          const dpop = await proof(key, { htm: 'POST', htu, claims: { iat: t + iatOffset } });
          if (!(await accepts(dpop, t + offsetA))) return;
          // A claims it at t: the marker lives until t + TTL. B must refuse it at every later moment past that.
          const expiry = t + PROOF_JTI_TTL_MS / 1000;
          for (let later = expiry; later <= expiry + 2 * PROOF_WINDOW_SECONDS; later += later - expiry < 3 ? 1 : 7) {
            expect(await accepts(dpop, later + offsetB), `iat ${iatOffset}, A +${offsetA}, B +${offsetB}, at +${later - t}`).toBe(false);
          }
        },
      ),
      { numRuns: 200 },
    );
  }, 60_000);
});
