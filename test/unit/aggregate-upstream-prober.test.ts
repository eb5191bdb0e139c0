/**
 * The slow probing of one upstream of an aggregated route (proxy/aggregate/upstream-prober.ts), on
 * fake timers. A property over any number of waiting links, each scripted to find the upstream
 * silent, answering, or to have gone (closed, listening again), enlisting and withdrawing at any
 * time: never two probes in flight while probing, probes no closer than PROBE_MS × (1 −
 * PROBE_JITTER) however many links wait (not one per session), at most `wakeAtOnce` links woken at
 * once when one answers, and every link still waiting after an answer is woken unless a wake found
 * the upstream silent again. And with the parked GET stream of a real UpstreamListener behind it.
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PROBE_JITTER, UpstreamProber } from '../../src/proxy/aggregate/upstream-prober.js';
import { UpstreamListener, type ListenerStream, type ProbeOutcome } from '../../src/proxy/aggregate/upstream-listener.js';

const PROBE_MS = 10_000;
const TIMINGS = { probeMs: PROBE_MS, wakeAtOnce: 3 };
/** How long each probe takes (a request to the upstream), below the gap between probes. */
const PROBE_TAKES = 700;

beforeEach(() => void vi.useFakeTimers());
afterEach(() => void vi.useRealTimers());

interface Log {
  inFlight: number;
  maxInFlight: number;
  /** Start time of each probe, and whether it was a wake (after an answer) or the round's probe. */
  starts: { at: number; link: number }[];
}

/** A waiting link whose probes follow `outcomes` (then `silent` forever). */
function scripted(id: number, outcomes: ProbeOutcome[], log: Log) {
  let k = 0;
  return {
    id,
    probed: 0,
    probe(): Promise<ProbeOutcome> {
      const outcome = outcomes[k++] ?? 'silent';
      this.probed++;
      if (outcome === 'gone') return Promise.resolve('gone'); // nothing parked: no request made
      log.starts.push({ at: Date.now(), link: id });
      log.inFlight++;
      log.maxInFlight = Math.max(log.maxInFlight, log.inFlight);
      return new Promise((resolve) => setTimeout(() => (log.inFlight--, resolve(outcome)), PROBE_TAKES));
    },
  };
}

const outcome = fc.constantFrom<ProbeOutcome>('silent', 'silent', 'silent', 'answered', 'gone');

