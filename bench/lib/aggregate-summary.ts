// What the `aggregate` phase reports (bench/lib/aggregate-phase.ts): tools/list
// p50 of an aggregated route of three upstreams and of each upstream alone on a
// route of its own, per round; the merged list's cost over the slowest alone,
// round by round, and issue 23's goal on it. Pure, apart from the phase's processes.
import type { Goal } from './results.js';
import { spread, type Spread } from './stats.js';

/** Issue 23: a merged tools/list of three upstreams takes at most this much longer (ms, p50) than the slowest upstream alone. */
export const AGGREGATE_GOAL_MS = 2;

export interface AggregateRound {
  /** tools/list p50 (ms) through the aggregated route. */
  merged: number;
  /** tools/list p50 (ms) of each upstream through a route of its own, in the same round. */
  alone: Record<string, number>;
  /**
   * tools/list p50 (ms) of the three single routes asked at once by the client: what the machine
   * gives three lists in parallel, so the merged list's cost beyond it is the gateway's own (shown, not a goal).
   */
  together?: number;
  /** Answers that were not a JSON-RPC result, over every target of the round. */
  failures: number;
}

export interface AggregatePhaseResult {
  rounds: AggregateRound[];
  /** The upstream slowest alone, per round. */
  slowest: string[];
  /** merged − slowest alone (ms), per round, summarised. */
  overheadMs: Spread;
  failures: number;
}

/** The slowest upstream alone and the merged list's cost over it, round by round. */
export function aggregateSummary(rounds: readonly AggregateRound[]): AggregatePhaseResult {
  if (rounds.length === 0 || rounds.some((r) => Object.keys(r.alone).length === 0)) throw new Error('aggregate phase: every round needs the merged list and each upstream alone');
  const slowest = rounds.map((r) => Object.entries(r.alone).reduce((a, b) => (b[1] > a[1] ? b : a))[0]);
  const overheads = rounds.map((r, i) => r.merged - r.alone[slowest[i]!]!);
  return { rounds: [...rounds], slowest, overheadMs: spread(overheads), failures: rounds.reduce((n, r) => n + r.failures, 0) };
}

/** The goal row: met when the median per-round difference is within the goal and no request failed. */
export function aggregateGoal(result: AggregatePhaseResult | undefined): Goal {
  const goal = `merged tools/list of three upstreams − the slowest alone ≤ ${AGGREGATE_GOAL_MS} ms (p50)`;
  if (!result) return { goal, measured: 'not measured', met: null };
  const { median, min, max } = result.overheadMs;
  const failed = result.failures > 0 ? `; ${result.failures} failed requests` : '';
  return { goal, measured: `${median.toFixed(2)} ms (${min.toFixed(2)}–${max.toFixed(2)})${failed}`, met: median <= AGGREGATE_GOAL_MS && result.failures === 0 };
}
