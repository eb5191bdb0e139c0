// npm run bench: the gateway against what users would otherwise deploy,
// measured in one run on this machine. See docs/benchmark.md.
//   throughput  interleaved rounds, in three traffic shapes (one client per connection; 16 and
//               1,000 users per connection; a new token every request): nginx, http-proxy, the
//               gateway's proxy core alone, the gateway with auth off and with auth (and direct);
//               loaded by wrk when installed, else autocannon
//   latency     p50/p99 at a fixed modest rate: direct vs gateway
//   sse         first-event time and per-event delay: direct vs gateway
//   memory      RSS per idle SSE stream through a fresh gateway
//   stdio       tools/call on a stdio route against a direct stdio client (bench/stdio-route.ts)
//   sse-upstream  tools/call on a legacy HTTP+SSE upstream against a direct SSE client (bench/sse-route.ts)
//   user-oauth  CPU per request of a user_oauth route with a connected grant against static (bench/lib/user-oauth-phase.ts)
//   aggregate   tools/list of an aggregated route of three upstreams against the slowest alone (bench/lib/aggregate-phase.ts)
// Writes bench/results/<date>.json, latest.md and latest.svg; exits 1 when
// the gateway answered anything but 2xx under load.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import os from 'node:os';
import { join, resolve } from 'node:path';
import { audienceOf, startEnvironment, type BenchEnvironment } from './lib/environment.js';
import { GATEWAY_PATHS } from './lib/gateway.js';
import { measureIdleStreams } from './lib/idle-memory.js';
import { interleave, type MeasuredTarget } from './lib/interleave.js';
import { MCP_HEADERS } from './lib/load.js';
import { chooseLoader, type Loader } from './lib/loader.js';
import { machineInfo } from './lib/machine.js';
import { parseOptions, type BenchOptions } from './lib/options.js';
import { REPO_ROOT } from './lib/processes.js';
import { profileGateway } from './lib/profile-phase.js';
import { chartSvg, checkGoals, markdownReport } from './lib/report.js';
import { summariseShapes, summariseTarget, upgradeLegacyResults, type BenchResults, type TargetName } from './lib/results.js';
import { SHAPES, targetsByShape, type ShapeTokens } from './lib/shapes.js';
import { spread } from './lib/stats.js';
import { compareStreams } from './lib/streaming.js';
import { runPaced } from './lib/paced.js';
import { ROUTE_PHASES, runRoutePhase } from './lib/route-phases.js';
import { measureUserOAuth } from './lib/user-oauth-phase.js';
import { measureAggregate } from './lib/aggregate-phase.js';

const log = (...lines: string[]) => console.log(lines.join('\n'));

async function main(): Promise<number> {
  const options = parseOptions(process.argv.slice(2));
  if (options.from) return rerender(options);
  const date = new Date();
  const notes: string[] = [];
  checkBuild(options, notes);
  notes.push('Shared or virtual machines make these numbers noisy: compare ratios measured in the same run, not absolute figures across runs.');

  const loader = chooseLoader(options.loader, options.loaderThreads);
  log(`starting upstream, gateway (${options.runtime}), http-proxy and nginx; load by ${loader.name} ${loader.version}...`);
  const needsColdTokens = (options.phases.includes('throughput') && options.shapes.includes('c')) || options.phases.includes('profile');
  const env = await startEnvironment(options, needsColdTokens ? options.coldTokens : 0);
  notes.push(...env.notes);
  const machine = machineInfo(env.nginxVersion);
  const results: BenchResults = {
    date: date.toISOString(),
    smoke: options.smoke,
    settings: { ...withoutOutput(options), phases: options.phases },
    machine,
    notes,
    goals: [],
  };
  try {
    await measure(env, options, loader, results, date);
  } finally {
    await env.stop();
  }
  machine.loadAverage.end = os.loadavg()[0];
  results.goals = checkGoals(results);

  const outDir = resolve(REPO_ROOT, options.outDir);
  await mkdir(outDir, { recursive: true });
  const jsonFile = resultFile(outDir, date);
  const markdown = markdownReport(results);
  await writeFile(jsonFile, JSON.stringify(results, null, 2) + '\n');
  await writeFile(join(outDir, 'latest.md'), markdown);
  await writeFile(join(outDir, 'latest.svg'), chartSvg(results));
  log('', markdown, `results: ${jsonFile}, ${join(outDir, 'latest.md')}, ${join(outDir, 'latest.svg')}`);

  const gatewayFailures = results.goals.find((g) => g.goal.startsWith('zero non-2xx'));
  return gatewayFailures?.met === false ? 1 : 0;
}

