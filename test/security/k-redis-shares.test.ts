/**
 * [K81] on Redis (DESIGN.md §8.3, "every class of store entries is bounded per principal"): the
 * memory store bounds a user's `session:`, `task:`, `event-id:` records per route and its
 * `upstream-connect:` records (memory-class-budgets.ts); on Redis these classes had TTLs only, so one
 * user's `initialize`s, tasks or event ids grew without bound until Redis (with `noeviction`) refused
 * every user's writes. Found by the third audit. Now the Redis store keeps a per-user index (a sorted
 * set, `owner-share:`) and drops the user's own oldest record past its share (owner-shares.ts).
 * Each test fails on main: the user's records past the share are all still there.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import { ownerValue } from '../../src/policy/owned-ids.js';
import { createSessionBinding } from '../../src/proxy/session-binding.js';
import { eventIdOwnerKey, hashKeyPart, sessionBindingKey, taskOwnerKey, upstreamConnectKey } from '../../src/store/key-names.js';
import { ownedValue } from '../../src/store/owned-value.js';
import { perOwnerShare } from '../../src/store/owner-shares.js';
import { RedisStore } from '../../src/store/redis-store.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';

const HOUR_MS = 3_600_000;
let redis: RedisServer;
let raw: Redis;
const stores: RedisStore[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
  raw = new Redis(redis.url, { lazyConnect: false });
}, 30_000);

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  raw?.disconnect();
  await redis?.stop();
});

/** A replica's store on the shared redis-server; `shareBasis` as the memory store's max_entries. */
function replica(prefix: string, shareBasis?: number): RedisStore {
  const store = new RedisStore({ url: redis.url, keyPrefix: prefix, commandTimeoutMs: 2000, ...(shareBasis !== undefined && { shareBasis }) });
  stores.push(store);
  return store;
}

type Principal = Pick<AuthContext, 'issuer' | 'subject' | 'clientId'>;
const user = (subject: string, clientId = `${subject}-app`): Principal => ({ issuer: 'https://idp.example', subject, clientId });

type ClassName = 'session' | 'task' | 'event-id' | 'upstream-connect';
const ROUTE = '/r/mcp';

/** One record of `cls` for `who`, written as the gateway writes it; and whether it is still there, still `who`'s. */
const RECORDS: Record<ClassName, { key: (id: string) => string; value: (who: Principal) => string; write: (s: RedisStore, key: string, value: string) => Promise<unknown> }> = {
  session: { key: (id) => sessionBindingKey(ROUTE, id), value: (who) => ownedValue(JSON.stringify([who.issuer, who.subject]), JSON.stringify([who.issuer, who.subject, who.clientId])), write: (s, k, v) => s.setIfAbsent(k, v, 24 * HOUR_MS) },
  task: { key: (id) => taskOwnerKey(ROUTE, id), value: (who) => ownerValue(who as AuthContext), write: (s, k, v) => s.setIfAbsent(k, v, HOUR_MS) },
  'event-id': { key: (id) => eventIdOwnerKey(ROUTE, id), value: (who) => ownerValue(who as AuthContext), write: (s, k, v) => s.setIfAbsent(k, v, HOUR_MS) },
  'upstream-connect': { key: (id) => upstreamConnectKey(id), value: (who) => ownedValue(hashKeyPart(`${who.issuer}\n${who.subject}`), `sealed-${randomUUID()}`), write: (s, k, v) => s.set(k, v, 10 * 60_000) },
};

async function liveCount(store: RedisStore, entries: { key: string; value: string }[]): Promise<number> {
  let live = 0;
  for (const { key, value } of entries) if ((await store.get(key)) === value) live++;
  return live;
}

