// The benchmark's user_oauth phase (issue 21, issue 23's goal): CPU per request of the
// user_oauth route divided by the static route's in the same round, then the spread; the goal
// row is met exactly when the median is within 1.05 and no request failed, and not claimed
// without figures.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RoundSample } from '../../bench/lib/interleave.js';
import { checkGoals } from '../../bench/lib/report.js';
import type { BenchResults } from '../../bench/lib/results.js';
import { spread } from '../../bench/lib/stats.js';
import { USER_OAUTH_CPU_GOAL, userOAuthGoal, userOAuthSummary } from '../../bench/lib/user-oauth-summary.js';

const sample = (cpu: number | undefined, failed = 0): RoundSample =>
  ({ requestsPerSec: 1000, targetCpuUsPerRequest: cpu, non2xx: failed, errors: 0, timeouts: 0, round: 1 }) as unknown as RoundSample;

const cpuList = (rounds: number) => fc.array(fc.double({ min: 1, max: 2000, noNaN: true }), { minLength: rounds, maxLength: rounds });

describe('user_oauth ÷ static, CPU per request (issue 23)', () => {
  it('is the per-round ratio, its spread; the goal is met exactly at a median ≤ 1.05 with no failed request', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 7 }).chain((rounds) => fc.tuple(cpuList(rounds), cpuList(rounds), fc.nat(3))),
        ([own, shared, failed]) => {
          const samples = new Map([
            ['static', shared.map((cpu) => sample(cpu))],
            ['user_oauth', own.map((cpu, i) => sample(cpu, i === 0 ? failed : 0))],
          ]);
          const summary = userOAuthSummary(samples);
          const expected = spread(own.map((o, i) => o / shared[i]!));
          expect(summary.cpuRatio).toEqual(expected);
          expect(summary.cpuUsPerRequest).toEqual({ static: shared, user_oauth: own });
          expect(summary.failures).toBe(failed);
          const [goal] = checkGoals({ settings: { alg: 'ES256' }, userOAuth: summary, goals: [] } as unknown as BenchResults);
          expect(goal).toEqual(userOAuthGoal(summary));
          expect(goal!.met).toBe(expected.median <= USER_OAUTH_CPU_GOAL && failed === 0);
        },
      ),
    );
  });

  it('is not claimed without CPU figures, nor without the phase; rounds must pair up', () => {
    const noCpu = userOAuthSummary(new Map([['static', [sample(undefined)]], ['user_oauth', [sample(undefined)]]]));
    expect(userOAuthGoal(noCpu).met).toBeNull();
    expect(userOAuthGoal(undefined).met).toBeNull();
    expect(checkGoals({ settings: { alg: 'ES256' }, goals: [] } as unknown as BenchResults).some((g) => g.goal.startsWith('user_oauth'))).toBe(false);
    expect(() => userOAuthSummary(new Map([['static', [sample(1), sample(2)]], ['user_oauth', [sample(1)]]]))).toThrow(/same rounds/);
  });
});