describe('one upstream probed for every waiting session', () => {
  it('property: one probe at a time while the upstream is silent, spaced by the jittered interval whatever the number of links; wakes bounded; withdrawn links never probed', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(outcome, { maxLength: 6 }), { minLength: 1, maxLength: 40 }),
        fc.array(fc.double({ min: 0, max: 0.999_999, noNaN: true }), { minLength: 1, maxLength: 20 }),
        fc.array(fc.nat({ max: 39 }), { maxLength: 5 }),
        async (scripts, draws, withdrawn) => {
          const log: Log = { inFlight: 0, maxInFlight: 0, starts: [] };
          let d = 0;
          let answers = 0;
          const prober = new UpstreamProber(() => void answers++, TIMINGS, () => draws[d++ % draws.length]!);
          const links = scripts.map((s, i) => scripted(i, s, log));
          for (const link of links) prober.enlist(link);
          const gone = new Set(withdrawn.filter((w) => w < links.length));
          for (const w of gone) prober.withdraw(links[w]!);
          await vi.advanceTimersByTimeAsync(12 * PROBE_MS);

          // Withdrawn links are never probed.
          for (const w of gone) expect(links[w]!.probed).toBe(0);
          // Never more than wakeAtOnce requests at once, and only one outside a wake.
          expect(log.maxInFlight).toBeLessThanOrEqual(TIMINGS.wakeAtOnce);
          if (answers === 0) expect(log.maxInFlight).toBeLessThanOrEqual(1);
          // Rounds: the bursts of requests, each burst a probe and the wake after it. Their starts are a jittered interval apart.
          const rounds: number[] = [];
          for (const s of log.starts) if (rounds.length === 0 || s.at - rounds.at(-1)! >= PROBE_MS * (1 - PROBE_JITTER)) rounds.push(s.at);
          for (const [k, at] of rounds.entries()) if (k > 0) expect(at - rounds[k - 1]!).toBeGreaterThanOrEqual(PROBE_MS * (1 - PROBE_JITTER));
          // Bounded rate: while nothing answers, one request per round, never one per link.
          if (answers === 0) expect(log.starts.length).toBe(rounds.length);
          expect(rounds.length).toBeLessThanOrEqual(Math.floor((12 * PROBE_MS) / (PROBE_MS * (1 - PROBE_JITTER))));
          // Closed: a probe under way ends, and nothing is scheduled after it.
          prober.close();
          await vi.advanceTimersByTimeAsync(PROBE_TAKES);
          expect(vi.getTimerCount()).toBe(0);
        },
      ),
      { numRuns: 80 },
    );
  });

  it('1,000 links waiting on a silent upstream: one request per interval, from the oldest link, the silent one sent last', async () => {
    const log: Log = { inFlight: 0, maxInFlight: 0, starts: [] };
    const prober = new UpstreamProber(undefined, TIMINGS, () => 0.5);
    const links = Array.from({ length: 1_000 }, (_, i) => scripted(i, [], log));
    for (const link of links) prober.enlist(link);
    await vi.advanceTimersByTimeAsync(5 * (PROBE_MS + PROBE_TAKES)); // each wait starts once the probe before it is over
    expect(log.starts.map((s) => s.link)).toEqual([0, 1, 2, 3, 4]);
    expect(log.maxInFlight).toBe(1);
    prober.close();
  });

  it('when one answers, every waiting link is woken, wakeAtOnce at a time; a link silent again ends the waking, the rest wait for the next probe', async () => {
    const log: Log = { inFlight: 0, maxInFlight: 0, starts: [] };
    let answers = 0;
    const prober = new UpstreamProber(() => void answers++, TIMINGS, () => 0.5);
    const links = Array.from({ length: 10 }, (_, i) => scripted(i, i === 5 ? ['silent', 'answered'] : ['answered'], log));
    for (const link of links) prober.enlist(link);
    await vi.advanceTimersByTimeAsync(PROBE_MS + 10 * PROBE_TAKES);
    expect(answers).toBe(1);
    expect(log.maxInFlight).toBe(TIMINGS.wakeAtOnce);
    // Link 0 answered; 1..5 woken (5 silent: the waking stops once the workers under way finish).
    expect(links[0]!.probed).toBe(1);
    expect(links[5]!.probed).toBe(1);
    expect(links[9]!.probed).toBe(0);
    expect(prober.size).toBeGreaterThan(0);
    await vi.advanceTimersByTimeAsync(PROBE_MS + 10 * PROBE_TAKES);
    expect(prober.size).toBe(0);
    for (const link of links) expect(link.probed).toBeGreaterThanOrEqual(1);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("with a real listener: a parked GET stream is probed by the prober, not by itself; its upstream's 404 joins it afresh", async () => {
    const statuses = [200, 500, 500, 500, 404];
    const seen: string[] = [];
    let rejoined = 0;
    const prober = new UpstreamProber(undefined, TIMINGS, () => 0.5);
    const listener: UpstreamListener = new UpstreamListener(
      {
        connect: () => {
          const status = statuses.shift() ?? 502;
          seen.push(`GET ${status}`);
          return Promise.resolve<ListenerStream>({ started: Promise.resolve(status), ended: Promise.resolve(), stop: () => undefined });
        },
        rejoin: () => (rejoined++, seen.push('rejoin'), Promise.resolve()),
        gaveUp: () => prober.enlist(target),
      },
      Date.now,
      { reopenFirstMs: 100, reopenMaxMs: 200, maxReopens: 2, stableMs: 5_000 },
    );
    const target = { probe: () => listener.probe(1_000) };
    await listener.listen(1_000);
    await vi.advanceTimersByTimeAsync(1_000);
    // Opened (200, ended at once), reopened twice (500, 500): parked.
    expect(seen).toEqual(['GET 200', 'GET 500', 'GET 500']);
    expect(listener.waiting).toBe(true);
    await vi.advanceTimersByTimeAsync(PROBE_MS);
    expect(seen).toEqual(['GET 200', 'GET 500', 'GET 500', 'GET 500']);
    await vi.advanceTimersByTimeAsync(PROBE_MS);
    // The session was forgotten (404 where the stream opened before): the probe joins it afresh.
    expect(seen.slice(4)).toEqual(['GET 404', 'rejoin']);
    expect(rejoined).toBe(1);
    expect(prober.size).toBe(0);
    listener.close();
    prober.close();
  });
});