describe('[K81] on redis-server a user holds at most its share of session, task, event-id and upstream-connect records, and never evicts another user\'s', () => {
  it('1,100 initializes of one user through eleven clients at the default share: 1000 bindings live on the route, the newest among them; bob keeps his', async () => {
    const store = replica(`t:${randomUUID()}:`);
    const bindings = createSessionBinding(store);
    const bob = user('bob');
    await bindings.bind(ROUTE, 'bob-session', bob as AuthContext);
    const mallory = (i: number) => user('mallory', `mallory-app-${i % 11}`) as AuthContext;
    for (let i = 0; i < 1100; i++) await bindings.bind(ROUTE, `m-${i}`, mallory(i));
    const held = async (id: string, who: AuthContext) => bindings.check(ROUTE, id, who).then(() => true, () => false);
    let live = 0;
    for (let i = 0; i < 1100; i++) if (await held(`m-${i}`, mallory(i))) live++;
    expect(perOwnerShare('session', undefined)).toBe(1000);
    expect(live).toBe(1000);
    expect(await held('m-1099', mallory(1099))).toBe(true);
    expect(await held('m-0', mallory(0))).toBe(false);
    expect(await held('bob-session', bob as AuthContext)).toBe(true);
    // The same user on another route has a share of its own there.
    await bindings.bind('/other/mcp', 'm-elsewhere', mallory(0));
    expect(await bindings.check('/other/mcp', 'm-elsewhere', mallory(0)).then(() => true)).toBe(true);
  }, 60_000);

  it('150 pending upstream connects of one user at the default share: 100 live; bob keeps his', async () => {
    const store = replica(`t:${randomUUID()}:`);
    const connect = RECORDS['upstream-connect'];
    const bob = { key: connect.key('bob-state'), value: connect.value(user('bob')) };
    await connect.write(store, bob.key, bob.value);
    const entries = Array.from({ length: 150 }, (_, i) => ({ key: connect.key(`m-${i}`), value: connect.value(user('mallory', `c${i}`)) }));
    for (const e of entries) await connect.write(store, e.key, e.value);
    expect(await liveCount(store, entries)).toBe(100);
    expect(await liveCount(store, [bob])).toBe(1);
  }, 60_000);

  it('a released record leaves its owner\'s index: the user\'s live records are never pushed out by ones it deleted', async () => {
    const store = replica(`t:${randomUUID()}:`, 50); // a share of 5
    const bindings = createSessionBinding(store);
    const alice = user('alice') as AuthContext;
    await bindings.bind(ROUTE, 'kept', alice);
    for (let i = 0; i < 20; i++) {
      await bindings.bind(ROUTE, `short-${i}`, alice);
      await bindings.release(ROUTE, `short-${i}`);
    }
    expect(await bindings.check(ROUTE, 'kept', alice).then(() => true, () => false)).toBe(true);
  });

  it('property: users, clients, classes and two replicas interleaved concurrently — each user keeps exactly min(written, share) of each class, its newest among them, the index bounded and expiring', async () => {
    const step = fc.record({
      who: fc.integer({ min: 0, max: 3 }),
      client: fc.integer({ min: 0, max: 4 }),
      cls: fc.constantFrom<ClassName>('session', 'task', 'event-id', 'upstream-connect'),
      replica: fc.integer({ min: 0, max: 1 }),
    });
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 10, max: 60 }), fc.array(step, { minLength: 1, maxLength: 120 }), fc.integer({ min: 1, max: 12 }), async (basis, steps, parallel) => {
        const prefix = `p:${randomUUID()}:`;
        const replicas = [replica(prefix, basis), replica(prefix, basis)];
        const written = new Map<string, { key: string; value: string }[]>();
        const entries = steps.map((s, i) => {
          const rec = RECORDS[s.cls];
          const entry = { key: rec.key(`${s.who}-${i}`), value: rec.value(user(`u${s.who}`, `app-${s.client}`)) };
          const group = `${s.cls}/${s.who}`;
          written.set(group, [...(written.get(group) ?? []), entry]);
          return { ...s, entry };
        });
        // Up to `parallel` writes in flight at once, spread over both replicas: no order between them.
        for (let i = 0; i < entries.length; i += parallel) {
          await Promise.all(entries.slice(i, i + parallel).map((e) => RECORDS[e.cls].write(replicas[e.replica]!, e.entry.key, e.entry.value)));
        }
        for (const [group, list] of written) {
          const [cls, who] = group.split('/') as [ClassName, string];
          const share = perOwnerShare(cls, basis)!;
          expect(await liveCount(replicas[0]!, list), group).toBe(Math.min(list.length, share));
          // Writes in flight together have no order; one written after them all is the user's newest and stays.
          const rec = RECORDS[cls];
          const newest = { key: rec.key(`${who}-newest`), value: rec.value(user(`u${who}`, 'app-0')) };
          await rec.write(replicas[1]!, newest.key, newest.value);
          expect(await liveCount(replicas[0]!, [newest]), group).toBe(1);
          expect(await liveCount(replicas[0]!, [...list, newest]), group).toBe(Math.min(list.length + 1, share));
        }
        const indexes = await raw.keys(`${prefix}owner-share:*`);
        expect(indexes.length).toBeGreaterThan(0);
        for (const index of indexes) {
          expect(await raw.zcard(index)).toBeLessThanOrEqual(Math.max(...['session', 'upstream-connect'].map((c) => perOwnerShare(c, basis)!)));
          expect(await raw.pttl(index)).toBeGreaterThan(0);
        }
        await Promise.all(replicas.map((r) => r.close()));
        stores.splice(stores.indexOf(replicas[0]!), 2);
      }),
      { numRuns: 40 },
    );
  }, 120_000);
});
