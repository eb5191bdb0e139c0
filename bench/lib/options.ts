// Command-line options of `npm run bench`, checked once.
import { parseArgs } from 'node:util';
import type { LoaderChoice } from './loader.js';
import { SHAPE_NAMES, type ShapeName } from './shapes.js';

/** Run by default, in this order; `profile` runs only when asked for. */
export const PHASES = ['throughput', 'latency', 'sse', 'memory', 'stdio', 'sse-upstream', 'user-oauth', 'aggregate'] as const;
export type Phase = (typeof PHASES)[number] | 'profile';

export interface BenchOptions {
  smoke: boolean;
  rounds: number;
  durationSec: number;
  warmupSec: number;
  connections: number;
  /** Requests per second of the fixed-rate latency runs. */
  rate: number;
  rateDurationSec: number;
  /** Rounds of the latency and SSE measures (the throughput rounds are `rounds`). */
  latencyRounds: number;
  /** Concurrent streams per target and round in the SSE comparison. */
  sseStreams: number;
  sseEvents: number;
  sseIntervalMs: number;
  idleStreams: number;
  /** The pool of shape c (a new token every request), walked once per target; what a run needs beyond it is reuse, and reported. */
  coldTokens: number;
  /** Traffic shapes of the throughput measure (bench/lib/shapes.ts). */
  shapes: ShapeName[];
  /** wrk when installed (auto), or one of them. */
  loader: LoaderChoice;
  /** wrk's threads. */
  loaderThreads: number;
  alg: 'RS256' | 'ES256' | 'PS256' | 'EdDSA';
  runtime: 'dist' | 'src';
  /** The gateway's JS entry point for --runtime dist; another build can be compared against this one. */
  gatewayEntry: string;
  /** How long opening idle streams may make no progress before the count is taken as final. */
  stallSec: number;
  /** Pause before each RSS reading of the idle-stream measure. */
  settleSec: number;
  /** `profile`: also run the gateway with --cpu-prof under cached- and cold-token load and summarise. */
  phases: Phase[];
  /** Where results go; default bench/results (bench/results/smoke for --smoke). */
  outDir: string;
  /** Measure nothing: render latest.md and latest.svg again from this results file. */
  from?: string;
}

export const USAGE = `usage: npm run bench -- [options]
  --smoke               about 30 s of load in all: one short round, no warm-up, one latency and SSE round, 200 idle streams (CI)
  --rounds N            interleaved rounds per measure (default 3, at least 1; 1 with --smoke)
  --duration S          seconds per throughput run (default 5; wrk runs whole seconds)
  --shapes a,b16,...    traffic shapes of the throughput measure: ${SHAPE_NAMES.join(', ')} (default all; a,b16,c with --smoke)
  --loader L            auto (default: wrk when installed, else autocannon), wrk or autocannon
  --threads N           wrk's threads (default 2)
  --connections N       concurrent connections (default 32)
  --rate N              requests/s of the fixed-rate latency runs, evenly spaced (default 1000)
  --idle-streams N      idle SSE streams for the memory measure (default 10000)
  --cold-tokens N       the pool of shape c, a new token every request (default 200000; 10000 with --smoke)
  --alg ALG             signing algorithm of the tokens: ES256 (default), RS256, PS256, EdDSA
  --runtime dist|src    run the built gateway (default; \`npm run bench\` builds first) or src through tsx
  --gateway-entry FILE  the gateway entry for --runtime dist (default bin/mcp-auth-gateway.js), e.g. a patched build
  --only a,b            phases to run: ${PHASES.join(', ')}, profile (default all but profile)
  --profile             also write CPU profiles of the gateway under load, with a summary (= adding profile to the phases)
  --out DIR             results directory (default bench/results, bench/results/smoke with --smoke)
  --from FILE           measure nothing: write latest.md and latest.svg again from a results JSON`;

export function parseOptions(argv: string[]): BenchOptions {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      smoke: { type: 'boolean', default: false },
      rounds: { type: 'string' },
      duration: { type: 'string' },
      connections: { type: 'string' },
      rate: { type: 'string' },
      'idle-streams': { type: 'string' },
      'cold-tokens': { type: 'string' },
      alg: { type: 'string', default: 'ES256' },
      shapes: { type: 'string' },
      loader: { type: 'string', default: 'auto' },
      threads: { type: 'string' },
      runtime: { type: 'string', default: 'dist' },
      'gateway-entry': { type: 'string', default: 'bin/mcp-auth-gateway.js' },
      only: { type: 'string' },
      profile: { type: 'boolean', default: false },
      out: { type: 'string' },
      from: { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help) {
    console.log(USAGE);
    process.exit(0);
  }
  const smoke = values.smoke;
  const number = (name: string, raw: string | undefined, fallback: number, min: number): number => {
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < min) throw new Error(`--${name} must be a number ≥ ${min}`);
    return value;
  };
  const rounds = Math.round(number('rounds', values.rounds, smoke ? 1 : 3, 1));
  const durationSec = number('duration', values.duration, smoke ? 0.3 : 5, 0.1);
  const alg = values.alg;
  if (alg !== 'RS256' && alg !== 'ES256' && alg !== 'PS256' && alg !== 'EdDSA') throw new Error('--alg must be RS256, ES256, PS256 or EdDSA');
  const loader = values.loader;
  if (loader !== 'auto' && loader !== 'wrk' && loader !== 'autocannon') throw new Error('--loader must be auto, wrk or autocannon');
  // The smoke run checks every code path: b1000 differs from b16 only in its number of tokens.
  const shapes = values.shapes ? values.shapes.split(',').map((s) => s.trim()) : smoke ? ['a', 'b16', 'c'] : [...SHAPE_NAMES];
  for (const shape of shapes) if (!(SHAPE_NAMES as readonly string[]).includes(shape)) throw new Error(`--shapes: unknown shape ${shape}`);
  const runtime = values.runtime;
  if (runtime !== 'dist' && runtime !== 'src') throw new Error('--runtime must be dist or src');
  const phases: string[] = values.only ? values.only.split(',').map((p) => p.trim()) : [...PHASES];
  if (values.profile && !phases.includes('profile')) phases.push('profile');
  for (const phase of phases) if (![...PHASES, 'profile'].includes(phase)) throw new Error(`--only: unknown phase ${phase}`);
  return {
    smoke,
    rounds,
    durationSec,
    // The smoke run checks that every measure works, not what it measures: no warm-up.
    warmupSec: smoke ? 0 : Math.min(2, durationSec),
    connections: Math.round(number('connections', values.connections, 32, 1)),
    rate: number('rate', values.rate, 1000, 1),
    rateDurationSec: smoke ? 0.5 : durationSec,
    latencyRounds: smoke ? 1 : rounds,
    sseStreams: smoke ? 1 : 5,
    sseEvents: 200,
    sseIntervalMs: 5,
    idleStreams: Math.round(number('idle-streams', values['idle-streams'], smoke ? 200 : 10_000, 1)),
    coldTokens: Math.round(number('cold-tokens', values['cold-tokens'], smoke ? 10_000 : 200_000, 1)),
    shapes: shapes as ShapeName[],
    loader,
    loaderThreads: Math.round(number('threads', values.threads, 2, 1)),
    alg,
    runtime,
    gatewayEntry: values['gateway-entry'],
    stallSec: smoke ? 2 : 10,
    settleSec: smoke ? 0.5 : 3,
    phases: phases as Phase[],
    outDir: values.out ?? (smoke ? 'bench/results/smoke' : 'bench/results'),
    ...(values.from ? { from: values.from } : {}),
  };
}