async function measure(env: BenchEnvironment, options: BenchOptions, loader: Loader, results: BenchResults, date: Date): Promise<void> {
  const mcpToken = await env.tokenFor(GATEWAY_PATHS.mcp);
  const gatewayHeaders = { ...MCP_HEADERS, authorization: `Bearer ${mcpToken}` };
  const gatewayMcp = `${env.gateway.url}${GATEWAY_PATHS.mcp}`;
  const tokens = await shapeTokens(env, options);
  const direct: MeasuredTarget = { name: 'direct', url: `${env.upstream.url}${GATEWAY_PATHS.mcp}`, headers: { ...MCP_HEADERS }, pid: env.upstream.pid };
  const gateway: MeasuredTarget = { name: 'gateway', url: gatewayMcp, headers: gatewayHeaders, pid: env.gateway.pid };
  const proxies: MeasuredTarget[] = [
    // The same request bytes as the gateway's, token included: the baselines drop it unread.
    ...(env.nginx ? [{ name: 'nginx', url: `http://127.0.0.1:${env.nginx.port}${GATEWAY_PATHS.mcp}`, headers: gatewayHeaders, pid: env.nginx.pid }] : []),
    { name: 'http-proxy', url: `${env.httpProxy.url}${GATEWAY_PATHS.mcp}`, headers: gatewayHeaders, pid: env.httpProxy.pid },
    { name: 'proxy-core', url: `${env.proxyCore.url}${GATEWAY_PATHS.mcp}`, headers: gatewayHeaders, pid: env.proxyCore.pid },
  ];
  const settings = { connections: options.connections, durationSec: options.durationSec };

  if (options.phases.includes('throughput')) {
    const seconds = loader.seconds(options.durationSec);
    log(
      `throughput: shapes ${options.shapes.join(', ')}; ${options.rounds} round${options.rounds === 1 ? '' : 's'} × ${seconds} s, ${options.connections} connections,` +
        ` ${loader.name}${loader.name === 'wrk' ? ` with ${loader.threads} threads` : ''}`,
    );
    const targets: MeasuredTarget[] = [
      direct,
      ...proxies,
      // Sent the same tokens: the requests differ in nothing but whether the gateway looks at them.
      { ...gateway, name: 'gateway-auth-off', url: `${env.gatewayAuthOff.url}${GATEWAY_PATHS.mcp}`, pid: env.gatewayAuthOff.pid },
      { ...gateway, counters: () => tokenCacheCounters(env.gateway.url) },
    ];
    const samples = await interleave(targetsByShape(options.shapes, targets, tokens), settings, options.rounds, options.warmupSec, log, loader.run);
    const tokenCounts = Object.fromEntries(options.shapes.map((shape) => [shape, shape === 'c' ? tokens.pool.length : (tokens.users[shape]?.length ?? 1)]));
    const { name, version, threads, note } = loader;
    results.throughput = { loader: { name, version, threads, ...(note ? { note } : {}) }, runSeconds: seconds, ...summariseShapes(samples, tokenCounts) };
  }

  if (options.phases.includes('latency')) {
    log(`latency: ${options.rate} req/s evenly spaced, ${options.latencyRounds} rounds × ${options.rateDurationSec} s`);
    const samples = await interleave(
      [direct, ...proxies, gateway],
      { connections: options.connections, durationSec: options.rateDurationSec, rate: options.rate },
      options.latencyRounds,
      Math.min(options.warmupSec, 1),
      log,
      runPaced,
    );
    const [d, g] = [samples.get('direct')!, samples.get('gateway')!];
    results.latency = {
      rate: options.rate,
      targets: Object.fromEntries([...samples].map(([name, rounds]) => [name, summariseTarget(name as TargetName, rounds)])),
      addedMs: {
        p50: spread(g.map((s, i) => s.latencyMs.p50 - d[i]!.latencyMs.p50)),
        p99: spread(g.map((s, i) => s.latencyMs.p99 - d[i]!.latencyMs.p99)),
      },
    };
  }

  if (options.phases.includes('sse')) {
    log(`sse: ${options.sseEvents} events ${options.sseIntervalMs} ms apart, ${options.sseStreams} concurrent streams per target and round`);
    const streamToken = await env.tokenFor(GATEWAY_PATHS.stream);
    const targets = await compareStreams(
      [
        { name: 'direct', url: `${env.upstream.url}${GATEWAY_PATHS.stream}`, headers: {} },
        { name: 'gateway', url: `${env.gateway.url}${GATEWAY_PATHS.stream}`, headers: { authorization: `Bearer ${streamToken}` } },
      ],
      { rounds: options.latencyRounds, streamsPerRound: options.sseStreams, events: options.sseEvents, intervalMs: options.sseIntervalMs, warm: !options.smoke },
      log,
    );
    results.sse = { events: options.sseEvents, intervalMs: options.sseIntervalMs, targets };
  }

  if (options.phases.includes('memory')) {
    log(`memory: ${options.idleStreams} idle SSE streams through a fresh gateway`);
    results.idleStreams = await measureIdleStreams(env, options.idleStreams, options, log);
  }

  for (const phase of ['stdio', 'sse-upstream'] as const) {
    if (!options.phases.includes(phase)) continue;
    log(`${phase}: ${ROUTE_PHASES[phase].title}`);
    results.routes = { ...results.routes, [phase]: await runRoutePhase(phase, { smoke: options.smoke, rounds: Math.max(options.rounds, 3) }, log) };
  }

  if (options.phases.includes('user-oauth')) {
    log('user-oauth: CPU per request of a user_oauth route with a connected grant against the same route with static, one gateway (built-in AS, redis)');
    results.userOAuth = await measureUserOAuth(
      { upstreamOrigin: env.upstream.url, gatewayArgs: gatewayArgs(options), settings, rounds: Math.max(options.rounds, 3), warmupSec: options.warmupSec },
      log,
      loader.run,
    );
  }

  if (options.phases.includes('aggregate')) {
    log('aggregate: tools/list of one aggregated route of server-everything (HTTP), server-memory and server-filesystem (stdio) against each alone on its own route, one gateway');
    results.aggregate = await measureAggregate({ gatewayArgs: gatewayArgs(options), rounds: options.smoke ? 1 : Math.max(options.rounds, 3), calls: options.smoke ? 20 : 200 }, log);
  }

  if (options.phases.includes('profile')) {
    log('profile: the proxy core, and the gateway with --cpu-prof under one token per connection, 16 users per connection and a new token per request');
    const outDir = resolve(REPO_ROOT, options.outDir);
    await mkdir(outDir, { recursive: true });
    const stamp = date.toISOString().slice(0, 19).replace(/:/g, '-');
    const { results: profiles, markdown } = await profileGateway(
      env,
      { ...settings, durationSec: Math.max(options.durationSec * 2, 2) },
      { users16: tokens.users.b16 ?? (await env.issuer.mintMany(audienceOf(GATEWAY_PATHS.mcp), 16, 'bench-b16')), pool: tokens.pool },
      outDir,
      stamp,
      log,
      loader.run,
    );
    results.profiles = profiles.map(({ summary: _summary, ...rest }) => rest);
    const file = join(outDir, `profile-${stamp}.md`);
    await writeFile(file, markdown + '\n');
    log(markdown, `profile summary: ${file}`);
  }
}

