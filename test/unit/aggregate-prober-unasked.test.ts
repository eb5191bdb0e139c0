/**
 * Adversarial review of aggregated routes (DESIGN §8.2, upstream-prober.ts): the route's one
 * prober of an upstream asks for every session whose GET stream gave up, one waiting link a round.
 * A link whose own credential cannot be made (a user whose token exchange is refused, whose
 * upstream grant is gone) never opens its stream, so it parks even while the upstream is up, and
 * its probe sends nothing. Before this fix such a probe counted as "the upstream is silent": it
 * ended the round, so each such session of a user made every other session wait one more round
 * (30 s) for its stream after an outage, and it ended the waking of the others. Now it is
 * `unasked`: it goes last and the round goes on to the next link. Real UpstreamListeners (waits
 * shortened) and the real UpstreamProber, on fake timers; the hooks stand for the upstream.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AggregateUpstreamError } from '../../src/proxy/aggregate/captured-exchange.js';
import { callersOwnFailure } from '../../src/proxy/aggregate/caller-answer.js';
import { UpstreamListener, type ListenerStream } from '../../src/proxy/aggregate/upstream-listener.js';
import { UpstreamProber } from '../../src/proxy/aggregate/upstream-prober.js';

const PROBE_MS = 10_000;
const TIMINGS = { reopenFirstMs: 100, reopenMaxMs: 100, maxReopens: 1, stableMs: 1_000 };

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

/** A stream the upstream answered 200 and holds open. */
const openStream = (): ListenerStream => ({ started: Promise.resolve(200), ended: new Promise<void>(() => undefined), stop: () => undefined });

describe('a link that cannot ask never holds the probing of the others', () => {
  it('three sessions whose credential fails parked first, two healthy sessions after: the first round after the outage reopens both, and the waking goes past them', async () => {
    const prober = new UpstreamProber(() => undefined, { probeMs: PROBE_MS, wakeAtOnce: 1 }, () => 0.5);
    let upstreamUp = true;
    const connects = { healthy: 0 };
    const link = (connect: () => Promise<ListenerStream>) => {
      const listener: UpstreamListener = new UpstreamListener({ connect, rejoin: () => Promise.resolve(), gaveUp: () => prober.enlist(probeable) }, Date.now, TIMINGS);
      const probeable = { probe: () => listener.probe(1_000) };
      return listener;
    };
    // Mallory's three sessions: her credential throws before anything is sent, the upstream up or not.
    const broken = [1, 2, 3].map(() => link(() => Promise.reject(callersOwnFailure(new Error('exchange refused')))));
    for (const l of broken) void l.listen(1_000);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(prober.size).toBe(3);
    // The outage: two healthy sessions' streams cannot be opened, so they park after hers.
    upstreamUp = false;
    const healthyConnect = () => (connects.healthy++, upstreamUp ? Promise.resolve(openStream()) : Promise.reject(new AggregateUpstreamError('down')));
    const healthy = [link(healthyConnect), link(healthyConnect)];
    for (const l of healthy) void l.listen(1_000);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(prober.size).toBe(5);
    expect(healthy.every((l) => l.waiting)).toBe(true);
    // The upstream is back; one probe round (PROBE_MS, jitter drawn at its middle).
    upstreamUp = true;
    connects.healthy = 0;
    await vi.advanceTimersByTimeAsync(PROBE_MS + 100);
    // Both healthy streams are open again: the round went past her three, and so did the waking.
    expect(healthy.map((l) => l.waiting)).toEqual([false, false]);
    expect(connects.healthy).toBe(2);
    expect(broken.every((l) => l.waiting)).toBe(true);
    prober.close();
  });
});
