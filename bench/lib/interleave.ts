// Interleaved rounds (A B C, A B C, …): a noisy minute on a shared machine
// then hurts every target a little instead of one target a lot, and the
// per-round ratios compare targets measured side by side.
import { runLoad, type LoadSample, type LoadSettings, type LoadTarget } from './load.js';
import { round } from './stats.js';

export interface MeasuredTarget extends LoadTarget {
  /** Counters read before and after each run; the differences are kept with the sample. */
  counters?: () => Promise<Record<string, number>>;
}

export interface RoundSample extends LoadSample {
  round: number;
  counters?: Record<string, number>;
}

export type Log = (line: string) => void;

/** One measured run of a target; autocannon's closed loop unless another runner is given. */
export type Runner<S> = (target: LoadTarget, settings: S) => Promise<LoadSample>;

export async function interleave<S extends { durationSec: number } = LoadSettings>(
  targets: readonly MeasuredTarget[],
  settings: S,
  rounds: number,
  warmupSec: number,
  log: Log,
  run: Runner<S> = runLoad as unknown as Runner<S>,
): Promise<Map<string, RoundSample[]>> {
  const samples = new Map<string, RoundSample[]>(targets.map((t) => [t.name, []]));
  if (warmupSec > 0) {
    // JIT, pools and caches warm; not recorded.
    for (const target of targets) await run(target, { ...settings, durationSec: warmupSec });
  }
  for (let r = 1; r <= rounds; r++) {
    for (const target of targets) {
      const before = await target.counters?.();
      const sample: RoundSample = { ...(await run(target, settings)), round: r };
      if (before) {
        const after = await target.counters!();
        sample.counters = Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - (before[k] ?? 0)]));
      }
      samples.get(target.name)!.push(sample);
      const failures = sample.non2xx + sample.errors + sample.timeouts;
      log(
        `  round ${r} ${target.name.padEnd(22)} ${String(Math.round(sample.requestsPerSec)).padStart(7)} req/s` +
          `  p50 ${round(sample.latencyMs.p50)} ms  p99 ${round(sample.latencyMs.p99)} ms` +
          (sample.targetCpuUsPerRequest !== undefined ? `  ${round(sample.targetCpuUsPerRequest, 1)} µs CPU/req` : '') +
          `  loader ${Math.round(sample.loadGeneratorCpuPct)} %` +
          (failures ? `  FAILURES non2xx=${sample.non2xx} errors=${sample.errors} timeouts=${sample.timeouts}` : ''),
      );
    }
  }
  return samples;
}
