// Shared store for several replicas, on ioredis: one primary, a Sentinel-
// managed primary, or a Redis Cluster (see redis-url.ts). Every failure —
// down, paused, refused, failing over — becomes StoreUnavailableError within a
// bounded time, so callers answer 503 instead of hanging; the client
// reconnects on its own. Every operation touches one key, so Cluster needs no
// hash tags. Records a user owns (owner-shares.ts) are counted in its share
// as the memory store counts them (redis-owner-shares.ts).
import { Cluster } from 'ioredis';
import { StoreUnavailableError, type Admission, type AdmitRequest, type LogEntry, type Store } from './store.js';
import { assertAdmitRequest, SLIDING_WINDOW_SLOTS } from './sliding-window.js';
import { assertTtl } from './ttl.js';
import { createRedisClient, MAX_RECONNECT_DELAY_MS, type RedisClient } from './redis-client.js';
import { reviveWhenEnded, type Revival } from './redis-revival.js';
import { RedisNotices } from './redis-notices.js';
import { RedisOwnerShares } from './redis-owner-shares.js';
import { DEFAULT_SHARE_BASIS } from './owner-shares.js';
import { parseRedisUrl, type RedisTopology } from '../config/redis-url.js';

export interface RedisStoreOptions {
  /** redis://, rediss:// (TLS), redis+sentinel:// or redis+cluster:// (see redis-url.ts). */
  url: string;
  /** Prepended to every key, e.g. `mag:`. */
  keyPrefix: string;
  /** Upper bound for any one command, and for a connection attempt. */
  commandTimeoutMs: number;
  /** Connection errors, for logging (ioredis reports each failed reconnect). */
  onConnectionError?: (err: Error) => void;
  /** The `max_entries` a user's share of a class derives from (owner-shares.ts); default the memory store's default, 100,000. */
  shareBasis?: number;
}

// Used only where GETDEL (Redis 6.2) is missing: the same read-and-delete, atomic as a script.
const TAKE_SCRIPT = "local v = redis.call('GET', KEYS[1]); if v then redis.call('DEL', KEYS[1]) end; return v";

// compareAndSet: GET, compare, then SET PX or DEL, in one step. ARGV: has-expected, expected, has-next, next, ttl.
const COMPARE_AND_SET_SCRIPT = [
  "local v = redis.call('GET', KEYS[1])",
  "if ARGV[1] == '1' then if v ~= ARGV[2] then return 0 end elseif v then return 0 end",
  "if ARGV[3] == '1' then redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[5]) else redis.call('DEL', KEYS[1]) end",
  'return 1',
].join('\n');

// INCR keeps an existing key's expiry; the first increment sets it. One script, so no window is left without a TTL.
const INCREMENT_SCRIPT = "local n = redis.call('INCR', KEYS[1]); if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end; return n";

// A log is a sorted set scored by the server's TIME (ms): one clock for every replica. Old members and,
// when nothing is appended, the whole key expire after the retention. One key, so Cluster-safe.
const APPEND_TO_LOG_SCRIPT = [
  "local t = redis.call('TIME')",
  'local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)',
  "redis.call('ZADD', KEYS[1], now, ARGV[1])",
  "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(ARGV[2])))",
  "redis.call('PEXPIRE', KEYS[1], ARGV[2])",
  'return now',
].join('\n');

// sliding-window.ts in Lua, by the server's TIME: the hash at KEYS[1] maps slot → count. Reads, drops the
// slots that left the window, and counts an admitted request in one step, so no replica ever sees a count
// another is about to change. Returns {1, 0} admitted, or {0, retryAfterMs}. One key, so Cluster-safe.
const ADMIT_SCRIPT = [
  "local t = redis.call('TIME')",
  'local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)',
  'local cost, limit, window, slots = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])',
  'local current = math.floor(now * slots / window)',
  "local flat = redis.call('HGETALL', KEYS[1])",
  'local live, used = {}, 0',
  'for i = 1, #flat, 2 do',
  '  local slot, count = tonumber(flat[i]), tonumber(flat[i + 1])',
  "  if slot < current - slots then redis.call('HDEL', KEYS[1], flat[i])",
  '  else used = used + count; live[#live + 1] = { slot, count } end',
  'end',
  'if used + cost <= limit then',
  "  redis.call('HINCRBY', KEYS[1], string.format('%d', current), cost)",
  "  redis.call('PEXPIRE', KEYS[1], window + math.ceil(window / slots))",
  '  return { 1, 0 }',
  'end',
  'local never = window + math.ceil(window / slots)',
  'if cost > limit then return { 0, never } end',
  'table.sort(live, function(a, b) return a[1] < b[1] end)',
  'for _, entry in ipairs(live) do',
  '  used = used - entry[2]',
  '  if used + cost <= limit then return { 0, math.max(1, math.ceil((entry[1] + slots + 1) * window / slots) - now) } end',
  'end',
  'return { 0, never }',
].join('\n');

