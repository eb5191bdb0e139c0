// One load run with wrk (Debian package `wrk`, a C loader) against one target:
// a process of its own, so it competes with the target only for CPU, and its
// CPU use is its own (read by wrk-load.lua from /proc/self/stat over the run).
// The request bytes are those of the autocannon runner: the target's headers,
// POST tools/call, and for shapes b and c a token per request from the feed,
// handed to wrk as files. wrk runs whole seconds (its -d is an integer).
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MEASURED_BODY, type LoadSample, type LoadSettings, type LoadTarget } from './load.js';
import { clockTicks, cpuSeconds } from './processes.js';
import { stripe, type TokenFeed } from './token-feed.js';

export interface WrkBinary {
  path: string;
  version: string;
}

const SCRIPT = fileURLToPath(new URL('./wrk-load.lua', import.meta.url));

/** wrk on PATH or in /usr/bin; undefined when it is not installed (autocannon is used instead). */
export function findWrk(): WrkBinary | undefined {
  const candidates = [...(process.env.PATH ?? '').split(':').filter(Boolean).map((dir) => join(dir, 'wrk')), '/usr/bin/wrk'];
  const path = candidates.find((candidate) => existsSync(candidate));
  if (!path) return undefined;
  // `wrk -v` prints its version line and exits 1.
  const probe = spawnSync(path, ['-v'], { encoding: 'utf8' });
  const line = `${probe.stdout ?? ''}${probe.stderr ?? ''}`.split('\n')[0] ?? '';
  const match = /^wrk (\S+)/.exec(line);
  return match ? { path, version: match[1]! } : undefined;
}

/** The whole seconds wrk runs for a requested duration. */
export const wrkSeconds = (durationSec: number) => Math.max(1, Math.round(durationSec));

/** What wrk-load.lua's done() prints. */
interface WrkSummary {
  requests: number;
  durationUs: number;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  latencyUs: { mean: number; p50: number; p90: number; p99: number; max: number };
  cpuTicks: number | null;
  threads: { used: number; reused: number }[];
}

export async function runWrk(binary: WrkBinary, target: LoadTarget, settings: LoadSettings, threads: number): Promise<LoadSample> {
  const dir = await mkdtemp(join(tmpdir(), 'mag-bench-wrk-'));
  try {
    const threadCount = Math.max(1, Math.min(threads, settings.connections));
    const bodyFile = join(dir, 'body.json');
    await writeFile(bodyFile, MEASURED_BODY);
    const feed = target.tokens;
    let scriptArgs = [bodyFile, 'static'];
    if (feed?.kind === 'rotate') {
      const tokensFile = join(dir, 'tokens');
      await writeFile(tokensFile, feed.tokens.join('\n') + '\n');
      scriptArgs = [bodyFile, 'rotate', tokensFile];
    } else if (feed?.kind === 'once') {
      scriptArgs = [bodyFile, 'once', await stripeFiles(feed, threadCount), feed.positions(threadCount).join(',')];
    }
    const args = [
      `-t${threadCount}`,
      `-c${settings.connections}`,
      `-d${wrkSeconds(settings.durationSec)}s`,
      // As autocannon's default: a slow answer is a slow answer, not an error.
      '--timeout',
      '10s',
      ...Object.entries(target.headers).flatMap(([name, value]) => ['-H', `${name}: ${value}`]),
      '-s',
      SCRIPT,
      target.url,
      '--',
      ...scriptArgs,
    ];
    const cpuBefore = cpuSeconds(target.pid);
    const output = await run(binary.path, args);
    const cpuAfter = cpuSeconds(target.pid);
    const summary = parseSummary(output);
    const tokensReused = feed?.kind === 'once' ? feed.advance(summary.threads.map((t) => t.used)) : 0;
    const { errors, latencyUs: latency, requests } = summary;
    const seconds = summary.durationUs / 1e6;
    const ms = (us: number) => us / 1000;
    return {
      requestsPerSec: requests / seconds,
      requests,
      latencyMs: { mean: ms(latency.mean), p50: ms(latency.p50), p90: ms(latency.p90), p99: ms(latency.p99), max: ms(latency.max) },
      // wrk counts answers with a status of 400 and above, not each status.
      non2xx: errors.status,
      errors: errors.connect + errors.read + errors.write,
      timeouts: errors.timeout,
      statusCodes: { '< 400': requests - errors.status, '≥ 400': errors.status },
      targetCpuUsPerRequest: cpuBefore !== undefined && cpuAfter !== undefined && requests > 0 ? ((cpuAfter - cpuBefore) * 1e6) / requests : undefined,
      loadGeneratorCpuPct: summary.cpuTicks === null ? NaN : (summary.cpuTicks / clockTicks() / seconds) * 100,
      ...(feed?.kind === 'once' ? { tokensReused } : {}),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Pools already written as stripes (`<prefix>.<thread>`), by pool and thread count: a pool of 200,000 tokens is 80 MB. */
const stripesWritten = new Map<readonly string[], Map<number, string>>();
let stripesDir: string | undefined;

async function stripeFiles(feed: TokenFeed, threads: number): Promise<string> {
  let byThreads = stripesWritten.get(feed.tokens);
  if (!byThreads) stripesWritten.set(feed.tokens, (byThreads = new Map()));
  const known = byThreads.get(threads);
  if (known) return known;
  if (!stripesDir) {
    stripesDir = mkdtempSync(join(tmpdir(), 'mag-bench-stripes-'));
    const dir = stripesDir;
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  }
  const prefix = join(stripesDir, `pool-${stripesWritten.size}-${threads}`);
  await Promise.all(Array.from({ length: threads }, (_, i) => writeFile(`${prefix}.${i}`, stripe(feed.tokens, threads, i).join('\n') + '\n')));
  byThreads.set(threads, prefix);
  return prefix;
}

function run(command: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`wrk failed (${err.message.split('\n')[0]}):\n${stderr}${stdout}`));
      else resolve(stdout);
    });
  });
}

function parseSummary(stdout: string): WrkSummary {
  const line = stdout.split('\n').find((l) => l.startsWith('{"wrk":'));
  if (!line) throw new Error(`wrk printed no summary:\n${stdout}`);
  return JSON.parse(line) as WrkSummary;
}
