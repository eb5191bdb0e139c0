// The Redis store through Redis Cluster (`redis+cluster://`), for real: three
// primaries on free loopback ports joined by `redis-cli --cluster create`.
// Every store operation touches one key, so keys spread over the slots with
// no hash tags, and take (GETDEL) and setIfAbsent (SET NX) stay atomic per key.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import { createSessionBinding } from '../../src/proxy/session-binding.js';
import { RedisStore } from '../../src/store/redis-store.js';
import { StoreUnavailableError } from '../../src/store/store.js';
import { describeStoreContract } from '../helpers/store-contract.js';
import { redisCli, startCluster, type ClusterSetup } from '../helpers/redis-topology.js';

let contractCluster: ClusterSetup | undefined;
describeStoreContract({
  name: 'redis+cluster',
  async open() {
    contractCluster = await startCluster();
    const store = new RedisStore({ url: contractCluster.url, keyPrefix: `test:${randomUUID()}:`, commandTimeoutMs: 1000 });
    expect(store.topology).toBe('cluster');
    return store;
  },
  shutdown: async () => contractCluster?.stop(),
});

describe('Redis Cluster specifics', () => {
  let cluster: ClusterSetup;
  let store: RedisStore;
  beforeAll(async () => {
    cluster = await startCluster();
    store = new RedisStore({ url: cluster.url, keyPrefix: 'spread:', commandTimeoutMs: 1000 });
  });
  afterAll(async () => {
    await store?.close();
    await cluster?.stop();
  });

  it('keys spread over every primary, and each is taken exactly once wherever it lives', async () => {
    const keys = Array.from({ length: 60 }, (_, i) => `code:${i}:${randomUUID()}`);
    await Promise.all(keys.map((key) => store.set(key, key, 60_000)));
    const sizes = await Promise.all(cluster.nodes.map(async (n) => Number(await redisCli(n.port, 'DBSIZE'))));
    expect(sizes.reduce((a, b) => a + b)).toBe(60);
    for (const size of sizes) expect(size).toBeGreaterThan(5);
    // 5 concurrent takers per key, all keys at once: exactly one value each.
    const taken = await Promise.all(keys.map(async (key) => (await Promise.all(Array.from({ length: 5 }, () => store.take(key)))).filter((v) => v !== undefined)));
    expect(taken).toEqual(keys.map((key) => [key]));
    const after = await Promise.all(cluster.nodes.map(async (n) => Number(await redisCli(n.port, 'DBSIZE'))));
    expect(after).toEqual([0, 0, 0]);
  });

  it('a user\'s share of session bindings (K81) holds though its records and its owner-share: index live on different primaries', async () => {
    const shared = new RedisStore({ url: cluster.url, keyPrefix: `share:${randomUUID()}:`, commandTimeoutMs: 1000, shareBasis: 50 }); // a share of 5
    try {
      const bindings = createSessionBinding(shared);
      const who = (subject: string, clientId: string) => ({ issuer: 'https://idp.example', subject, clientId }) as AuthContext;
      await bindings.bind('/r', 'bob-0', who('bob', 'b'));
      for (let i = 0; i < 20; i++) await bindings.bind('/r', `m-${i}`, who('mallory', `c${i % 4}`));
      const held = async (id: string, auth: AuthContext) => bindings.check('/r', id, auth).then(() => true, () => false);
      const live = [];
      for (let i = 0; i < 20; i++) if (await held(`m-${i}`, who('mallory', `c${i % 4}`))) live.push(i);
      expect(live).toEqual([15, 16, 17, 18, 19]);
      expect(await held('bob-0', who('bob', 'b'))).toBe(true);
    } finally {
      await shared.close();
    }
  });

  it('checks the eviction policy of every primary', async () => {
    expect(await store.checkEvictionPolicy()).toBe('noeviction');
    const last = cluster.nodes[2]!;
    await redisCli(last.port, 'CONFIG', 'SET', 'maxmemory-policy', 'volatile-lru');
    try {
      expect(await store.checkEvictionPolicy()).toBe('volatile-lru');
    } finally {
      await redisCli(last.port, 'CONFIG', 'SET', 'maxmemory-policy', 'noeviction');
    }
  });

  it('a primary is killed: every operation still ends within its bound, typed', async () => {
    await cluster.nodes[2]!.kill();
    const outcomes = await Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const started = performance.now();
        const error = await store.get(`after-kill:${i}`).then(() => undefined, (err: unknown) => err);
        return { error, ms: performance.now() - started };
      }),
    );
    const failed = outcomes.filter((o) => o.error !== undefined);
    // About a third of the slots were on the dead node.
    expect(failed.length).toBeGreaterThan(0);
    for (const { error } of failed) expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(Math.max(...outcomes.map((o) => o.ms))).toBeLessThan(1000 + 400);
  });
});
