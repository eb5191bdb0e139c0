// The shape of bench/results/<date>.json, and the summaries computed from
// the raw round samples: medians, spreads, per-round ratios, the goals.
import type { RoundSample } from './interleave.js';
import type { MachineInfo } from './machine.js';
import type { BenchOptions } from './options.js';
import type { IdleStreamsResult } from './idle-memory.js';
import type { StreamSummary } from './streaming.js';
import type { ProfileResult } from './profile-phase.js';
import { ratioSpread, spread, type Spread } from './stats.js';

export type TargetName = 'direct' | 'nginx' | 'http-proxy' | 'proxy-core' | 'gateway-auth-off' | 'gateway' | 'gateway-cold';

export const TARGET_LABELS: Record<TargetName, string> = {
  direct: 'direct to upstream',
  nginx: 'nginx, no auth',
  'http-proxy': 'http-proxy, no auth',
  'proxy-core': 'gateway proxy core, no auth',
  'gateway-auth-off': 'gateway, auth off',
  gateway: 'gateway, JWT (cached)',
  'gateway-cold': 'gateway, JWT (new token each request)',
};

export interface TargetSummary {
  label: string;
  requestsPerSec: Spread;
  latencyP50Ms: Spread;
  latencyP99Ms: Spread;
  /** CPU time of the target's process per request (the upstream's for "direct"). */
  cpuUsPerRequest: Spread;
  /** non-2xx answers + errors + timeouts over all rounds. */
  failures: number;
  /** Cold-token runs: share of requests that missed the gateway's verified-token cache. */
  tokenCacheMissRatio?: number;
  loadGeneratorCpuPct: Spread;
  rounds: RoundSample[];
}

export interface Goal {
  goal: string;
  measured: string;
  met: boolean | null;
}

export interface BenchResults {
  date: string;
  smoke: boolean;
  settings: Omit<BenchOptions, 'outDir' | 'phases' | 'smoke'> & { phases: string[] };
  machine: MachineInfo;
  notes: string[];
  throughput?: {
    targets: Partial<Record<TargetName, TargetSummary>>;
    /** Per-round ratios of requests/s, e.g. "gateway / http-proxy". */
    ratios: Record<string, Spread>;
  };
  latency?: {
    rate: number;
    targets: Partial<Record<TargetName, TargetSummary>>;
    /** Gateway minus direct, medians of the per-round differences. */
    addedMs: { p50: Spread; p99: Spread };
  };
  sse?: { events: number; intervalMs: number; targets: Record<string, StreamSummary> };
  idleStreams?: IdleStreamsResult;
  profiles?: Omit<ProfileResult, 'summary'>[];
  goals: Goal[];
}

export function summariseTarget(name: TargetName, rounds: RoundSample[]): TargetSummary {
  const counted = rounds.filter((r) => r.counters);
  const misses = counted.reduce((n, r) => n + (r.counters!.miss ?? 0), 0);
  const lookups = counted.reduce((n, r) => n + (r.counters!.miss ?? 0) + (r.counters!.hit ?? 0), 0);
  return {
    label: TARGET_LABELS[name],
    requestsPerSec: spread(rounds.map((r) => r.requestsPerSec)),
    latencyP50Ms: spread(rounds.map((r) => r.latencyMs.p50)),
    latencyP99Ms: spread(rounds.map((r) => r.latencyMs.p99)),
    cpuUsPerRequest: spread(rounds.map((r) => r.targetCpuUsPerRequest ?? NaN)),
    failures: rounds.reduce((n, r) => n + r.non2xx + r.errors + r.timeouts, 0),
    ...(lookups > 0 ? { tokenCacheMissRatio: misses / lookups } : {}),
    loadGeneratorCpuPct: spread(rounds.map((r) => r.loadGeneratorCpuPct)),
    rounds,
  };
}

/** Requests/s ratios of every pair that matters, per round (targets measured side by side). */
export function throughputRatios(samples: Map<string, RoundSample[]>): Record<string, Spread> {
  const rps = (name: TargetName) => samples.get(name)?.map((r) => r.requestsPerSec);
  const pairs: [TargetName, TargetName][] = [
    ['gateway', 'http-proxy'],
    ['gateway', 'nginx'],
    ['gateway', 'direct'],
    ['gateway', 'proxy-core'],
    ['gateway', 'gateway-auth-off'],
    ['gateway-auth-off', 'proxy-core'],
    ['proxy-core', 'http-proxy'],
    ['http-proxy', 'nginx'],
    ['gateway-cold', 'gateway'],
    ['gateway-cold', 'http-proxy'],
  ];
  const ratios: Record<string, Spread> = {};
  for (const [a, b] of pairs) {
    const [x, y] = [rps(a), rps(b)];
    if (x && y) ratios[`${a} / ${b}`] = ratioSpread(x, y);
  }
  return ratios;
}
