// A user's share of a key class on Redis (owner-shares.ts), counted in a sorted
// set per user and route (`owner-share:`) of its record keys, scored by the
// server's clock when written. After a record is written, one script adds it to
// the set and takes out the oldest members past the share; each of those is
// then deleted only while it still holds this user's value, so no user's
// record is ever taken for another's. Every command touches one key, so this
// holds on a Cluster too, and every replica counts in the same set: the set
// never holds more than the share, and a record is in its owner's set before
// its write returns, so once writes settle a user never holds more than its
// share.
import { ownerShareKey } from './key-names.js';
import { ownerPartOf } from './owned-value.js';
import { keyClassOf, perOwnerShare, shareOwnerOf } from './owner-shares.js';
import type { RedisClient } from './redis-client.js';

/** Runs one command as the store runs every command: bounded in time, failures as StoreUnavailableError. */
export type RunCommand = <T>(command: string, fn: (client: RedisClient) => Promise<T>) => Promise<T>;

// KEYS[1]: the owner's set. ARGV: the record key, its TTL (ms), the share. Returns the members taken out.
// The set lives as long as its longest-lived record; the record just written is never the one taken out.
const COUNT_IN_SHARE_SCRIPT = [
  "local t = redis.call('TIME')",
  'local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000',
  "redis.call('ZADD', KEYS[1], string.format('%.3f', now), ARGV[1])",
  "local over = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[3])",
  'local out = {}',
  'if over > 0 then',
  "  for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, over)) do",
  '    if #out < over and member ~= ARGV[1] then out[#out + 1] = member end',
  '  end',
  "  redis.call('ZREM', KEYS[1], unpack(out))",
  'end',
  "if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end",
  'return out',
].join('\n');

// KEYS[1]: a record taken out of its owner's set; ARGV[1]: that owner's part. Deleted only while it is still that owner's.
const DELETE_IF_OWNED_SCRIPT = [
  "local v = redis.call('GET', KEYS[1])",
  'if not v then return 0 end',
  "local at = string.find(v, '\\n', 1, true)",
  'local owner = v',
  'if at then owner = string.sub(v, 1, at - 1) end',
  "if owner ~= ARGV[1] then return 0 end",
  "redis.call('DEL', KEYS[1])",
  'return 1',
].join('\n');

export class RedisOwnerShares {
  constructor(
    private readonly run: RunCommand,
    /** The `max_entries` shares derive from (owner-shares.ts). */
    private readonly shareBasis: number,
  ) {}

  /** The share of the key's class, or undefined when the class is not counted per user. */
  shareOf(key: string): number | undefined {
    return perOwnerShare(keyClassOf(key), this.shareBasis);
  }

  /** After `key` was written with `value`: counts it in its owner's share, and deletes that owner's oldest records past the share. */
  async count(key: string, value: string, ttlMs: number, share: number): Promise<void> {
    const index = ownerShareKey(shareOwnerOf(key, value));
    const out = await this.run('OWNER SHARE', async (c) => (await c.eval(COUNT_IN_SHARE_SCRIPT, 1, index, key, ttlMs, share)) as string[]);
    const owner = ownerPartOf(value);
    for (const oldest of out) await this.run('DEL OWNED', (c) => c.eval(DELETE_IF_OWNED_SCRIPT, 1, oldest, owner));
  }

  /** After `key` (holding `value`) was deleted: it no longer counts in its owner's share. */
  async forget(key: string, value: string): Promise<void> {
    await this.run('ZREM', (c) => c.zrem(ownerShareKey(shareOwnerOf(key, value)), key));
  }
}
