/**
 * An upstream session's GET stream kept open (proxy/aggregate/upstream-listener.ts): a stream that
 * ends is opened again after a wait that doubles, at most MAX_REOPENS times in a row without one
 * that lasted STABLE_MS, whatever the upstream answers (a property over sequences of endings,
 * errors, 404s and failed rejoins, on fake timers: the count of attempts and the waits between
 * them, never a spin); 405 ends it; a stream that lasted restarts the count; close() ends
 * everything to come.
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MAX_REOPENS, REOPEN_FIRST_MS, REOPEN_MAX_MS, STABLE_MS, UpstreamListener, type ListenerStream } from '../../src/proxy/aggregate/upstream-listener.js';

/** How one attempt turns out: a stream with this status that ends after `lasts` ms, a failed connection, or (404) a rejoin that fails or succeeds. */
type Outcome = { kind: 'stream'; status: number; lasts: number } | { kind: 'refused' } | { kind: 'forgotten'; rejoins: boolean };

function harness(outcomes: () => Outcome) {
  const attempts: { at: number; what: 'connect' | 'rejoin' }[] = [];
  let gaveUp = 0;
  let pending: Outcome | undefined;
  const listener: UpstreamListener = new UpstreamListener({
    connect: () => {
      attempts.push({ at: Date.now(), what: 'connect' });
      const outcome = outcomes();
      if (outcome.kind === 'refused') return Promise.reject(new Error('refused'));
      pending = outcome;
      const status = outcome.kind === 'stream' ? outcome.status : 404;
      const lasts = outcome.kind === 'stream' ? outcome.lasts : 0;
      let stop!: () => void;
      const ended = new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, lasts);
        stop = () => (clearTimeout(timer), resolve());
      });
      return Promise.resolve<ListenerStream>({ started: Promise.resolve(status), ended, stop });
    },
    rejoin: async () => {
      attempts.push({ at: Date.now(), what: 'rejoin' });
      // A rejoin opens a new session, whose opening listens again (as the link's handshake does).
      if (pending?.kind === 'forgotten' && !pending.rejoins) throw new Error('initialize failed');
      await listener.listen(1_000);
    },
    gaveUp: () => void gaveUp++,
  });
  return { listener, attempts, gaveUp: () => gaveUp };
}

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

const unstable: fc.Arbitrary<Outcome> = fc.oneof(
  fc.record({ kind: fc.constant('stream' as const), status: fc.constantFrom(200, 409, 429, 500, 502, 503), lasts: fc.integer({ min: 0, max: STABLE_MS - 1 }) }),
  fc.constant({ kind: 'refused' as const }),
  fc.record({ kind: fc.constant('forgotten' as const), rejoins: fc.boolean() }),
);

describe('an upstream GET stream that keeps ending', () => {
  it(`property: at most ${MAX_REOPENS} reopenings in a row, each wait at least double the one before (from ${REOPEN_FIRST_MS} ms, up to ${REOPEN_MAX_MS} ms); then it gives up, once, with nothing left pending`, async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(unstable, { minLength: 1, maxLength: 40 }), async (script) => {
        let i = 0;
        const h = harness(() => script[i++ % script.length]!);
        await h.listener.listen(1_000);
        await vi.advanceTimersByTimeAsync(40 * REOPEN_MAX_MS + 2 * STABLE_MS);
        // The first opening, then MAX_REOPENS more attempts (connects and rejoins alike), never more.
        expect(h.attempts.length).toBeLessThanOrEqual(1 + MAX_REOPENS * 2);
        const starts = h.attempts.filter((a, k) => k === 0 || a.what === 'rejoin' || h.attempts[k - 1]!.what !== 'rejoin');
        expect(starts.length).toBeLessThanOrEqual(1 + MAX_REOPENS);
        expect(h.gaveUp()).toBe(1);
        expect(vi.getTimerCount()).toBe(0);
        // No spin: the waits between attempts the listener scheduled grow.
        const gaps = starts.slice(1).map((a, k) => a.at - starts[k]!.at);
        for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(REOPEN_FIRST_MS);
        h.listener.close();
      }),
      { numRuns: 60 },
    );
  });

  it('a stream that lasted STABLE_MS starts the count again: a server whose stream ends every 40 s is reopened for as long as the session lasts', async () => {
    const h = harness(() => ({ kind: 'stream', status: 200, lasts: STABLE_MS + 10_000 }));
    await h.listener.listen(1_000);
    await vi.advanceTimersByTimeAsync(40 * (STABLE_MS + 10_000 + REOPEN_FIRST_MS));
    expect(h.attempts.length).toBeGreaterThan(MAX_REOPENS * 2);
    expect(h.gaveUp()).toBe(0);
    // Each reopening came after the first wait, never sooner.
    for (const [k, a] of h.attempts.slice(1).entries()) expect(a.at - h.attempts[k]!.at).toBeGreaterThanOrEqual(STABLE_MS + 10_000 + REOPEN_FIRST_MS);
    h.listener.close();
    expect(vi.getTimerCount()).toBe(0);
  });

  it.each([405, 403, 400])('an answer %i (no such stream, or refused) ends it: no reopening, no giving up to log', async (status) => {
    const h = harness(() => ({ kind: 'stream', status, lasts: 0 }));
    await h.listener.listen(1_000);
    await vi.advanceTimersByTimeAsync(10 * REOPEN_MAX_MS);
    expect(h.attempts).toHaveLength(1);
    expect(h.gaveUp()).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a 400 where the stream opened before says the session is forgotten (servers that answer an unknown session id so): joined afresh', async () => {
    const script: Outcome[] = [{ kind: 'stream', status: 200, lasts: 1_000 }, { kind: 'stream', status: 400, lasts: 0 }, { kind: 'stream', status: 200, lasts: 10 * STABLE_MS }];
    let i = 0;
    const h = harness(() => script[Math.min(i++, script.length - 1)]!);
    await h.listener.listen(1_000);
    await vi.advanceTimersByTimeAsync(5 * REOPEN_FIRST_MS + 1_000);
    expect(h.attempts.map((a) => a.what)).toEqual(['connect', 'connect', 'rejoin', 'connect']);
    h.listener.close();
  });

  it('close() during a wait, or with a stream open: nothing is opened again', async () => {
    for (const lasts of [0, 10 * STABLE_MS]) {
      const h = harness(() => ({ kind: 'stream', status: 200, lasts }));
      await h.listener.listen(1_000);
      h.listener.close();
      await vi.advanceTimersByTimeAsync(20 * REOPEN_MAX_MS);
      expect(h.attempts).toHaveLength(1);
      expect(vi.getTimerCount()).toBe(0);
      // listen() after close() opens nothing (the link's session is over).
      await h.listener.listen(1_000);
      expect(h.attempts).toHaveLength(1);
    }
  });

  it('a session opened afresh (listen again) replaces the old stream: its ending is not counted, the new one is kept', async () => {
    const h = harness(() => ({ kind: 'stream', status: 200, lasts: 10 * STABLE_MS }));
    await h.listener.listen(1_000);
    await h.listener.listen(1_000);
    await vi.advanceTimersByTimeAsync(REOPEN_MAX_MS);
    expect(h.attempts).toHaveLength(2);
    h.listener.close();
  });
});
