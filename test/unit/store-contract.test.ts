// The Store contract (test/helpers/store-contract.ts), run against the memory
// store and a standalone redis-server. Sentinel and Cluster:
// test/integration/redis-sentinel.test.ts and redis-cluster.test.ts.
import { randomUUID } from 'node:crypto';
import { MemoryStore } from '../../src/store/memory-store.js';
import { RedisStore } from '../../src/store/redis-store.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { describeStoreContract } from '../helpers/store-contract.js';

describeStoreContract({ name: 'memory', open: async () => new MemoryStore({ maxEntries: 1000 }), shutdown: async () => undefined });

let redis: RedisServer | undefined;
describeStoreContract({
  name: 'redis',
  async open() {
    redis = await startRedisServer();
    return new RedisStore({ url: redis.url, keyPrefix: `test:${randomUUID()}:`, commandTimeoutMs: 1000 });
  },
  shutdown: async () => redis?.stop(),
});
