// The `stdio` and `sse-upstream` phases of `npm run bench`: bench/stdio-route.ts
// (a stdio route against a direct stdio client of server-memory) and
// bench/sse-route.ts (a legacy HTTP+SSE upstream against a direct SSE client of
// server-everything), each run as a process of its own with the counts of the
// run, its report kept as it printed it and its "overhead p50" lines read into
// figures the goals check.
import { spawn } from 'node:child_process';
import type { Log } from './interleave.js';
import { REPO_ROOT } from './processes.js';

export interface RoutePhaseResult {
  script: string;
  /** What the script printed (its tables). */
  output: string;
  /** Gateway − direct at p50, ms, by `<section> / <target>` (stdio) or `<section>` (SSE). */
  overheadP50Ms: Record<string, number>;
}

export const ROUTE_PHASES = {
  stdio: { script: 'bench/stdio-route.ts', title: 'stdio route (server-memory): tools/call through the gateway against a direct stdio client' },
  'sse-upstream': { script: 'bench/sse-route.ts', title: 'legacy HTTP+SSE upstream (server-everything sse): tools/call through the gateway against a direct SSE client' },
} as const;
export type RoutePhase = keyof typeof ROUTE_PHASES;

/** The scripts' own counts: a full run's, or a smoke run's few calls. */
function countsEnv(phase: RoutePhase, smoke: boolean, rounds: number): Record<string, string> {
  if (phase === 'stdio') {
    return {
      STDIO_BENCH_PHASES: 'calls',
      STDIO_BENCH_ROUNDS: String(smoke ? 1 : rounds),
      STDIO_BENCH_CALLS: smoke ? '40' : '200',
      STDIO_BENCH_SESSIONS: smoke ? '2' : '8',
      ...(smoke ? { STDIO_BENCH_SANDBOX: '0' } : {}),
    };
  }
  return { SSE_BENCH_ROUNDS: String(smoke ? 1 : rounds), SSE_BENCH_CALLS: smoke ? '40' : '200', SSE_BENCH_CONNECTS: smoke ? '3' : '20' };
}

export async function runRoutePhase(phase: RoutePhase, options: { smoke: boolean; rounds: number }, log: Log): Promise<RoutePhaseResult> {
  const { script } = ROUTE_PHASES[phase];
  const output = await runScript(script, countsEnv(phase, options.smoke, options.rounds), log);
  return { script, output, overheadP50Ms: overheads(output) };
}

function runScript(script: string, env: Record<string, string>, log: Log): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', script], { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      for (const line of chunk.split('\n').filter(Boolean)) log(`  ${line}`);
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(stdout) : reject(new Error(`${script} exited ${code}:\n${stderr.slice(-2000)}`))));
  });
}

/** `  <target> overhead p50 X ms` under a `<section>: …` heading (stdio), or `  overhead p50 X ms` (SSE). */
export function overheads(output: string): Record<string, number> {
  const found: Record<string, number> = {};
  let section = '';
  for (const line of output.split('\n')) {
    if (/^\S[^:]*:/.test(line)) section = line.slice(0, line.indexOf(':'));
    const match = /^\s+(?:(\S+) )?overhead p50 (-?[0-9.]+) ms/.exec(line);
    if (match) found[match[1] ? `${section} / ${match[1]}` : section] = Number(match[2]);
  }
  return found;
}
