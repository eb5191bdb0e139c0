// The rate-limit algorithm (store/sliding-window.ts) as properties over random
// traffic: what it admits never exceeds the limit in any window, it refuses
// only within its documented error bound, and Retry-After is exactly when the
// refused request would fit.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { admitSlidingWindow, SLIDING_WINDOW_SLOTS, type SlotCounts } from '../../src/store/sliding-window.js';

interface Arrival {
  /** ms after the previous arrival */
  gap: number;
  cost: number;
}

const limits = fc.record({ limit: fc.integer({ min: 1, max: 30 }), windowMs: fc.integer({ min: SLIDING_WINDOW_SLOTS, max: 120_000 }) });
const traffic = (windowMs: number) =>
  fc.array(fc.record({ gap: fc.integer({ min: 0, max: Math.ceil(windowMs / 4) }), cost: fc.integer({ min: 1, max: 4 }) }), { maxLength: 200 });
/** Start anywhere on the clock, so slot boundaries fall everywhere. */
const start = fc.integer({ min: 1_600_000_000_000, max: 1_900_000_000_000 });

/** Runs the arrivals; returns each with its time and the decision. */
function replay(startMs: number, arrivals: Arrival[], limit: number, windowMs: number) {
  const counts: SlotCounts = new Map();
  let now = startMs;
  return arrivals.map(({ gap, cost }) => {
    now += gap;
    const admission = admitSlidingWindow(counts, now, { cost, limit, windowMs });
    return { at: now, cost, ...admission, snapshot: new Map(counts) };
  });
}

const admittedWithin = (log: ReturnType<typeof replay>, from: number, to: number) =>
  log.filter((e) => e.admitted && e.at >= from && e.at <= to).reduce((sum, e) => sum + e.cost, 0);

describe('sliding window rate limit', () => {
  it('never admits more than `limit` uses in any closed interval of length `window`', () => {
    fc.assert(
      fc.property(limits.chain((l) => fc.tuple(fc.constant(l), start, traffic(l.windowMs))), ([{ limit, windowMs }, t0, arrivals]) => {
        const log = replay(t0, arrivals, limit, windowMs);
        // The busiest interval of length `window` ends at an admission.
        for (const e of log) if (e.admitted) expect(admittedWithin(log, e.at - windowMs, e.at)).toBeLessThanOrEqual(limit);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses only when `limit` uses leave no room within (1 + 1/slots) × window: the documented error bound', () => {
    fc.assert(
      fc.property(limits.chain((l) => fc.tuple(fc.constant(l), start, traffic(l.windowMs))), ([{ limit, windowMs }, t0, arrivals]) => {
        const log = replay(t0, arrivals, limit, windowMs);
        const span = windowMs + windowMs / SLIDING_WINDOW_SLOTS;
        for (const e of log) {
          if (e.admitted) continue;
          const before = log.filter((o) => o.at > e.at - span && o.at <= e.at && o !== e);
          const used = before.filter((o) => o.admitted).reduce((sum, o) => sum + o.cost, 0);
          expect(used + e.cost).toBeGreaterThan(limit);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('Retry-After: the refused request fits at now + retryAfterMs, and not a millisecond before', () => {
    fc.assert(
      fc.property(limits.chain((l) => fc.tuple(fc.constant(l), start, traffic(l.windowMs))), ([{ limit, windowMs }, t0, arrivals]) => {
        for (const e of replay(t0, arrivals, limit, windowMs)) {
          if (e.admitted) continue;
          const fitsAt = (t: number) => admitSlidingWindow(new Map(e.snapshot), t, { cost: e.cost, limit, windowMs }).admitted;
          if (e.cost > limit) {
            expect(fitsAt(e.at + e.retryAfterMs)).toBe(false);
            continue;
          }
          expect(e.retryAfterMs).toBeGreaterThan(0);
          expect(e.retryAfterMs).toBeLessThanOrEqual(windowMs + Math.ceil(windowMs / SLIDING_WINDOW_SLOTS));
          expect(fitsAt(e.at + e.retryAfterMs)).toBe(true);
          expect(fitsAt(e.at + e.retryAfterMs - 1)).toBe(false);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('a steady client within the error bound (10 per 1.1 s against 10 per 1 s) is never refused', () => {
    const counts: SlotCounts = new Map();
    let refused = 0;
    for (let i = 0; i < 100; i++) if (!admitSlidingWindow(counts, 1_700_000_000_000 + i * 110, { cost: 1, limit: 10, windowMs: 1_000 }).admitted) refused++;
    expect(refused).toBe(0);
  });

  it('a burst at a fixed-window boundary cannot pass twice the limit', () => {
    const counts: SlotCounts = new Map();
    const t0 = 1_700_000_059_999; // the last ms of a minute
    const burst = (at: number) => Array.from({ length: 10 }, () => admitSlidingWindow(counts, at, { cost: 1, limit: 10, windowMs: 60_000 }).admitted).filter(Boolean).length;
    expect(burst(t0)).toBe(10);
    expect(burst(t0 + 1)).toBe(0);
  });
});
