// The memory store's logs (revoked grants, an IdP session's grants, a principal's
// tasks): expired logs are swept without being read again, a live one is never
// evicted, and past the budget a write is refused (503), never silently dropped.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MemoryLogs } from '../../src/store/memory-logs.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { StoreUnavailableError } from '../../src/store/store.js';

describe('memory store logs', () => {
  it('expired logs that are never read again are swept as new ones come (the review\'s leak)', () => {
    const logs = new MemoryLogs(100_000, 100_000);
    for (let i = 0; i < 5000; i += 1) logs.append(`idp-session:${i}`, 'grant', 1000, i);
    // At t = 10,000 every earlier log has expired; the next appends sweep them.
    for (let i = 0; i < 5000; i += 1) logs.append(`idp-session:new-${i}`, 'grant', 1000, 10_000);
    expect(logs.size).toBeLessThanOrEqual(5000 + 1024);
  });

  it('at the budget a new log is refused with StoreUnavailableError, and no live log is forgotten', () => {
    const logs = new MemoryLogs(10, 10);
    for (let i = 0; i < 10; i += 1) logs.append(`revoked:${i}`, `g${i}`, 60_000, 0);
    expect(() => logs.append('revoked:new', 'g', 60_000, 1)).toThrow(StoreUnavailableError);
    for (let i = 0; i < 10; i += 1) expect(logs.read(`revoked:${i}`, -1, 1)).toEqual([{ member: `g${i}`, at: 0 }]);
    // Once they expire, there is room again.
    logs.append('revoked:new', 'g', 60_000, 60_001);
    expect(logs.read('revoked:new', -1, 60_001)).toEqual([{ member: 'g', at: 60_001 }]);
  });

  it('a log past its member budget refuses the new member and keeps the old ones', () => {
    const logs = new MemoryLogs(100, 3);
    for (const m of ['a', 'b', 'c']) logs.append('principal-tasks:p', m, 60_000, 0);
    expect(() => logs.append('principal-tasks:p', 'd', 60_000, 1)).toThrow(StoreUnavailableError);
    expect(logs.read('principal-tasks:p', -1, 1).map((e) => e.member)).toEqual(['a', 'b', 'c']);
    // Re-stamping a member already there needs no room.
    logs.append('principal-tasks:p', 'a', 60_000, 2);
    expect(logs.read('principal-tasks:p', -1, 2).map((e) => e.member)).toEqual(['b', 'c', 'a']);
  });

  it('property: reads agree with a model that keeps every live member and drops what is past retention', () => {
    const op = fc.record({ key: fc.integer({ min: 0, max: 40 }), member: fc.integer({ min: 0, max: 5 }), retention: fc.integer({ min: 1, max: 50 }), dt: fc.integer({ min: 0, max: 20 }) });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const logs = new MemoryLogs(1_000_000, 1_000_000);
        const model = new Map<string, { members: Map<string, number>; expiresAt: number }>();
        let now = 0;
        for (const { key, member, retention, dt } of ops) {
          now += dt;
          const k = `log:${key}`;
          logs.append(k, `m${member}`, retention, now);
          const prev = model.get(k);
          const members = prev && prev.expiresAt > now ? prev.members : new Map<string, number>();
          members.delete(`m${member}`);
          members.set(`m${member}`, now);
          for (const [m, at] of members) if (at < now - retention) members.delete(m);
          model.set(k, { members, expiresAt: now + retention });
          for (const [mk, log] of model) {
            const expected = log.expiresAt > now ? [...log.members].map(([m, at]) => ({ member: m, at })) : [];
            expect(logs.read(mk, -1, now)).toEqual(expected);
          }
        }
      }),
    );
  });

  it('the store answers appendToLog past its budget with StoreUnavailableError (503 to the caller)', async () => {
    const store = new MemoryStore({ maxEntries: 2 });
    await store.appendToLog('idp-session:a', 'g1', 60_000);
    await store.appendToLog('idp-session:b', 'g2', 60_000);
    await expect(store.appendToLog('idp-session:c', 'g3', 60_000)).rejects.toBeInstanceOf(StoreUnavailableError);
    expect(await store.readLog('idp-session:a', 0)).toHaveLength(1);
  });
});