/** Beyond commandTimeout: a command queued while a Cluster (re)discovers its nodes has no per-node timer yet. */
const DEADLINE_SLACK_MS = 100;

export class RedisStore implements Store {
  readonly kind = 'redis' as const;
  /** standalone, sentinel or cluster. */
  readonly topology: RedisTopology['kind'];
  readonly #client: RedisClient;
  readonly #deadlineMs: number;
  readonly #revival: Revival | undefined;
  #hasGetdel = true;
  readonly notices: RedisNotices;
  readonly #shares: RedisOwnerShares;

  constructor(options: RedisStoreOptions) {
    const topology = parseRedisUrl(options.url);
    this.topology = topology.kind;
    this.#deadlineMs = options.commandTimeoutMs + DEADLINE_SLACK_MS;
    this.#client = createRedisClient(topology, { keyPrefix: options.keyPrefix, commandTimeoutMs: options.commandTimeoutMs });
    // Without a listener ioredis prints every reconnect failure to the console.
    this.#client.on('error', (err: Error) => options.onConnectionError?.(err));
    // A Cluster ends only when closed; a single client may also end on a failed Sentinel lookup.
    this.#revival = this.#client instanceof Cluster ? undefined : reviveWhenEnded(this.#client, MAX_RECONNECT_DELAY_MS);
    this.notices = new RedisNotices(this.#client, options.keyPrefix);
    this.#shares = new RedisOwnerShares((command, fn) => this.#run(command, fn), options.shareBasis ?? DEFAULT_SHARE_BASIS);
  }

  async get(key: string): Promise<string | undefined> {
    return this.#run('GET', async (c) => (await c.get(key)) ?? undefined);
  }

  async set(key: string, value: string, ttlMs: number): Promise<void> {
    const ttl = assertTtl(ttlMs);
    await this.#run('SET', async (c) => {
      await c.set(key, value, 'PX', ttl);
    });
    await this.#countInShare(key, value, ttl);
  }

  async setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    const ttl = assertTtl(ttlMs);
    const written = await this.#run('SET NX', async (c) => (await c.set(key, value, 'PX', ttl, 'NX')) === 'OK');
    if (written) await this.#countInShare(key, value, ttl);
    return written;
  }

  async compareAndSet(key: string, expected: string | undefined, next: string | undefined, ttlMs: number): Promise<boolean> {
    const ttl = assertTtl(ttlMs);
    const args = [expected === undefined ? '0' : '1', expected ?? '', next === undefined ? '0' : '1', next ?? '', ttl];
    return this.#run('CAS', async (c) => Number(await c.eval(COMPARE_AND_SET_SCRIPT, 1, key, ...args)) === 1);
  }

  async take(key: string): Promise<string | undefined> {
    const value = await this.#take(key);
    if (value !== undefined && this.#shares.shareOf(key) !== undefined) await this.#shares.forget(key, value);
    return value;
  }

  async #take(key: string): Promise<string | undefined> {
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

  async increment(key: string, ttlMs: number): Promise<number> {
    const ttl = assertTtl(ttlMs);
    return this.#run('INCR', async (c) => Number(await c.eval(INCREMENT_SCRIPT, 1, key, ttl)));
  }

  async appendToLog(key: string, member: string, retentionMs: number): Promise<void> {
    const retention = assertTtl(retentionMs);
    return this.#run('ZADD', async (c) => {
      await c.eval(APPEND_TO_LOG_SCRIPT, 1, key, member, retention);
    });
  }

  async admit(key: string, request: AdmitRequest): Promise<Admission> {
    assertAdmitRequest(request);
    const { cost, limit, windowMs } = request;
    return this.#run('ADMIT', async (c) => {
      const [admitted, retryAfterMs] = (await c.eval(ADMIT_SCRIPT, 1, key, cost, limit, windowMs, SLIDING_WINDOW_SLOTS)) as [number, number];
      return { admitted: admitted === 1, retryAfterMs: Number(retryAfterMs) };
    });
  }

  async readLog(key: string, sinceMs: number): Promise<LogEntry[]> {
    return this.#run('ZRANGEBYSCORE', async (c) => {
      const flat = await c.zrangebyscore(key, `(${Math.floor(sinceMs)}`, '+inf', 'WITHSCORES');
      const entries: LogEntry[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) entries.push({ member: flat[i] as string, at: Number(flat[i + 1]) });
      return entries;
    });
  }

  async delete(key: string): Promise<void> {
    // A record counted in a share leaves it too: its user's live records are not pushed out by deleted ones.
    if (this.#shares.shareOf(key) !== undefined) {
      await this.take(key);
      return;
    }
    return this.#run('DEL', async (c) => {
      await c.del(key);
    });
  }

  /**
   * After a write of a record a user owns: counted in the user's share, its oldest past the share
   * deleted. Should counting fail, the record is deleted again (best effort) rather than left uncounted.
   */
  async #countInShare(key: string, value: string, ttl: number): Promise<void> {
    const share = this.#shares.shareOf(key);
    if (share === undefined) return;
    try {
      await this.#shares.count(key, value, ttl, share);
    } catch (err) {
      await this.#run('DEL', (c) => c.del(key)).catch(() => undefined);
      throw err;
    }
  }

  async ping(): Promise<void> {
    return this.#run('PING', async (c) => {
      await c.ping();
    });
  }

  async time(): Promise<number> {
    return this.#run('TIME', async (c) => {
      const [seconds, micros] = await c.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    });
  }

  /**
   * The server's `maxmemory-policy`, for the start-up check (an evicted code
   * or binding would silently vanish): on a Cluster, the first primary's that
   * is not `noeviction`, if any. undefined when CONFIG is disabled (managed
   * Redis often renames it).
   */
  async checkEvictionPolicy(): Promise<string | undefined> {
    const client = this.#client;
    if (!(client instanceof Cluster)) return this.#evictionPolicyOf(client);
    await this.ping(); // the node list is known once the cluster answers
    const policies = await Promise.all(client.nodes('master').map((node) => this.#evictionPolicyOf(node)));
    if (policies.length === 0 || policies.includes(undefined)) return undefined;
    return policies.find((p) => p !== 'noeviction') ?? 'noeviction';
  }

  async #evictionPolicyOf(node: RedisClient): Promise<string | undefined> {
    try {
      const reply = await this.#run('CONFIG GET', (c) => c.config('GET', 'maxmemory-policy'), node);
      return Array.isArray(reply) && typeof reply[1] === 'string' ? reply[1] : undefined;
    } catch (err) {
      if (err instanceof StoreUnavailableError && isReplyError(err.cause)) return undefined;
      throw err;
    }
  }

  async close(): Promise<void> {
    this.#revival?.stop();
    this.notices.close();
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

  async #run<T>(command: string, fn: (client: RedisClient) => Promise<T>, client: RedisClient = this.#client): Promise<T> {
    const status = client.status;
    // Between reconnect attempts nothing can succeed: fail now rather than queue.
    if (status === 'reconnecting' || status === 'close' || status === 'end') {
      throw new StoreUnavailableError(`redis ${command}: not connected (${status})`);
    }
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${this.#deadlineMs} ms`)), this.#deadlineMs);
    });
    try {
      return await Promise.race([fn(client), deadline]);
    } catch (err) {
      throw new StoreUnavailableError(`redis ${command} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    } finally {
      clearTimeout(timer);
    }
  }
}

function isReplyError(err: unknown): boolean {
  return err instanceof Error && err.name === 'ReplyError';
}

function isUnknownCommand(err: unknown): boolean {
  return isReplyError(err) && /unknown command/i.test((err as Error).message);
}
