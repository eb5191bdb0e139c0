// The Store contract every backend must keep, as a suite any test file can
// run against its own backend (memory, Redis standalone, Sentinel, Cluster).
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/store.js';

export interface ContractBackend {
  name: string;
  open(): Promise<Store>;
  shutdown(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Defines `Store contract: <name>`: every operation, TTLs, atomicity under 20 concurrent callers, literal keys. */
export function describeStoreContract(backend: ContractBackend): void {
  describe(`Store contract: ${backend.name}`, () => {
    let store: Store;
    beforeAll(async () => {
      store = await backend.open();
    });
    afterAll(async () => {
      await store?.close();
      await backend.shutdown();
    });
    const k = () => `k:${randomUUID()}`;

    it('gets what was set, and undefined for a missing key', async () => {
      const key = k();
      expect(await store.get(key)).toBeUndefined();
      await store.set(key, 'v1', 10_000);
      expect(await store.get(key)).toBe('v1');
      await store.set(key, 'v2', 10_000);
      expect(await store.get(key)).toBe('v2');
    });

    it('expires entries after their TTL', async () => {
      const key = k();
      await store.set(key, 'v', 100);
      expect(await store.get(key)).toBe('v');
      await sleep(250);
      expect(await store.get(key)).toBeUndefined();
    });

    it('refuses a write without a positive TTL', async () => {
      await expect(store.set(k(), 'v', 0)).rejects.toThrow(RangeError);
      await expect(store.setIfAbsent(k(), 'v', Number.NaN)).rejects.toThrow(RangeError);
    });

    it('setIfAbsent writes once, and again after expiry', async () => {
      const key = k();
      expect(await store.setIfAbsent(key, 'first', 100)).toBe(true);
      expect(await store.setIfAbsent(key, 'second', 100)).toBe(false);
      expect(await store.get(key)).toBe('first');
      await sleep(250);
      expect(await store.setIfAbsent(key, 'third', 10_000)).toBe(true);
      expect(await store.get(key)).toBe('third');
    });

    it('setIfAbsent: of 20 concurrent writers exactly one wins', async () => {
      const key = k();
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store.setIfAbsent(key, String(i), 10_000)));
      expect(results.filter(Boolean)).toHaveLength(1);
    });

    it('compareAndSet writes only over the expected value (absent, present), deletes with no next, and refuses a bad TTL', async () => {
      const key = k();
      expect(await store.compareAndSet(key, 'v0', 'v1', 10_000)).toBe(false);
      expect(await store.get(key)).toBeUndefined();
      expect(await store.compareAndSet(key, undefined, 'v1', 10_000)).toBe(true);
      expect(await store.compareAndSet(key, undefined, 'v2', 10_000)).toBe(false);
      expect(await store.compareAndSet(key, 'v0', 'v2', 10_000)).toBe(false);
      expect(await store.get(key)).toBe('v1');
      // The empty string is a value, not absence.
      expect(await store.compareAndSet(key, 'v1', '', 10_000)).toBe(true);
      expect(await store.compareAndSet(key, undefined, 'v3', 10_000)).toBe(false);
      expect(await store.compareAndSet(key, '', undefined, 10_000)).toBe(true);
      expect(await store.get(key)).toBeUndefined();
      await expect(store.compareAndSet(k(), undefined, 'v', 0)).rejects.toThrow(RangeError);
    });

    it('compareAndSet: 20 concurrent writers looping on it lose none of their updates', async () => {
      const key = k();
      const append = async (member: string) => {
        for (;;) {
          const current = await store.get(key);
          const next = JSON.stringify([...(JSON.parse(current ?? '[]') as string[]), member]);
          if (await store.compareAndSet(key, current, next, 10_000)) return;
        }
      };
      await Promise.all(Array.from({ length: 20 }, (_, i) => append(`m${i}`)));
      expect((JSON.parse((await store.get(key)) ?? '[]') as string[]).sort()).toEqual(Array.from({ length: 20 }, (_, i) => `m${i}`).sort());
    });

    it('take returns the value once and deletes it', async () => {
      const key = k();
      await store.set(key, 'code', 10_000);
      expect(await store.take(key)).toBe('code');
      expect(await store.take(key)).toBeUndefined();
      expect(await store.get(key)).toBeUndefined();
      expect(await store.take(k())).toBeUndefined();
    });

    it('take: of 20 concurrent takers exactly one gets the value', async () => {
      const key = k();
      await store.set(key, 'code', 10_000);
      const results = await Promise.all(Array.from({ length: 20 }, () => store.take(key)));
      expect(results.filter((r) => r !== undefined)).toEqual(['code']);
    });

    it('increment counts from 1, and of 20 concurrent increments each sees a different count', async () => {
      const key = k();
      expect(await store.increment(key, 10_000)).toBe(1);
      const counts = await Promise.all(Array.from({ length: 20 }, () => store.increment(key, 10_000)));
      expect([...counts].sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 2));
      expect(await store.get(key)).toBe('21');
    });

    it('increment keeps the first TTL (a fixed window), then starts again at 1', async () => {
      const key = k();
      expect(await store.increment(key, 200)).toBe(1);
      await sleep(120);
      expect(await store.increment(key, 10_000)).toBe(2); // must not extend the window
      await sleep(150);
      expect(await store.increment(key, 10_000)).toBe(1);
      await expect(store.increment(k(), 0)).rejects.toThrow(RangeError);
    });

    it('a log returns its members oldest first, after a stamp, once per member; old members go', async () => {
      const key = k();
      expect(await store.readLog(key, 0)).toEqual([]);
      await store.appendToLog(key, 'a', 10_000);
      await sleep(5);
      await store.appendToLog(key, 'b', 10_000);
      const all = await store.readLog(key, 0);
      expect(all.map((e) => e.member)).toEqual(['a', 'b']);
      expect(all[0]!.at).toBeLessThan(all[1]!.at);
      expect(Math.abs(all[1]!.at - Date.now())).toBeLessThan(5_000);
      expect((await store.readLog(key, all[0]!.at)).map((e) => e.member)).toEqual(['b']);
      expect(await store.readLog(key, all[1]!.at)).toEqual([]);
      // Appended again: one member, restamped.
      await sleep(5);
      await store.appendToLog(key, 'a', 10_000);
      expect((await store.readLog(key, 0)).map((e) => e.member)).toEqual(['b', 'a']);
      // A short retention drops what is older than it at the next append.
      const short = k();
      await store.appendToLog(short, 'old', 100);
      await sleep(150);
      await store.appendToLog(short, 'new', 100);
      expect((await store.readLog(short, 0)).map((e) => e.member)).toEqual(['new']);
      await sleep(150);
      expect(await store.readLog(short, 0)).toEqual([]);
      await expect(store.appendToLog(k(), 'x', 0)).rejects.toThrow(RangeError);
    });

    it('admit: a window admits `limit` uses, then refuses with the time until room, counting nothing refused', async () => {
      const key = k();
      const request = { cost: 1, limit: 3, windowMs: 60_000 };
      for (let i = 0; i < 3; i++) expect(await store.admit(key, request)).toEqual({ admitted: true, retryAfterMs: 0 });
      const refused = await store.admit(key, request);
      expect(refused.admitted).toBe(false);
      // All three are in the current slot: room comes when it leaves the window, within window + one slot.
      expect(refused.retryAfterMs).toBeGreaterThan(60_000 - 6_000);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(66_000);
      // A batch bigger than the limit never fits.
      expect((await store.admit(k(), { cost: 4, limit: 3, windowMs: 60_000 })).admitted).toBe(false);
    });

    it('admit: a cost is admitted whole or not at all', async () => {
      const key = k();
      expect((await store.admit(key, { cost: 3, limit: 5, windowMs: 60_000 })).admitted).toBe(true);
      expect((await store.admit(key, { cost: 3, limit: 5, windowMs: 60_000 })).admitted).toBe(false);
      expect((await store.admit(key, { cost: 2, limit: 5, windowMs: 60_000 })).admitted).toBe(true);
      expect((await store.admit(key, { cost: 1, limit: 5, windowMs: 60_000 })).admitted).toBe(false);
    });

    it('admit: of 20 concurrent callers exactly `limit` are admitted', async () => {
      const key = k();
      const results = await Promise.all(Array.from({ length: 20 }, () => store.admit(key, { cost: 1, limit: 7, windowMs: 60_000 })));
      expect(results.filter((r) => r.admitted)).toHaveLength(7);
    });

    it('admit: after retryAfterMs the refused use fits', async () => {
      const key = k();
      const request = { cost: 1, limit: 2, windowMs: 400 };
      await store.admit(key, request);
      await store.admit(key, request);
      const refused = await store.admit(key, request);
      expect(refused.admitted).toBe(false);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(440);
      await sleep(refused.retryAfterMs + 5);
      expect((await store.admit(key, request)).admitted).toBe(true);
    });

    it('admit: counts left under another window length do not break a decision; bad requests are RangeErrors', async () => {
      const key = k();
      await store.admit(key, { cost: 1, limit: 5, windowMs: 1_000 });
      const after = await store.admit(key, { cost: 1, limit: 5, windowMs: 3_600_000 });
      expect(typeof after.admitted).toBe('boolean');
      await expect(store.admit(k(), { cost: 0, limit: 5, windowMs: 1_000 })).rejects.toThrow(RangeError);
      await expect(store.admit(k(), { cost: 1, limit: 1.5, windowMs: 1_000 })).rejects.toThrow(RangeError);
      await expect(store.admit(k(), { cost: 1, limit: 5, windowMs: 5 })).rejects.toThrow(RangeError);
    });

    it('delete removes a key, and is quiet about a missing one', async () => {
      const key = k();
      await store.set(key, 'v', 10_000);
      await store.delete(key);
      expect(await store.get(key)).toBeUndefined();
      await expect(store.delete(k())).resolves.toBeUndefined();
    });

    it('treats `:` and `*` in keys literally', async () => {
      const base = k();
      await store.set(`${base}:a:b`, 'colon', 10_000);
      await store.set(`${base}:*`, 'star', 10_000);
      expect(await store.get(`${base}:a:b`)).toBe('colon');
      expect(await store.get(`${base}:*`)).toBe('star');
      expect(await store.get(`${base}:a`)).toBeUndefined();
      await store.delete(`${base}:*`);
      expect(await store.get(`${base}:a:b`)).toBe('colon');
    });

    it('answers ping', async () => {
      await expect(store.ping()).resolves.toBeUndefined();
    });
  });
}
