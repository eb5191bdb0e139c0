// The benchmark's aggregate phase (issue 22, issue 23's goal): per round, the upstream slowest
// alone is the one with the highest p50, and the merged list's cost is its p50 minus that one's;
// the goal row is met exactly when the median of those differences is within 2 ms and no request
// failed, and not claimed without the phase.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { AGGREGATE_GOAL_MS, aggregateGoal, aggregateSummary, type AggregateRound } from '../../bench/lib/aggregate-summary.js';
import { checkGoals } from '../../bench/lib/report.js';
import type { BenchResults } from '../../bench/lib/results.js';
import { spread } from '../../bench/lib/stats.js';

const ms = fc.double({ min: 0.05, max: 500, noNaN: true });
const round = fc.record({ merged: ms, alone: fc.record({ everything: ms, memory: ms, files: ms }), failures: fc.constantFrom(0, 0, 0, 1) });

describe('merged tools/list − the slowest alone (issue 23)', () => {
  it('takes the slowest alone per round, the difference per round, its spread; the goal is met exactly at a median ≤ 2 ms with no failure', () => {
    fc.assert(
      fc.property(fc.array(round, { minLength: 1, maxLength: 7 }), (rounds: AggregateRound[]) => {
        const summary = aggregateSummary(rounds);
        const slowest = rounds.map((r) => Math.max(...Object.values(r.alone)));
        expect(summary.slowest.map((name, i) => rounds[i]!.alone[name])).toEqual(slowest);
        expect(summary.overheadMs).toEqual(spread(rounds.map((r, i) => r.merged - slowest[i]!)));
        const failures = rounds.reduce((n, r) => n + r.failures, 0);
        expect(summary.failures).toBe(failures);
        const [goal] = checkGoals({ settings: { alg: 'ES256' }, aggregate: summary, goals: [] } as unknown as BenchResults);
        expect(goal).toEqual(aggregateGoal(summary));
        expect(goal!.met).toBe(summary.overheadMs.median <= AGGREGATE_GOAL_MS && failures === 0);
      }),
    );
  });

  it('a worked round: 12.4 ms merged, 11.1 ms the slowest (memory) alone: 1.3 ms, met', () => {
    const summary = aggregateSummary([{ merged: 12.4, alone: { everything: 3.2, memory: 11.1, files: 9.7 }, failures: 0 }]);
    expect(summary.slowest).toEqual(['memory']);
    expect(summary.overheadMs.median).toBeCloseTo(1.3, 10);
    expect(aggregateGoal(summary)).toMatchObject({ measured: '1.30 ms (1.30–1.30)', met: true });
  });

  it('is not claimed without the phase; a round without the upstreams alone is refused', () => {
    expect(aggregateGoal(undefined).met).toBeNull();
    expect(checkGoals({ settings: { alg: 'ES256' }, goals: [] } as unknown as BenchResults).some((g) => g.goal.startsWith('merged tools/list'))).toBe(false);
    expect(() => aggregateSummary([])).toThrow(/every round/);
    expect(() => aggregateSummary([{ merged: 1, alone: {}, failures: 0 }])).toThrow(/every round/);
  });
});
