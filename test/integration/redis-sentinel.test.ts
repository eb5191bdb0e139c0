// The Redis store through Redis Sentinel (`redis+sentinel://`), for real: a
// primary, a replica and a Sentinel process on free loopback ports. The Store
// contract holds through the Sentinel URL, and when the primary dies the
// Sentinel promotes the replica and the same store carries on — failing fast
// (StoreUnavailableError) while there is no primary, never hanging.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/store/redis-store.js';
import { StoreUnavailableError } from '../../src/store/store.js';
import { describeStoreContract } from '../helpers/store-contract.js';
import { redisCli, startSentinel, type SentinelSetup } from '../helpers/redis-topology.js';
import { startSentinelGate, type SentinelGate } from '../helpers/sentinel-gate.js';

const COMMAND_TIMEOUT_MS = 500;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `run`, retried while the store is briefly unavailable (at most 5 s); any other error is thrown at once. */
async function onceSettled<T>(run: () => Promise<T>): Promise<T> {
  const deadline = performance.now() + 5_000;
  for (;;) {
    try {
      return await run();
    } catch (err) {
      if (!(err instanceof StoreUnavailableError) || performance.now() > deadline) throw err;
      await sleep(50);
    }
  }
}

let contractSetup: SentinelSetup | undefined;
describeStoreContract({
  name: 'redis+sentinel',
  async open() {
    contractSetup = await startSentinel();
    const store = new RedisStore({ url: contractSetup.url, keyPrefix: `test:${randomUUID()}:`, commandTimeoutMs: 1000 });
    expect(store.topology).toBe('sentinel');
    return store;
  },
  shutdown: async () => contractSetup?.stop(),
});

describe('Redis Sentinel failover', () => {
  let setup: SentinelSetup;
  let store: RedisStore;
  beforeAll(async () => {
    setup = await startSentinel({ replica: true, downAfterMs: 1000 });
    store = new RedisStore({ url: setup.url, keyPrefix: 'failover:', commandTimeoutMs: COMMAND_TIMEOUT_MS });
  });
  afterAll(async () => {
    await store?.close();
    await setup?.stop();
  });

  it('reads the eviction policy from the primary the Sentinel names', async () => {
    expect(await store.checkEvictionPolicy()).toBe('noeviction');
    await redisCli(setup.primary.port, 'CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru');
    expect(await store.checkEvictionPolicy()).toBe('allkeys-lru');
    await redisCli(setup.primary.port, 'CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
  });

  it('the primary is killed: requests fail fast until the replica is promoted, then the same store works on', async () => {
    await store.set('before', 'kept', 60_000);
    // Replicated before the primary dies (asynchronous replication: what is not yet copied may be lost).
    while ((await redisCli(setup.replica!.port, 'GET', 'failover:before')) !== 'kept') await sleep(20);

    await setup.primary.kill();
    const killedAt = performance.now();
    let failures = 0;
    let slowest = 0;
    let recoveredAt: number | undefined;
    while (performance.now() - killedAt < 30_000) {
      const started = performance.now();
      try {
        await store.set('after', 'written', 60_000);
        recoveredAt = performance.now();
        break;
      } catch (err) {
        expect(err).toBeInstanceOf(StoreUnavailableError);
        failures++;
      }
      slowest = Math.max(slowest, performance.now() - started);
      await sleep(50);
    }
    if (recoveredAt === undefined) expect.fail(`no new primary within 30 s; the Sentinel's log:\n${await setup.log()}`);
    // No request waited for the new primary (over 2 s away: down-after 1000 ms, then the election). The
    // slack over the command bound is for a loaded machine's stalls, not for a queued command.
    expect(slowest).toBeLessThan(COMMAND_TIMEOUT_MS + 1_500);
    expect(failures).toBeGreaterThan(0);
    expect(await setup.currentPrimary()).toBe(`127.0.0.1:${setup.replica!.port}`);
    // Sentinel may make clients reconnect once more right after the switch: a call then fails fast
    // (503 for a request) and the next one works, on the same store.
    expect(await onceSettled(() => store.get('before'))).toBe('kept');
    expect(await onceSettled(() => store.take('after'))).toBe('written');
    expect(await redisCli(setup.replica!.port, 'EXISTS', 'failover:after')).toBe('0');
    console.info(`sentinel failover: store writable again ${Math.round(recoveredAt! - killedAt)} ms after the primary was killed (down-after 1000 ms); ${failures} failed attempts, slowest ${Math.round(slowest)} ms`);
  }, 40_000);
});

// ioredis ends a client for good when a +switch-master reaches its failoverDetector while it is still
// asking a Sentinel for the primary (the lookup rejects, the client's status becomes 'end'). That made
// the test above fail now and then on a loaded machine: every call failed fast, 30 s long. Here a relay
// holds the lookups back until the announcement went by, so the announcement always lands mid-lookup.
describe('Redis Sentinel failover announced during a lookup of the primary', () => {
  let setup: SentinelSetup;
  let gate: SentinelGate;
  let store: RedisStore;
  beforeAll(async () => {
    setup = await startSentinel({ replica: true, downAfterMs: 1000 });
    gate = await startSentinelGate(setup.sentinelPort);
    store = new RedisStore({ url: `redis+sentinel://127.0.0.1:${gate.port}/${setup.masterName}`, keyPrefix: 'mid-lookup:', commandTimeoutMs: COMMAND_TIMEOUT_MS });
  });
  afterAll(async () => {
    await store?.close();
    await gate?.close();
    await setup?.stop();
  });

  it('the store reconnects to the promoted replica instead of ending', async () => {
    await onceSettled(() => store.set('before', 'kept', 60_000));
    await gate.subscribed;
    while ((await redisCli(setup.replica!.port, 'GET', 'mid-lookup:before')) !== 'kept') await sleep(20);

    gate.holdLookups = true;
    await setup.primary.kill();
    await gate.lookupHeld;
    await gate.switchAnnounced;
    gate.holdLookups = false;

    const releasedAt = performance.now();
    let recovered = false;
    while (!recovered && performance.now() - releasedAt < 20_000) {
      recovered = await store.set('after', 'written', 60_000).then(() => true, () => false);
      if (!recovered) await sleep(50);
    }
    expect(recovered, 'the store never wrote again after the failover').toBe(true);
    expect(await setup.currentPrimary()).toBe(`127.0.0.1:${setup.replica!.port}`);
    expect(await onceSettled(() => store.get('before'))).toBe('kept');
    expect(await redisCli(setup.replica!.port, 'GET', 'mid-lookup:after')).toBe('written');
  }, 40_000);
});
