// Security case I.43: a paused or dead Redis fails fast and typed; the same
// store recovers when Redis comes back.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { RedisStore } from '../../src/store/redis-store.js';
import { createStore } from '../../src/store/create-store.js';
import { StoreUnavailableError } from '../../src/store/store.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';

const COMMAND_TIMEOUT_MS = 500;
// Over the bound, for timers that fire late on a loaded machine: a queued command with no bound would wait far longer.
const SLACK_MS = 1_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function timed<T>(p: Promise<T>): Promise<{ error: unknown; ms: number }> {
  const start = performance.now();
  try {
    await p;
    return { error: undefined, ms: performance.now() - start };
  } catch (error) {
    return { error, ms: performance.now() - start };
  }
}

describe('RedisStore faults', () => {
  let redis: RedisServer;
  let store: RedisStore;
  beforeAll(async () => {
    redis = await startRedisServer();
    store = new RedisStore({ url: redis.url, keyPrefix: 'faults:', commandTimeoutMs: COMMAND_TIMEOUT_MS });
    await store.ping();
  });
  afterAll(async () => {
    await store.close();
    await redis.stop();
  });

  it('paused Redis: rejects with StoreUnavailableError within commandTimeout + slack', async () => {
    await redis.pause(1500);
    const { error, ms } = await timed(store.get('k'));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(ms).toBeGreaterThanOrEqual(COMMAND_TIMEOUT_MS - 50); // it waited for the paused server: a timeout
    expect(ms).toBeLessThan(COMMAND_TIMEOUT_MS + SLACK_MS);
    await redis.resume(); // the pause ends; the same connection answers again
    await store.set('after-pause', 'ok', 10_000);
    expect(await store.get('after-pause')).toBe('ok');
  });

  it('killed Redis: fast rejection; restarted: recovers without a new store', async () => {
    await store.set('k', 'v', 60_000);
    await redis.kill();
    for (let i = 0; i < 5; i++) {
      const { error, ms } = await timed(store.take('k'));
      expect(error).toBeInstanceOf(StoreUnavailableError);
      expect(ms).toBeLessThan(COMMAND_TIMEOUT_MS + SLACK_MS);
      await sleep(100);
    }
    // Once the close is seen, rejection is immediate (or after a refused connect) rather than a timeout.
    const { ms } = await timed(store.get('k'));
    expect(ms).toBeLessThan(COMMAND_TIMEOUT_MS / 2);
    await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);

    await redis.restart();
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline && !(await store.ping().then(() => true, () => false))) await sleep(100);
    await store.set('k2', 'v2', 10_000);
    expect(await store.get('k2')).toBe('v2');
  });

  it('reports the eviction policy', async () => {
    expect(await store.checkEvictionPolicy()).toBe('noeviction');
  });
});

describe('RedisStore on a server without GETDEL or CONFIG', () => {
  let redis: RedisServer;
  let store: RedisStore;
  beforeAll(async () => {
    redis = await startRedisServer(['--rename-command', 'GETDEL', '', '--rename-command', 'CONFIG', '']);
    store = new RedisStore({ url: redis.url, keyPrefix: 'old:', commandTimeoutMs: COMMAND_TIMEOUT_MS });
  });
  afterAll(async () => {
    await store.close();
    await redis.stop();
  });

  it('take falls back to a script, still exactly once', async () => {
    await store.set('code', 'c', 10_000);
    const results = await Promise.all(Array.from({ length: 20 }, () => store.take('code')));
    expect(results.filter((r) => r !== undefined)).toEqual(['c']);
  });

  it('checkEvictionPolicy returns undefined when CONFIG is disabled', async () => {
    expect(await store.checkEvictionPolicy()).toBeUndefined();
  });
});

describe('Redis URLs', () => {
  const stores: RedisStore[] = [];
  afterEach(async () => {
    await Promise.all(stores.splice(0).map((s) => s.close()));
  });

  // Sentinel and Cluster URL parsing: test/unit/store-redis-url.test.ts.
  it.each(['redis+sentinel://h:26379', 'redis+cluster://h:6379/1'])('refuses a malformed %s at construction with a clear error', (url) => {
    expect(() => createStore({ kind: 'redis', url, keyPrefix: 'x:', commandTimeoutMs: 100, requireNoeviction: false, maxClockSkewMs: 30_000 })).toThrow(/^store\.url: /);
  });

  it('refuses other schemes', () => {
    expect(() => new RedisStore({ url: 'http://h:6379', keyPrefix: '', commandTimeoutMs: 100 })).toThrow(/redis:\/\/, rediss:\/\//);
  });

  it('nothing listening: operations fail within the bound', async () => {
    const store = new RedisStore({ url: 'redis://127.0.0.1:1', keyPrefix: '', commandTimeoutMs: COMMAND_TIMEOUT_MS });
    stores.push(store);
    const { error, ms } = await timed(store.get('k'));
    expect(error).toBeInstanceOf(StoreUnavailableError);
    expect(ms).toBeLessThan(COMMAND_TIMEOUT_MS + SLACK_MS);
  });
});
