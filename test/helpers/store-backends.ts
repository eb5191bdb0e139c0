// The two backends a unit test of a store-backed model runs on: the memory
// store and a throw-away standalone redis-server (its own key prefix).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe } from 'vitest';
import { MemoryStore } from '../../src/store/memory-store.js';
import { RedisStore } from '../../src/store/redis-store.js';
import type { Store } from '../../src/store/store.js';
import { startRedisServer, type RedisServer } from './redis-server.js';

interface Backend {
  name: string;
  open(): Promise<{ store: Store; shutdown(): Promise<void> }>;
}

const BACKENDS: readonly Backend[] = [
  { name: 'memory store', open: async () => ({ store: new MemoryStore({ maxEntries: 1000 }), shutdown: async () => undefined }) },
  {
    name: 'redis-server',
    async open() {
      const redis: RedisServer = await startRedisServer();
      return { store: new RedisStore({ url: redis.url, keyPrefix: `test:${randomUUID()}:`, commandTimeoutMs: 1000 }), shutdown: () => redis.stop() };
    },
  },
];

/** `suite` once per backend, as `<title> on <backend>`; `store()` is that backend's store, opened once for the suite. */
export function describeOnEachStore(title: string, suite: (store: () => Store) => void): void {
  for (const backend of BACKENDS) {
    describe(`${title} on the ${backend.name}`, () => {
      let opened: Awaited<ReturnType<Backend['open']>> | undefined;
      beforeAll(async () => {
        opened = await backend.open();
      });
      afterAll(async () => {
        await opened?.store.close();
        await opened?.shutdown();
      });
      suite(() => {
        if (!opened) throw new Error('the store is not open yet');
        return opened.store;
      });
    });
  }
}
