import { afterEach, describe, expect, it, vi } from 'vitest';
import { IdleSweep } from '../../src/proxy/idle-sweep.js';

afterEach(() => vi.useRealTimers());

const item = (id = 0) => ({ id, lastActivity: 0, idleSlot: -1 });

describe('IdleSweep', () => {
  it('cuts what shows no activity for the limit (never sooner, at most a quarter later), and spares what is active', () => {
    vi.useFakeTimers();
    const cut: number[] = [];
    const sweep = new IdleSweep<ReturnType<typeof item>>(1_000, (stalled) => cut.push(stalled.id));
    const [stalled, active] = [item(1), item(2)];
    sweep.watch(stalled);
    sweep.watch(active);
    for (let t = 0; t < 2_000; t += 100) {
      vi.advanceTimersByTime(100);
      sweep.touch(active);
      if (t < 900) expect(cut).toEqual([]);
    }
    expect(cut).toEqual([1]);
    sweep.unwatch(active);
    vi.advanceTimersByTime(5_000);
    expect(cut).toEqual([1]);
  });

  it('runs its timer only while something is watched, stopping at the first sweep with nothing to do', () => {
    vi.useFakeTimers();
    const sweep = new IdleSweep<ReturnType<typeof item>>(60_000, () => undefined);
    const watched = item();
    sweep.watch(watched);
    expect(vi.getTimerCount()).toBe(1);
    sweep.unwatch(watched);
    sweep.unwatch(watched);
    // A body watched and done at once (the common case) leaves the timer running until the next sweep.
    const brief = item();
    sweep.watch(brief);
    sweep.unwatch(brief);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(15_000);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('keeps every other item watched when one leaves from the middle', () => {
    vi.useFakeTimers();
    const cut: number[] = [];
    const sweep = new IdleSweep<ReturnType<typeof item>>(100, (stalled) => cut.push(stalled.id));
    const items = Array.from({ length: 5 }, (_, id) => item(id));
    for (const watched of items) sweep.watch(watched);
    sweep.unwatch(items[1]!);
    sweep.unwatch(items[1]!);
    expect(items[1]!.idleSlot).toBe(-1);
    vi.advanceTimersByTime(150);
    expect(cut.sort()).toEqual([0, 2, 3, 4]);
    expect(items.every((watched) => watched.idleSlot === -1)).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });
});