/** The node arguments that run the measured gateway: the build, or the sources through tsx. */
function gatewayArgs(options: BenchOptions): string[] {
  return options.runtime === 'dist' ? [options.gatewayEntry] : ['--import', 'tsx', 'bench/lib/gateway-from-src.ts'];
}

/** The tokens of the shapes asked for: users' tokens of shape b, and the pool of shape c (minting it started with the environment). */
async function shapeTokens(env: BenchEnvironment, options: BenchOptions): Promise<ShapeTokens> {
  const users: ShapeTokens['users'] = {};
  for (const shape of options.shapes) {
    const count = SHAPES[shape].users;
    // A subject prefix per shape: no token of one shape is a token of another.
    if (count) users[shape] = await env.issuer.mintMany(audienceOf(GATEWAY_PATHS.mcp), count, `bench-${shape}`);
  }
  let pool: readonly string[] = [];
  if (env.coldTokens) {
    const started = performance.now();
    pool = await env.coldTokens;
    const waited = (performance.now() - started) / 1000;
    if (waited > 0.1) log(`waited ${waited.toFixed(1)} s more for the ${options.coldTokens} ${options.alg} tokens of shape c`);
  }
  return { users, pool };
}

/** `--from`: the report and chart again from a results file (after a change to the report, say). */
async function rerender(options: BenchOptions): Promise<number> {
  const results = upgradeLegacyResults(JSON.parse(await readFile(resolve(REPO_ROOT, options.from!), 'utf8')) as BenchResults);
  results.goals = checkGoals(results);
  const outDir = resolve(REPO_ROOT, options.outDir);
  await mkdir(outDir, { recursive: true });
  const markdown = markdownReport(results);
  await writeFile(join(outDir, 'latest.md'), markdown);
  await writeFile(join(outDir, 'latest.svg'), chartSvg(results));
  log(markdown, `written: ${join(outDir, 'latest.md')}, ${join(outDir, 'latest.svg')}`);
  return 0;
}

