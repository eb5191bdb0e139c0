/**
 * A `subscriptions/listen` of the gateway's at an upstream of 2026-07-28, held while the client's
 * listen lasts (proxy/aggregate/reopened-listen.ts): a listen that ends is opened again after a
 * wait that doubles, at most MAX_REOPENS times in a row without one that lasted STABLE_MS,
 * whatever the upstream answers (a property over sequences of endings, failed openings and
 * refusals, on fake timers: the count of openings and the waits between them, never a spin); a
 * refusal ends it; `reopened` is told of each reopened listen that was acknowledged; stop() ends
 * everything to come.
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { reopenedListen } from '../../src/proxy/aggregate/reopened-listen.js';
import type { UpstreamListen } from '../../src/proxy/aggregate/upstream-listen.js';
import { LISTENER_TIMINGS, MAX_REOPENS, REOPEN_FIRST_MS, REOPEN_MAX_MS, STABLE_MS } from '../../src/proxy/aggregate/upstream-listener.js';

/** How one opening turns out: a listen answered `status` (acknowledged or not) that ends after `lasts` ms, or an opening that fails. */
type Outcome = { kind: 'listen'; status: number; acknowledged: boolean; lasts: number } | { kind: 'fails' };

function harness(outcomes: () => Outcome) {
  const opened: number[] = [];
  let reopened = 0;
  const open = (): Promise<UpstreamListen> => {
    opened.push(Date.now());
    const outcome = outcomes();
    if (outcome.kind === 'fails') return Promise.reject(new Error('unreachable'));
    let stop!: () => void;
    const ended = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, outcome.lasts);
      stop = () => (clearTimeout(timer), resolve());
    });
    return Promise.resolve({ ready: Promise.resolve(outcome.acknowledged), status: Promise.resolve(outcome.status), ended, stop });
  };
  return { open, opened, reopened: () => reopened, start: () => reopenedListen(open, LISTENER_TIMINGS, () => void reopened++) };
}

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

const unstable: fc.Arbitrary<Outcome> = fc.oneof(
  fc.record({ kind: fc.constant('listen' as const), status: fc.constantFrom(200, 408, 429, 500, 502), acknowledged: fc.boolean(), lasts: fc.integer({ min: 0, max: STABLE_MS - 1 }) }),
  fc.constant({ kind: 'fails' as const }),
);

describe('an upstream listen that keeps ending', () => {
  it(`property: at most ${MAX_REOPENS} reopenings in a row, each wait at least the first (${REOPEN_FIRST_MS} ms) and growing to ${REOPEN_MAX_MS} ms; then it is given up, with nothing left pending`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.record({ first: fc.integer({ min: 0, max: STABLE_MS - 1 }), rest: fc.array(unstable, { minLength: 1, maxLength: 30 }) }), async ({ first, rest }) => {
        let i = -1;
        const h = harness(() => (++i === 0 ? { kind: 'listen', status: 200, acknowledged: true, lasts: first } : rest[(i - 1) % rest.length]!));
        const listen = await h.start();
        let over = false;
        void listen.ended.then(() => (over = true));
        await vi.advanceTimersByTimeAsync(40 * REOPEN_MAX_MS + 2 * STABLE_MS);
        expect(h.opened.length).toBe(1 + MAX_REOPENS);
        expect(over).toBe(true);
        expect(vi.getTimerCount()).toBe(0);
        const gaps = h.opened.slice(1).map((at, k) => at - h.opened[k]!);
        for (const [k, gap] of gaps.entries()) expect(gap).toBeGreaterThanOrEqual(Math.min(REOPEN_MAX_MS, REOPEN_FIRST_MS * 2 ** k));
        // Told once per reopened listen that was acknowledged, never for the first one.
        const acknowledged = rest.slice(0, MAX_REOPENS).filter((o, k) => k < MAX_REOPENS && o.kind === 'listen' && o.acknowledged);
        expect(h.reopened()).toBeLessThanOrEqual(MAX_REOPENS);
        if (rest.length >= MAX_REOPENS) expect(h.reopened()).toBe(acknowledged.length);
      }),
      { numRuns: 60 },
    );
  });

  it('a listen that lasted STABLE_MS starts the count again: one that ends every 40 s is reopened for as long as the client listens', async () => {
    const h = harness(() => ({ kind: 'listen', status: 200, acknowledged: true, lasts: STABLE_MS + 10_000 }));
    const listen = await h.start();
    await vi.advanceTimersByTimeAsync(40 * (STABLE_MS + 10_000 + REOPEN_FIRST_MS));
    expect(h.opened.length).toBeGreaterThan(2 * MAX_REOPENS);
    expect(h.reopened()).toBe(h.opened.length - 1);
    listen.stop();
    await vi.advanceTimersByTimeAsync(10 * REOPEN_MAX_MS);
    expect(vi.getTimerCount()).toBe(0);
  });

  it.each([404, 400, 401, 403])('a refusal (%i) is not asked again', async (status) => {
    let i = 0;
    const h = harness(() => (i++ === 0 ? { kind: 'listen', status: 200, acknowledged: true, lasts: 10 } : { kind: 'listen', status, acknowledged: false, lasts: 0 }));
    const listen = await h.start();
    let over = false;
    void listen.ended.then(() => (over = true));
    await vi.advanceTimersByTimeAsync(20 * REOPEN_MAX_MS);
    expect(h.opened).toHaveLength(2);
    expect(over).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('stop() during a wait, or with a listen open: nothing is opened again', async () => {
    for (const lasts of [0, 10 * STABLE_MS]) {
      const h = harness(() => ({ kind: 'listen', status: 200, acknowledged: true, lasts }));
      const listen = await h.start();
      await vi.advanceTimersByTimeAsync(1);
      listen.stop();
      await vi.advanceTimersByTimeAsync(20 * REOPEN_MAX_MS);
      expect(h.opened).toHaveLength(1);
      expect(vi.getTimerCount()).toBe(0);
    }
  });

  it("the first opening's failure is the caller's: nothing is held", async () => {
    const h = harness(() => ({ kind: 'fails' }));
    await expect(h.start()).rejects.toThrow('unreachable');
    await vi.advanceTimersByTimeAsync(20 * REOPEN_MAX_MS);
    expect(h.opened).toHaveLength(1);
  });
});
