// Issue 23's figures in the benchmark's report: CPU per request as a ratio to
// the proxy core measured in the same round (per round, then the median), the
// goal on it, and the stdio and SSE-upstream phases' p50 overheads read back
// from the scripts' own reports, as they print them.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { throughputRatios, type BenchResults, type TargetName } from '../../bench/lib/results.js';
import type { RoundSample } from '../../bench/lib/interleave.js';
import { checkGoals } from '../../bench/lib/report.js';
import { overheads } from '../../bench/lib/route-phases.js';
import { spread } from '../../bench/lib/stats.js';

const sample = (cpu: number): RoundSample =>
  ({ requestsPerSec: 1000, targetCpuUsPerRequest: cpu, round: 1 }) as unknown as RoundSample;

const cpuList = (rounds: number) => fc.array(fc.double({ min: 1, max: 2000, noNaN: true }), { minLength: rounds, maxLength: rounds });

describe('CPU per request against the proxy core (issue 23)', () => {
  it('is the per-round ratio of the two targets, then its spread, and the goal is met exactly at ≤ 1.2', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 7 }).chain((rounds) => fc.tuple(cpuList(rounds), cpuList(rounds), cpuList(rounds))),
        ([gateway, authOff, core]) => {
          const samples = new Map<TargetName, RoundSample[]>([
            ['gateway', gateway.map(sample)],
            ['gateway-auth-off', authOff.map(sample)],
            ['proxy-core', core.map(sample)],
          ]);
          const ratios = throughputRatios(samples);
          const expected = spread(gateway.map((g, i) => g / core[i]!));
          expect(ratios['CPU gateway / proxy-core']).toEqual(expected);
          expect(ratios['CPU gateway-auth-off / proxy-core']).toEqual(spread(authOff.map((g, i) => g / core[i]!)));
          const results = { settings: { alg: 'ES256' }, throughput: { shapes: { a: { ratios, targets: {} }, b16: { ratios, targets: {} } } }, goals: [] } as unknown as BenchResults;
          const goals = checkGoals(results).filter((g) => g.goal.includes('its proxy core'));
          expect(goals).toHaveLength(2);
          for (const goal of goals) expect(goal.met).toBe(expected.median <= 1.2);
        },
      ),
    );
  });

  it('is not claimed without the proxy core in the run', () => {
    const ratios = throughputRatios(new Map<TargetName, RoundSample[]>([['gateway', [sample(90)]]]));
    expect(ratios['CPU gateway / proxy-core']).toBeUndefined();
    const results = { settings: { alg: 'ES256' }, throughput: { shapes: { b16: { ratios, targets: {} } } }, goals: [] } as unknown as BenchResults;
    for (const goal of checkGoals(results).filter((g) => g.goal.includes('its proxy core'))) expect(goal.met).toBeNull();
  });
});

// What bench/stdio-route.ts and bench/sse-route.ts print, section by section.
const label = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9 ,]{0,30}$/);
const target = fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/);
const ms = fc.double({ min: -50, max: 500, noNaN: true }).map((v) => Math.round(v * 100) / 100);

describe('the route phases read their scripts\' overheads back', () => {
  it('every "<target> overhead p50" of every stdio section, keyed by section and target', () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.tuple(label, fc.uniqueArray(fc.tuple(target, ms), { selector: ([t]) => t, minLength: 1, maxLength: 3 })), { selector: ([l]) => l.trim(), minLength: 1, maxLength: 4 }), (sections) => {
        const output = [
          'load average at start: 1.00 1.00 1.00; sandbox target: no',
          ...sections.flatMap(([section, targets]) => [
            '',
            `${section}: tools/call search_nodes, 3 interleaved rounds, 200 calls per round per target`,
            '  target      p50 ms   p99 ms   calls/s   gateway CPU µs/call   children CPU µs/call',
            '  direct       0.42     5.59      1443                     -                    344',
            ...targets.map(([name, value]) => `  ${name} overhead p50 ${value.toFixed(2)} ms`),
          ]),
        ].join('\n');
        const expected = Object.fromEntries(sections.flatMap(([section, targets]) => targets.map(([name, value]) => [`${section} / ${name}`, Number(value.toFixed(2))])));
        expect(overheads(output)).toEqual(expected);
      }),
    );
  });

  it('the SSE script\'s one overhead line, keyed by its section', () => {
    fc.assert(
      fc.property(ms, (value) => {
        const output = [
          'gateway: the build (dist/)',
          'tools/call echo, 3 x 200 sequential calls each way (interleaved rounds):',
          '  direct   p50 2.44 ms  p99 20.25 ms',
          '  gateway  p50 3.06 ms  p99 35.95 ms',
          `  overhead p50 ${value.toFixed(2)} ms`,
          'session open (connect: initialize + initialized), 3 each way:',
          '  direct   p50 155.41 ms',
        ].join('\n');
        expect(overheads(output)).toEqual({ 'tools/call echo, 3 x 200 sequential calls each way (interleaved rounds)': Number(value.toFixed(2)) });
      }),
    );
  });
});
