// The shape of bench/results/<date>.json, and the summaries computed from
// the raw round samples: medians, spreads, per-round ratios, the goals.
import type { RoundSample } from './interleave.js';
import type { MachineInfo } from './machine.js';
import type { BenchOptions } from './options.js';
import type { IdleStreamsResult } from './idle-memory.js';
import type { StreamSummary } from './streaming.js';
import type { ProfileResult } from './profile-phase.js';
import { LOADER_LIMIT_PCT, type LoaderInfo } from './loader.js';
import { SHAPES, splitShapeKey, type ShapeName } from './shapes.js';
import { ratioSpread, spread, type Spread } from './stats.js';
import type { RoutePhase, RoutePhaseResult } from './route-phases.js';
import type { UserOAuthPhaseResult } from './user-oauth-summary.js';
import type { AggregatePhaseResult } from './aggregate-summary.js';

export type TargetName = 'direct' | 'nginx' | 'http-proxy' | 'proxy-core' | 'gateway-auth-off' | 'gateway';

export const TARGET_LABELS: Record<TargetName, string> = {
  direct: 'direct to upstream',
  nginx: 'nginx (1 worker), no auth',
  'http-proxy': 'http-proxy, no auth',
  'proxy-core': 'gateway proxy core, no auth',
  'gateway-auth-off': 'gateway, auth off',
  gateway: 'gateway, JWT',
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
  /** The gateway: share of its token lookups that missed the verified-token cache (and so verified a signature). */
  tokenCacheMissRatio?: number;
  /** CPU of the loader, in % of one core. */
  loadGeneratorCpuPct: Spread;
  /** Rounds in which the loader used ≥ LOADER_LIMIT_PCT of a core: it may have been the limit. */
  loaderLimitedRounds: number;
  /** Shape c: requests that carried a token sent before (the pool was too small). */
  tokensReused?: number;
  rounds: RoundSample[];
}

export interface ShapeSummary {
  label: string;
  /** Distinct tokens the shape's requests carried (to each target). */
  tokens: number;
  targets: Partial<Record<TargetName, TargetSummary>>;
  /** Per-round ratios of requests/s within the shape, e.g. "gateway / http-proxy". */
  ratios: Record<string, Spread>;
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
    loader: LoaderInfo;
    /** Seconds each run lasted (wrk runs whole seconds, whatever --duration asked). */
    runSeconds: number;
    shapes: Partial<Record<ShapeName, ShapeSummary>>;
    /** Per-round ratios across shapes, e.g. "gateway b16 / gateway a". */
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
  /** The stdio and SSE-upstream phases: each script's report and its p50 overheads. */
  routes?: Partial<Record<RoutePhase, RoutePhaseResult>>;
  /** CPU per request of a user_oauth route with a connected grant against the same route with static. */
  userOAuth?: UserOAuthPhaseResult;
  /** The aggregate phase: merged tools/list of three upstreams against the slowest alone. */
  aggregate?: AggregatePhaseResult;
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
    loaderLimitedRounds: rounds.filter((r) => r.loadGeneratorCpuPct >= LOADER_LIMIT_PCT).length,
    ...(rounds.some((r) => r.tokensReused !== undefined) ? { tokensReused: rounds.reduce((n, r) => n + (r.tokensReused ?? 0), 0) } : {}),
    rounds,
  };
}

/** The interleaved samples (keyed shape/target) summarised by shape, with the ratios within and across shapes. */
export function summariseShapes(
  samples: Map<string, RoundSample[]>,
  tokenCounts: Partial<Record<ShapeName, number>>,
): { shapes: Partial<Record<ShapeName, ShapeSummary>>; ratios: Record<string, Spread> } {
  const byShape = new Map<ShapeName, Map<string, RoundSample[]>>();
  for (const [key, rounds] of samples) {
    const [shape, target] = splitShapeKey(key);
    if (!byShape.has(shape)) byShape.set(shape, new Map());
    byShape.get(shape)!.set(target, rounds);
  }
  const shapes: Partial<Record<ShapeName, ShapeSummary>> = {};
  for (const [shape, targets] of byShape) {
    shapes[shape] = {
      label: SHAPES[shape].label,
      tokens: tokenCounts[shape] ?? 1,
      targets: Object.fromEntries([...targets].map(([name, rounds]) => [name, summariseTarget(name as TargetName, rounds)])),
      ratios: throughputRatios(targets),
    };
  }
  // What many users per connection, and a new token each time, cost the gateway against one client per connection.
  const ratios: Record<string, Spread> = {};
  const gatewayIn = (shape: ShapeName) => byShape.get(shape)?.get('gateway')?.map((r) => r.requestsPerSec);
  const oneClient = gatewayIn('a');
  for (const shape of ['b16', 'b1000', 'c'] as const) {
    const other = gatewayIn(shape);
    if (other && oneClient) ratios[`gateway ${shape} / gateway a`] = ratioSpread(other, oneClient);
  }
  return { shapes, ratios };
}

/** Requests/s ratios of every pair that matters, per round (targets of one shape measured side by side). */
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
  ];
  const ratios: Record<string, Spread> = {};
  for (const [a, b] of pairs) {
    const [x, y] = [rps(a), rps(b)];
    if (x && y) ratios[`${a} / ${b}`] = ratioSpread(x, y);
  }
  // CPU per request against the proxy core measured beside it in the same round: unlike µs per
  // request, this carries across runs and machines (the host's own speed moved nginx's µs per
  // request ×1.6 between two quiet runs of 2026-11-26).
  const cpu = (name: TargetName) => samples.get(name)?.map((r) => r.targetCpuUsPerRequest ?? NaN);
  const core = cpu('proxy-core');
  for (const name of ['gateway', 'gateway-auth-off'] as const) {
    const own = cpu(name);
    if (own && core) ratios[`CPU ${name} / proxy-core`] = ratioSpread(own, core);
  }
  return ratios;
}

/**
 * Results written before the shapes (one token per connection, autocannon, a `gateway-cold`
 * target for new tokens), in today's form, so `--from` can render them again.
 */
export function upgradeLegacyResults(results: BenchResults): BenchResults {
  const legacy = results.throughput as unknown as { targets?: Record<string, TargetSummary>; ratios?: Record<string, Spread>; shapes?: unknown } | undefined;
  if (!legacy?.targets || legacy.shapes) return results;
  const { 'gateway-cold': cold, ...oneToken } = legacy.targets;
  const withLimits = (t: TargetSummary): TargetSummary => ({ ...t, loaderLimitedRounds: t.rounds.filter((r) => r.loadGeneratorCpuPct >= LOADER_LIMIT_PCT).length });
  const shapes: Partial<Record<ShapeName, ShapeSummary>> = {
    a: {
      label: SHAPES.a.label,
      tokens: 1,
      targets: Object.fromEntries(Object.entries(oneToken).map(([name, t]) => [name, withLimits(t)])),
      ratios: Object.fromEntries(Object.entries(legacy.ratios ?? {}).filter(([key]) => !key.includes('gateway-cold'))),
    },
  };
  if (cold) {
    const coldRatio = legacy.ratios?.['gateway-cold / http-proxy'];
    shapes.c = { label: SHAPES.c.label, tokens: results.settings.coldTokens, targets: { gateway: withLimits(cold) }, ratios: coldRatio ? { 'gateway / http-proxy': coldRatio } : {} };
  }
  const version = (results.machine.versions as Record<string, string | undefined>).autocannon ?? 'unknown';
  const runSeconds = results.settings.durationSec;
  return { ...results, throughput: { loader: { name: 'autocannon', version, threads: 1 }, runSeconds, shapes, ratios: {} } };
}
