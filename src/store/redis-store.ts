// Shared store for several replicas, on ioredis. Every failure — down, paused,
// refused — becomes StoreUnavailableError within a bounded time, so callers
// answer 503 instead of hanging; the client reconnects on its own.
import { Redis } from 'ioredis';
import { StoreUnavailableError, type Store } from './store.js';
import { assertTtl } from './ttl.js';

export interface RedisStoreOptions {
  /** redis:// or rediss:// (TLS). Sentinel and Cluster are not supported yet. */
  url: string;
  /** Prepended to every key, e.g. `mag:`. */
  keyPrefix: string;
  /** Upper bound for any one command, and for a connection attempt. */
  commandTimeoutMs: number;
  /** Connection errors, for logging (ioredis reports each failed reconnect). */
  onConnectionError?: (err: Error) => void;
}

// Used only where GETDEL (Redis 6.2) is missing: the same read-and-delete, atomic as a script.
const TAKE_SCRIPT = "local v = redis.call('GET', KEYS[1]); if v then redis.call('DEL', KEYS[1]) end; return v";

const MAX_RECONNECT_DELAY_MS = 2_000;

/** Throws a clear Error for URLs the store cannot use (checked before any connection). */
export function assertSupportedRedisUrl(url: string): void {
  const scheme = /^([a-z0-9+.-]+):\/\//i.exec(url)?.[1]?.toLowerCase();
  if (scheme === 'redis' || scheme === 'rediss') return;
  if (scheme?.endsWith('+sentinel') || scheme?.endsWith('+cluster')) {
    throw new Error(`store.url: Redis Sentinel and Cluster are not supported yet (${scheme}://); use redis:// or rediss://`);
  }
  throw new Error('store.url: expected a redis:// or rediss:// URL');
}

export class RedisStore implements Store {
  readonly kind = 'redis' as const;
  readonly #client: Redis;
  #hasGetdel = true;

  constructor(options: RedisStoreOptions) {
    assertSupportedRedisUrl(options.url);
    this.#client = new Redis(options.url, {
      keyPrefix: options.keyPrefix,
      commandTimeout: options.commandTimeoutMs,
      connectTimeout: options.commandTimeoutMs,
      // Commands issued while (re)connecting wait in the offline queue, bounded by
      // commandTimeout; every failed connection attempt flushes that queue at once.
      enableOfflineQueue: true,
      maxRetriesPerRequest: 0,
      // A GETDEL re-sent after a dropped connection could consume a value whose caller was already told it failed.
      autoResendUnfulfilledCommands: false,
      retryStrategy: (attempt) => Math.min(100 * 2 ** (attempt - 1), MAX_RECONNECT_DELAY_MS),
    });
    // Without a listener ioredis prints every reconnect failure to the console.
    this.#client.on('error', (err: Error) => options.onConnectionError?.(err));
  }

  async get(key: string): Promise<string | undefined> {
    return this.#run('GET', async (c) => (await c.get(key)) ?? undefined);
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    const ttl = assertTtl(ttlMs);
    return this.#run('SET', async (c) => {
      await c.set(key, value, 'PX', ttl);
    });
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    const ttl = assertTtl(ttlMs);
    return this.#run('SET NX', async (c) => (await c.set(key, value, 'PX', ttl, 'NX')) === 'OK');
  }

  async take(key: string): Promise<string | undefined> {
    return this.#run('GETDEL', async (c) => {
      if (this.#hasGetdel) {
        try {
          return (await c.getdel(key)) ?? undefined;
        } catch (err) {
          if (!isUnknownCommand(err)) throw err;
          this.#hasGetdel = false;
        }
      }
      const value = await c.eval(TAKE_SCRIPT, 1, key);
      return typeof value === 'string' ? value : undefined;
    });
  }

  async delete(key: string): Promise<void> {
    return this.#run('DEL', async (c) => {
      await c.del(key);
    });
  }

  async ping(): Promise<void> {
    return this.#run('PING', async (c) => {
      await c.ping();
    });
  }

  /**
   * The server's `maxmemory-policy`, for a start-up warning unless it is
   * `noeviction` (an evicted code or binding would silently vanish).
   * undefined when CONFIG is disabled (managed Redis often renames it).
   */
  async checkEvictionPolicy(): Promise<string | undefined> {
    try {
      const reply = await this.#run('CONFIG GET', (c) => c.config('GET', 'maxmemory-policy'));
      return Array.isArray(reply) && typeof reply[1] === 'string' ? reply[1] : undefined;
    } catch (err) {
      if (err instanceof StoreUnavailableError && isReplyError(err.cause)) return undefined;
      throw err;
    }
  }

  async close(): Promise<void> {
    if (this.#client.status === 'ready') {
      try {
        await this.#client.quit();
        return;
      } catch {
        // fall through: a paused server may never answer QUIT
      }
    }
    this.#client.disconnect();
  }

  async #run<T>(command: string, fn: (client: Redis) => Promise<T>): Promise<T> {
    const status = this.#client.status;
    // Between reconnect attempts nothing can succeed: fail now rather than queue.
    if (status === 'reconnecting' || status === 'close' || status === 'end') {
      throw new StoreUnavailableError(`redis ${command}: not connected (${status})`);
    }
    try {
      return await fn(this.#client);
    } catch (err) {
      throw new StoreUnavailableError(`redis ${command} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
}

function isReplyError(err: unknown): boolean {
  return err instanceof Error && err.name === 'ReplyError';
}

function isUnknownCommand(err: unknown): boolean {
  return isReplyError(err) && /unknown command/i.test((err as Error).message);
}