/** Verified-token cache lookups so far, from the gateway's Prometheus metrics. */
async function tokenCacheCounters(gatewayUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${gatewayUrl}/metrics`)).text();
  const counters: Record<string, number> = {};
  for (const match of text.matchAll(/^mag_token_cache_total\{result="([a-z]+)"\} ([0-9.e+]+)$/gm)) counters[match[1]!] = Number(match[2]);
  return counters;
}

/** The built gateway must be there, and a build older than the sources is measured only with a warning. */
function checkBuild(options: BenchOptions, notes: string[]): void {
  if (options.runtime !== 'dist') {
    notes.push('The gateway ran from src through tsx (--runtime src), not from the build.');
    return;
  }
  const built = join(REPO_ROOT, 'dist/cli.js');
  if (!existsSync(built)) throw new Error('dist/ is missing: run `npm run build` (`npm run bench` does), or pass --runtime src');
  const newest = newestMtime(join(REPO_ROOT, 'src'));
  if (newest > statSync(built).mtimeMs) notes.push('dist/ is older than src/: the measured gateway may not match the sources (npm run build).');
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(path) : statSync(path).mtimeMs);
  }
  return newest;
}

/** bench/results/<date>.json; a second run on the same day gets -2, -3, … */
function resultFile(outDir: string, date: Date): string {
  const day = date.toISOString().slice(0, 10);
  for (let n = 1; ; n++) {
    const file = join(outDir, n === 1 ? `${day}.json` : `${day}-${n}.json`);
    if (!existsSync(file)) return file;
  }
}

function withoutOutput(options: BenchOptions) {
  const { outDir: _outDir, phases: _phases, smoke: _smoke, ...rest } = options;
  return rest;
}

// Ctrl-C: exit through process.exit, so the children are stopped too (processes.ts).
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  },
);
