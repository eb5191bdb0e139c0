// Builds the ioredis client for a topology, with the store's failure policy
// on every connection: bounded commands and connects, nothing queued behind a
// dead connection, nothing re-sent after a dropped one.
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import type { RedisTopology } from '../config/redis-url.js';

export type RedisClient = Redis | Cluster;

export interface RedisClientOptions {
  keyPrefix: string;
  commandTimeoutMs: number;
}

export const MAX_RECONNECT_DELAY_MS = 2_000;
const reconnectDelay = (attempt: number) => Math.min(100 * 2 ** (attempt - 1), MAX_RECONNECT_DELAY_MS);

export function createRedisClient(topology: RedisTopology, options: RedisClientOptions): RedisClient {
  const common = {
    commandTimeout: options.commandTimeoutMs,
    connectTimeout: options.commandTimeoutMs,
    maxRetriesPerRequest: 0,
    // A GETDEL re-sent after a dropped connection could consume a value whose caller was already told it failed.
    autoResendUnfulfilledCommands: false,
  } satisfies RedisOptions;
  switch (topology.kind) {
    case 'standalone':
      return new Redis(topology.url, {
        ...common,
        keyPrefix: options.keyPrefix,
        // Commands issued while (re)connecting wait in the offline queue, bounded by
        // commandTimeout; every failed connection attempt flushes that queue at once.
        enableOfflineQueue: true,
        retryStrategy: reconnectDelay,
      });
    case 'sentinel':
      return new Redis({
        ...common,
        keyPrefix: options.keyPrefix,
        enableOfflineQueue: true,
        retryStrategy: reconnectDelay,
        sentinels: topology.sentinels,
        name: topology.masterName,
        db: topology.db,
        username: topology.username,
        password: topology.password,
        sentinelUsername: topology.sentinelUsername,
        sentinelPassword: topology.sentinelPassword,
        sentinelCommandTimeout: options.commandTimeoutMs,
        // Sentinels announce a failover (+switch-master): reconnect to the new primary at once.
        failoverDetector: true,
        ...(topology.tls && { tls: {}, enableTLSForSentinelMode: true, sentinelTLS: {} }),
      });
    case 'cluster':
      return new Cluster(topology.nodes, {
        keyPrefix: options.keyPrefix,
        enableOfflineQueue: true,
        clusterRetryStrategy: reconnectDelay,
        slotsRefreshTimeout: options.commandTimeoutMs,
        redisOptions: {
          ...common,
          username: topology.username,
          password: topology.password,
          ...(topology.tls && { tls: {} }),
        },
      });
  }
}
