// SlotSet (src/proxy/slot-set.ts): the array-backed set the server's in-flight
// responses and the authorization-lifetime watch are kept in (issue 23).
import { describe, expect, it } from 'vitest';
import { SlotSet } from '../../src/proxy/slot-set.js';

const items = (n: number) => Array.from({ length: n }, (_, i) => ({ i }));

describe('SlotSet', () => {
  it('adds each item once, and has and counts what it holds', () => {
    const set = new SlotSet<{ i: number }>();
    const [a, b] = items(2);
    set.add(a!);
    set.add(a!);
    set.add(b!);
    expect(set.size).toBe(2);
    expect(set.has(a!)).toBe(true);
    expect([...set].map((x) => x.i).sort()).toEqual([0, 1]);
  });

  it('deletes from any place and keeps the others reachable', () => {
    const set = new SlotSet<{ i: number }>();
    const all = items(5);
    all.forEach((x) => set.add(x));
    expect(set.delete(all[1]!)).toBe(true);
    expect(set.delete(all[1]!)).toBe(false);
    expect(set.delete(all[4]!)).toBe(true);
    expect(set.has(all[1]!)).toBe(false);
    expect([...set].map((x) => x.i).sort()).toEqual([0, 2, 3]);
    all.forEach((x) => set.delete(x));
    expect(set.size).toBe(0);
    expect([...set]).toEqual([]);
  });

  it('lets one object be in two sets, and a deleted one come back', () => {
    const first = new SlotSet<{ i: number }>();
    const second = new SlotSet<{ i: number }>();
    const [a, b] = items(2);
    first.add(b!);
    first.add(a!);
    second.add(a!);
    first.delete(a!);
    expect(second.has(a!)).toBe(true);
    expect(first.has(a!)).toBe(false);
    first.add(a!);
    expect([...first].map((x) => x.i).sort()).toEqual([0, 1]);
  });

  it('can be walked while the walker deletes', () => {
    const set = new SlotSet<{ i: number }>();
    const all = items(6);
    all.forEach((x) => set.add(x));
    const seen: number[] = [];
    for (const x of set) {
      seen.push(x.i);
      set.delete(x);
    }
    expect(seen.sort()).toEqual([0, 1, 2, 3, 4, 5]);
    expect(set.size).toBe(0);
  });

  it('holds no reference to a deleted item', () => {
    const set = new SlotSet<{ i: number }>();
    const all = items(3);
    all.forEach((x) => set.add(x));
    all.forEach((x) => set.delete(x));
    // The backing array keeps its length, its slots cleared.
    const slots = (set as unknown as { items: unknown[] }).items;
    expect(slots.every((x) => x === undefined)).toBe(true);
  });
});
