/**
 * [K85] DPoP proofs across replicas whose clocks differ (DESIGN.md §8.3: a proof's marker lives as long
 * as any replica could still accept it). Each replica reads the store's clock (Redis TIME) and judges
 * `iat` by it (store/store-clock.ts); `store.max_clock_skew` is the margin the markers keep and the
 * offset past which a replica says so.
 * - Three gateways on one real redis-server, their wall clocks injected (StartOptions.wallClock):
 *   A 10 s ahead, B 15 s behind (within the 30 s setting), C 45 s behind (past it). C says so once
 *   (a log line with both clocks and the setting, mag_store_clock_skew_exceeded 1), A and B do not;
 *   all three accept exactly the same `iat`s (those within 60 s of Redis's clock); a proof accepted
 *   at one is refused by the others, and, polled at every second of its whole window, never accepted
 *   again (every answer "already used" until the replica itself finds the `iat` too old). The two
 *   minutes of that window are the store's, not waited out: a preloaded shim moves redis-server's
 *   wall clock (TIME and key expiry alike) a second at a time, and the replicas' clocks with it
 *   (redis-clock.ts), so Redis still expires the markers by the clock the replicas judge `iat` by.
 * - A fast-check property over the allowed skew, replicas' wall clocks (up to 10 min off), store
 *   read round trips, `iat` and arrival times: with the real proof check and StoreClock, a proof is
 *   never accepted twice; and a replica that never read the store (its own clock) stays safe while
 *   within the setting, as the markers' margin promises (past it, a double acceptance is shown).
 */
import { Redis } from 'ioredis';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROOF_WINDOW_SECONDS, proofJtiTtlMs, verifyDpopProof } from '../../src/auth/dpop-proof.js';
import { dpopProofClaimer } from '../../src/auth/dpop-replay.js';
import { StoreClock } from '../../src/store/store-clock.js';
import type { Store } from '../../src/store/store.js';
import { createLogger } from '../../src/observability/logger.js';
import { dpopKey, proof, type DpopKey } from '../helpers/dpop.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startRedisWithClock, type RedisWithClock } from '../helpers/redis-clock.js';
import { gatewayYaml, jwtRoute, PUBLIC_URL, resourceOf, startRecordingUpstream, startTestIssuer, type RecordingUpstream, type TestIssuer } from '../helpers/security-fixtures.js';

const ROUTE = '/skew/mcp';
const HTU = `${PUBLIC_URL}${ROUTE}`;
const TOOLS_LIST = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';
const SKEW = '30s';
/** Each replica's wall clock minus real time, in seconds. */
const WALL_OFFSETS = { a: 10, b: -15, c: -45 } as const;
type Name = keyof typeof WALL_OFFSETS;

let issuer: TestIssuer;
let up: RecordingUpstream;
let redis: RedisWithClock;
let raw: Redis;
const replicas = {} as Record<Name, TestGateway>;

beforeAll(async () => {
  [issuer, up, redis] = await Promise.all([startTestIssuer('ES256'), startRecordingUpstream(), startRedisWithClock()]);
  raw = new Redis(redis.server.url);
  const files = {
    'gateway.yaml': gatewayYaml({ log_level: 'info', store: { kind: 'redis', url: redis.server.url, key_prefix: 'k85:', max_clock_skew: SKEW } }),
    'skew.yaml': jwtRoute(ROUTE, `${up.origin}/mcp`, issuer),
  };
  for (const name of Object.keys(WALL_OFFSETS) as Name[]) {
    replicas[name] = await startTestGateway(files, {}, { wallClock: redis.wallClock(WALL_OFFSETS[name] * 1000), monotonicClock: redis.monotonicClock() });
  }
});

afterAll(async () => {
  await Promise.all(Object.values(replicas).map((r) => r.stop()));
  raw?.disconnect();
  await Promise.all([issuer?.close(), up?.close()]);
  await redis?.stop();
});

/** Redis's clock, in whole seconds. */
async function redisNow(): Promise<number> {
  const [seconds] = await raw.time();
  return Number(seconds);
}

