// What the `user_oauth` phase reports (bench/lib/user-oauth-phase.ts): CPU per
// request of the user_oauth route and the static route, the per-round ratio,
// and issue 23's goal on it. Pure, apart from the phase's processes.
import type { Goal } from './results.js';
import type { RoundSample } from './interleave.js';
import { ratioSpread, type Spread } from './stats.js';

/** Issue 23: a user_oauth request costs at most this much more CPU than a static one. */
export const USER_OAUTH_CPU_GOAL = 1.05;

export interface UserOAuthPhaseResult {
  /** CPU µs per request of each route, per round. */
  cpuUsPerRequest: { static: number[]; user_oauth: number[] };
  /** user_oauth ÷ static, per round. */
  cpuRatio: Spread;
  /** non-2xx answers, errors and timeouts of both routes. */
  failures: number;
}

/** The samples of the two targets `static` and `user_oauth`, measured in the same rounds. */
export function userOAuthSummary(samples: ReadonlyMap<string, readonly RoundSample[]>): UserOAuthPhaseResult {
  const cpu = (name: string) => (samples.get(name) ?? []).map((s) => s.targetCpuUsPerRequest ?? NaN);
  const [own, shared] = [cpu('user_oauth'), cpu('static')];
  if (own.length === 0 || own.length !== shared.length) throw new Error('user_oauth phase: both routes need the same rounds');
  const failures = [...samples.values()].flat().reduce((n, s) => n + s.non2xx + s.errors + s.timeouts, 0);
  return { cpuUsPerRequest: { static: shared, user_oauth: own }, cpuRatio: ratioSpread(own, shared), failures };
}

/** The goal row: met when the median per-round ratio is within the goal and no request failed. */
export function userOAuthGoal(result: UserOAuthPhaseResult | undefined): Goal {
  const goal = `user_oauth request ÷ static request, CPU ≤ ${USER_OAUTH_CPU_GOAL}`;
  if (!result) return { goal, measured: 'not measured', met: null };
  const { median, min, max } = result.cpuRatio;
  if (!Number.isFinite(median)) return { goal, measured: 'no CPU figure (no /proc?)', met: null };
  const failed = result.failures > 0 ? `; ${result.failures} failed requests` : '';
  return { goal, measured: `${median.toFixed(3)}× (${min.toFixed(3)}–${max.toFixed(3)})${failed}`, met: median <= USER_OAUTH_CPU_GOAL && result.failures === 0 };
}
