import { afterEach, describe, expect, it, vi } from 'vitest';
import { IdleSweep } from '../../src/proxy/idle-sweep.js';

afterEach(() => vi.useRealTimers());

describe('IdleSweep', () => {
  it('cuts what shows no activity for the limit, within a quarter of it, and spares what is active', () => {
    vi.useFakeTimers();
    const cut: string[] = [];
    const sweep = new IdleSweep<{ name: string; lastActivity: number; idleSlot: number }>(1_000, (item) => cut.push(item.name));
    const [stalled, active] = [{ name: 'stalled', lastActivity: 0, idleSlot: -1 }, { name: 'active', lastActivity: 0, idleSlot: -1 }];
    sweep.watch(stalled);
    sweep.watch(active);
    for (let t = 100; t < 1_000; t += 100) {
      vi.advanceTimersByTime(100);
      active.lastActivity = Date.now();
    }
    expect(cut).toEqual([]);
    vi.advanceTimersByTime(350);
    expect(cut).toEqual(['stalled']);
    sweep.unwatch(active);
    vi.advanceTimersByTime(5_000);
    expect(cut).toEqual(['stalled']);
  });

  it('runs no timer while nothing is watched', () => {
    vi.useFakeTimers();
    const sweep = new IdleSweep<{ lastActivity: number; idleSlot: number }>(60_000, () => undefined);
    const item = { lastActivity: 0, idleSlot: -1 };
    sweep.watch(item);
    expect(vi.getTimerCount()).toBe(1);
    sweep.unwatch(item);
    expect(vi.getTimerCount()).toBe(0);
    sweep.unwatch(item);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('keeps every other item watched when one leaves from the middle', () => {
    vi.useFakeTimers();
    const cut: number[] = [];
    const sweep = new IdleSweep<{ id: number; lastActivity: number; idleSlot: number }>(100, (item) => cut.push(item.id));
    const items = Array.from({ length: 5 }, (_, id) => ({ id, lastActivity: 0, idleSlot: -1 }));
    for (const item of items) sweep.watch(item);
    sweep.unwatch(items[1]!);
    sweep.unwatch(items[1]!);
    expect(items[1]!.idleSlot).toBe(-1);
    vi.advanceTimersByTime(150);
    expect(cut.sort()).toEqual([0, 2, 3, 4]);
    expect(items.every((item) => item.idleSlot === -1)).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });
});