async function call(replica: TestGateway, token: string, dpop: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`${replica.url}${ROUTE}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `DPoP ${token}`, dpop },
    body: TOOLS_LIST,
  });
  return { status: res.status, body: await res.text() };
}

async function boundToken(key: DpopKey, sub: string): Promise<string> {
  return issuer.mint({ sub, aud: resourceOf(ROUTE), scope: 'mcp:read', cnf: { jkt: key.jkt }, exp: Math.floor(Date.now() / 1000) + 600 });
}

const metric = async (replica: TestGateway, name: string) => {
  const text = await replica.metrics.registry.getSingleMetricAsString(name);
  return Number(/\n[a-z_]+ (-?[0-9.e+-]+)\s*$/.exec(text)?.[1]);
};

const skewWarnings = (replica: TestGateway) => replica.logs.filter((line) => line.includes('further from the store') && line.includes('max_clock_skew_ms'));

describe('[K85] replicas with clocks apart judge a proof by the store\'s clock', () => {
  it('[K85] each replica measures its offset from Redis; only C, past the 30 s setting, says so, once, naming both clocks and the setting', async () => {
    for (const name of Object.keys(WALL_OFFSETS) as Name[]) {
      // Redis's clock minus the replica's: the opposite of the replica's offset from real time.
      expect(Math.abs((await metric(replicas[name], 'mag_store_clock_offset_seconds')) + WALL_OFFSETS[name])).toBeLessThan(1);
    }
    expect(await metric(replicas.a, 'mag_store_clock_skew_exceeded')).toBe(0);
    expect(await metric(replicas.b, 'mag_store_clock_skew_exceeded')).toBe(0);
    expect(await metric(replicas.c, 'mag_store_clock_skew_exceeded')).toBe(1);
    expect(skewWarnings(replicas.a)).toHaveLength(0);
    expect(skewWarnings(replicas.b)).toHaveLength(0);
    const [warning] = skewWarnings(replicas.c);
    expect(skewWarnings(replicas.c)).toHaveLength(1);
    const fields = JSON.parse(warning!) as Record<string, unknown>;
    expect(fields.max_clock_skew_ms).toBe(30_000);
    expect(Math.abs(Date.parse(fields.store_clock as string) - Date.parse(fields.replica_clock as string) - 45_000)).toBeLessThan(1000);
  });

  it('[K85] all three accept exactly the iats within 60 s of Redis\'s clock, whatever their own clocks say', async () => {
    const key = await dpopKey();
    const token = await boundToken(key, 'win');
    // Two seconds of margin at the edges: the proof is signed, sent and checked within them (Redis's
    // clock is read for each proof: 33 requests on a loaded machine outlast the margin).
    const offsets = [-90, -75, -63, -57, -30, 0, 30, 57, 63, 75, 90];
    for (const name of Object.keys(WALL_OFFSETS) as Name[]) {
      const accepted: number[] = [];
      for (const offset of offsets) {
        const dpop = await proof(key, { htm: 'POST', htu: HTU, token, claims: { iat: (await redisNow()) + offset } });
        const answer = await call(replicas[name], token, dpop);
        expect([200, 401], answer.body).toContain(answer.status);
        if (answer.status === 200) accepted.push(offset);
        else expect(answer.body).toMatch(/iat/);
      }
      expect(accepted, `replica ${name} (${WALL_OFFSETS[name]} s)`).toEqual([-57, -30, 0, 30, 57]);
    }
  });

  it('[K85] a proof accepted at one replica is refused at the others, and stays refused through its whole window (below and above the setting)', async () => {
    const key = await dpopKey();
    const token = await boundToken(key, 'ivy');
    // An iat near the window's far end: the proof stays acceptable longest (to Redis's clock + 60 s).
    const [late, early] = await Promise.all([
      proof(key, { htm: 'POST', htu: HTU, token, claims: { iat: (await redisNow()) + PROOF_WINDOW_SECONDS - 3 } }),
      proof(key, { htm: 'POST', htu: HTU, token, claims: { iat: (await redisNow()) - PROOF_WINDOW_SECONDS + 10 } }),
    ]);
    expect((await call(replicas.a, token, late)).status).toBe(200);
    expect((await call(replicas.c, token, early)).status).toBe(200);
    const acceptedAt = await redisNow();
    // Each poller asks its replica once per second of the store's clock until the replica refuses the
    // iat itself; every answer before that is "already used". Redis's clock and the replicas' move
    // together, a second at a time, only once every answer of that second is in.
    const pollers = [
      { replica: replicas.b, dpop: late },
      { replica: replicas.c, dpop: late },
      { replica: replicas.a, dpop: early },
      { replica: replicas.b, dpop: early },
    ].map((p) => ({ ...p, answers: [] as string[], doneAt: 0 }));
    const MAX_STEPS = 3 * PROOF_WINDOW_SECONDS;
    for (let step = 0; pollers.some((p) => !p.doneAt); step++) {
      expect(step, 'a replica still found a proof "already used" past any window').toBeLessThan(MAX_STEPS);
      const now = await redisNow();
      await Promise.all(
        pollers
          .filter((p) => !p.doneAt)
          .map(async (p) => {
            const { status, body } = await call(p.replica, token, p.dpop);
            expect(status, body).toBe(401);
            const reason = /already used/.test(body) ? 'used' : /iat/.test(body) ? 'iat' : body;
            p.answers.push(reason);
            if (reason !== 'used') p.doneAt = now;
          }),
      );
      redis.advance(1);
    }
    for (const { answers } of pollers) {
      expect(answers.at(-1)).toBe('iat');
      expect(answers.slice(0, -1).every((a) => a === 'used')).toBe(true);
    }
    // The late proof was polled through its window: the replicas found it spent for a minute or more
    // of the store's clock, every second of it (it is acceptable to Redis's clock + 60 s).
    expect(pollers[0]!.answers.length).toBeGreaterThan(12);
    for (const poller of pollers.slice(0, 2)) expect(poller.doneAt - acceptedAt).toBeGreaterThanOrEqual(PROOF_WINDOW_SECONDS * 2 - 5);
    // And the store's clock moved, not the real one: the window took seconds to poll.
    expect(redis.shiftMs()).toBeGreaterThanOrEqual((PROOF_WINDOW_SECONDS * 2 - 5) * 1000);
  }, 60_000);
});

describe('[K85] a proof is never accepted twice, whatever the replicas\' clocks (fast-check, simulated time)', () => {
  const logger = createLogger('silent');

  /**
   * Store time `t` (ms) is the simulation's; each replica's wall clock is t + its offset, its monotonic
   * clock t itself; a read of the store's clock takes `rtt` ms, the store answering at `at` of it.
   * Markers live as the store keeps them: from the claim, `proofJtiTtlMs(skew)` by the store's clock;
   * a claim comes `claimDelayMs` after the proof's check (policy, rate limits, a grant's checks).
   */
  async function run(skewMs: number, replicas: Array<{ wallOffsetMs: number; reads: boolean; rttMs: number; at: number }>, iatOffset: number, arrivals: Array<{ replica: number; afterMs: number; claimDelayMs: number }>, key: DpopKey): Promise<number> {
    let t = 1_900_000_000_000;
    // One after another: each read's round trip is its own (read together, each would count the other's).
    const clocks: StoreClock[] = [];
    for (const r of replicas) {
      const clock = new StoreClock({
        allowedSkewMs: skewMs,
        logger,
        wallNow: () => t + r.wallOffsetMs,
        monotonicNow: () => t,
        readStoreTime: r.reads
          ? async () => {
              t += r.rttMs * r.at;
              const storeMs = t;
              t += r.rttMs * (1 - r.at);
              return storeMs;
            }
          : undefined,
      });
      await clock.start();
      clock.stop();
      clocks.push(clock);
    }
    const iat = Math.floor(t / 1000) + iatOffset;
    const dpop = await proof(key, { htm: 'POST', htu: HTU, claims: { iat } });
    // The store, by its own clock t: markers expire there (admission is not what this property is about).
    const markers = new Map<string, number>();
    const store = {
      admit: async () => ({ admitted: true, retryAfterMs: 0 }),
      setIfAbsent: async (k: string, _v: string, ttlMs: number) => {
        if ((markers.get(k) ?? -Infinity) > t) return false;
        markers.set(k, t + ttlMs);
        return true;
      },
    } as unknown as Store;
    let accepted = 0;
    for (const { replica, afterMs, claimDelayMs } of arrivals) {
      t += afterMs;
      const clock = clocks[replica % clocks.length]!;
      const verified = await verifyDpopProof(dpop, { method: 'POST', htu: HTU, nowSeconds: clock.nowSeconds() }).then(
        (v) => v,
        () => undefined,
      );
      if (!verified) continue;
      // Policy and rate limits (a grant's checks at /token) run before the proof is spent.
      t += claimDelayMs;
      const claim = dpopProofClaimer(store, { share: 1000, markerTtlMs: proofJtiTtlMs(skewMs), nowSeconds: () => clock.nowSeconds() });
      if (await claim({ jkt: verified.jkt, jti: verified.jti, iat: verified.iat, owner: 'u' })) accepted++;
    }
    return accepted;
  }

  const arrivals = fc.array(fc.record({ replica: fc.nat(4), afterMs: fc.oneof(fc.integer({ min: 0, max: 5_000 }), fc.integer({ min: 0, max: 200_000 })), claimDelayMs: fc.oneof(fc.integer({ min: 0, max: 3_000 }), fc.integer({ min: 0, max: 60_000 })) }), { minLength: 2, maxLength: 8 });
  const skewMs = fc.oneof(fc.constantFrom(1000, 30_000, 300_000), fc.integer({ min: 1000, max: 300_000 }));

  it('[K85] replicas that read the store\'s clock, at any wall-clock offset (up to 10 min, far past the setting), any read round trip within the setting', async () => {
    const key = await dpopKey();
    await fc.assert(
      fc.asyncProperty(
        skewMs.chain((skew) =>
          fc.tuple(
            fc.constant(skew),
            fc.array(fc.record({ wallOffsetMs: fc.integer({ min: -600_000, max: 600_000 }), reads: fc.constant(true), rttMs: fc.integer({ min: 0, max: skew }), at: fc.double({ min: 0, max: 1, noNaN: true }) }), { minLength: 2, maxLength: 3 }),
          ),
        ),
        fc.oneof(fc.constantFrom(-PROOF_WINDOW_SECONDS, PROOF_WINDOW_SECONDS), fc.integer({ min: -2 * PROOF_WINDOW_SECONDS, max: 2 * PROOF_WINDOW_SECONDS })),
        arrivals,
        async ([skew, reps], iatOffset, arr) => {
          expect(await run(skew, reps, iatOffset, arr, key)).toBeLessThanOrEqual(1);
        },
      ),
      { numRuns: 300 },
    );
  }, 120_000);

  it('[K85] a replica that never read the store (its own clock) is safe while its clock is within the setting of the store\'s and the others\'', async () => {
    const key = await dpopKey();
    await fc.assert(
      fc.asyncProperty(
        skewMs.chain((skew) =>
          fc.tuple(
            fc.constant(skew),
            fc.array(
              fc.record({ wallOffsetMs: fc.integer({ min: -Math.floor(skew / 2), max: Math.floor(skew / 2) }), reads: fc.boolean(), rttMs: fc.integer({ min: 0, max: skew }), at: fc.double({ min: 0, max: 1, noNaN: true }) }),
              { minLength: 2, maxLength: 3 },
            ),
          ),
        ),
        fc.integer({ min: -2 * PROOF_WINDOW_SECONDS, max: 2 * PROOF_WINDOW_SECONDS }),
        arrivals,
        async ([skew, reps], iatOffset, arr) => {
          expect(await run(skew, reps, iatOffset, arr, key)).toBeLessThanOrEqual(1);
        },
      ),
      { numRuns: 200 },
    );
  }, 120_000);

  it('[K85] without the store\'s clock, replicas 45 s apart under a 30 s setting do accept a proof twice: what the reading prevents', async () => {
    const key = await dpopKey();
    const apart = [
      { wallOffsetMs: 10_000, reads: false, rttMs: 0, at: 0 },
      { wallOffsetMs: -35_000, reads: false, rttMs: 0, at: 0 },
    ];
    // A (10 s ahead) accepts an iat 69 s ahead of the store's clock at once; B (35 s behind) still accepts it 155 s later.
    const arrivalsApart = [{ replica: 0, afterMs: 0, claimDelayMs: 0 }, { replica: 1, afterMs: 155_000, claimDelayMs: 0 }];
    expect(await run(30_000, apart, 69, arrivalsApart, key)).toBe(2);
    expect(await run(30_000, apart.map((r) => ({ ...r, reads: true })), 69, arrivalsApart, key)).toBeLessThanOrEqual(1);
  });

  it('[K85] a proof checked at its window\'s last second and spent after it closed (slow policy) is refused: the window is judged again at the claim', async () => {
    const key = await dpopKey();
    const exact = [
      { wallOffsetMs: 0, reads: true, rttMs: 0, at: 0 },
      { wallOffsetMs: 0, reads: true, rttMs: 0, at: 0 },
    ];
    // A spends it at once (the marker lives 122 s with a 1 s setting); B checks it 120.999 s later, still
    // within the window, and spends it 2 s after that, when A's marker is gone.
    const slow = [{ replica: 0, afterMs: 0, claimDelayMs: 0 }, { replica: 1, afterMs: 120_999, claimDelayMs: 2000 }];
    expect(await run(1000, exact, 60, slow, key)).toBe(1);
  });
});
