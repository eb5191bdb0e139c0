// Summaries across rounds: the median is the headline, min and max the spread.

export interface Spread {
  median: number;
  min: number;
  max: number;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function spread(values: readonly number[]): Spread {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return { median: NaN, min: NaN, max: NaN };
  return { median: median(finite), min: Math.min(...finite), max: Math.max(...finite) };
}

/** Nearest-rank percentile (p in 0–100) of unsorted samples. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1]!;
}

export interface LatencySummary {
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Mean and nearest-rank percentiles of request durations (ms). */
export function latencySummary(durations: readonly number[]): LatencySummary {
  return {
    mean: durations.reduce((a, b) => a + b, 0) / durations.length,
    p50: percentile(durations, 50),
    p90: percentile(durations, 90),
    p99: percentile(durations, 99),
    max: percentile(durations, 100),
  };
}

/** Per-round ratios a[i] / b[i] of two targets measured in the same round, summarised. */
export function ratioSpread(a: readonly number[], b: readonly number[]): Spread {
  return spread(a.map((value, i) => value / b[i]!));
}

export function round(value: number, digits = 2): number {
  const factor = 10 ** digits;
  return Math.round(value * factor) / factor;
}
