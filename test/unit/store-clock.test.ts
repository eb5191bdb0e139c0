// store/store-clock.ts: a replica's reading of the store's clock (K85). Offsets are corrected
// whatever their size; one past the allowed skew is said once per spell (a warn with both clocks
// and the setting, the gauge at 1), a failed or slow reading keeps the last one (or the replica's
// own clock) and is said once; between readings the monotonic clock advances it, so a step of the
// wall clock changes nothing.
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { StoreClock } from '../../src/store/store-clock.js';

function harness(allowedSkewMs = 30_000) {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger('info', new Writable({ write: (chunk, _e, cb) => (lines.push(JSON.parse(String(chunk)) as Record<string, unknown>), cb()) }));
  const metrics = new Metrics({ defaultMetrics: false });
  const sim = { store: 1_900_000_000_000, wallOffset: 0, rtt: 5, fail: false };
  const clock = new StoreClock({
    allowedSkewMs,
    logger,
    metrics,
    wallNow: () => sim.store + sim.wallOffset,
    monotonicNow: () => sim.store,
    readStoreTime: async () => {
      if (sim.fail) throw new Error('redis TIME failed: not connected');
      sim.store += sim.rtt;
      return sim.store - sim.rtt / 2;
    },
  });
  const gauge = async (name: string) => Number(/ (-?[0-9.e+-]+)\s*$/.exec(await metrics.registry.getSingleMetricAsString(name))?.[1]);
  return { lines, clock, sim, gauge, warnings: () => lines.filter((l) => l.level === 40) };
}

describe('[K85] StoreClock', () => {
  it('judges by the store\'s clock at any offset (fast-check), and says so once when past the setting', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: -3_600_000, max: 3_600_000 }), fc.integer({ min: 1000, max: 300_000 }), async (offset, skew) => {
        const h = harness(skew);
        h.sim.wallOffset = offset;
        await h.clock.sample();
        await h.clock.sample();
        expect(Math.abs(h.clock.nowMs() - h.sim.store)).toBeLessThanOrEqual(h.sim.rtt);
        expect(Math.abs((await h.gauge('mag_store_clock_offset_seconds')) + offset / 1000)).toBeLessThan(0.01);
        const past = Math.abs(offset) > skew + h.sim.rtt;
        if (past) {
          expect(await h.gauge('mag_store_clock_skew_exceeded')).toBe(1);
          expect(h.warnings()).toHaveLength(1);
          expect(h.warnings()[0]).toMatchObject({ max_clock_skew_ms: skew });
          expect(Date.parse(h.warnings()[0]!.store_clock as string) - Date.parse(h.warnings()[0]!.replica_clock as string)).toBeCloseTo(-offset, -2);
        } else if (Math.abs(offset) < skew - h.sim.rtt) {
          expect(await h.gauge('mag_store_clock_skew_exceeded')).toBe(0);
          expect(h.warnings()).toHaveLength(0);
        }
      }),
      { numRuns: 100 },
    );
  });

  it('back within the setting: an info line and the gauge at 0; past it again: said again', async () => {
    const h = harness();
    h.sim.wallOffset = 60_000;
    await h.clock.sample();
    h.sim.wallOffset = 1000;
    await h.clock.sample();
    expect(await h.gauge('mag_store_clock_skew_exceeded')).toBe(0);
    expect(h.lines.some((l) => l.level === 30 && /back within/.test(String(l.msg)))).toBe(true);
    h.sim.wallOffset = -60_000;
    await h.clock.sample();
    expect(h.warnings()).toHaveLength(2);
  });

  it('a step of the wall clock between readings changes nothing; the next reading measures it', async () => {
    const h = harness();
    await h.clock.sample();
    const before = h.clock.nowMs();
    h.sim.wallOffset = -120_000;
    h.sim.store += 1000;
    expect(h.clock.nowMs() - before).toBe(1000);
    await h.clock.sample();
    expect(await h.gauge('mag_store_clock_offset_seconds')).toBeCloseTo(120, 1);
  });

  it('never read: the replica\'s own clock; a failed reading keeps the last one, said once per spell; a reading slower than the setting is not used', async () => {
    const h = harness(1000);
    h.sim.wallOffset = 5000;
    h.sim.fail = true;
    await h.clock.sample();
    await h.clock.sample();
    expect(h.clock.nowMs()).toBe(h.sim.store + 5000);
    expect(h.warnings()).toHaveLength(1);
    expect(String(h.warnings()[0]!.msg)).toMatch(/this replica's own clock/);
    h.sim.fail = false;
    await h.clock.sample();
    expect(Math.abs(h.clock.nowMs() - h.sim.store)).toBeLessThanOrEqual(h.sim.rtt);
    h.sim.rtt = 1500;
    h.sim.wallOffset = 0;
    const anchored = h.clock.nowMs() - h.sim.store;
    await h.clock.sample();
    expect(String(h.warnings().at(-1)!.msg)).toMatch(/took 1500 ms/);
    expect(h.clock.nowMs() - h.sim.store).toBe(anchored);
  });

  it('without a shared store (memory): the replica\'s own clock, no reading, nothing said', async () => {
    let wall = 42_000;
    const clock = new StoreClock({ allowedSkewMs: 30_000, logger: createLogger('silent'), wallNow: () => wall });
    await clock.start();
    expect(clock.nowSeconds()).toBe(42);
    wall = 99_999;
    expect(clock.nowMs()).toBe(99_999);
    clock.stop();
  });
});
