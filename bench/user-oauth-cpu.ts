// node --import tsx bench/user-oauth-cpu.ts [--requests N] [--warmup N] [--rounds N] [--connections N] [--profile DIR] [--callgrind]
// The user-oauth phase of `npm run bench` (bench/lib/user-oauth-phase.ts: one gateway, the build,
// a real redis-server, a static and a user_oauth route with a connected grant) under a light,
// fixed load instead of wrk: per round and route, N tools/call POSTs over a few keep-alive
// connections, one request at a time each, and the gateway's CPU per request from /proc. Light
// enough for a shared machine; the ratio user_oauth ÷ static is taken per round, the two routes
// side by side in one process. --profile DIR: the gateway also runs under `node --cpu-prof`.
// --callgrind: the gateway runs under valgrind's callgrind (as bench/instructions.ts), instrumented
// from the first measured round on, and each round of each route reports instructions per request
// (every thread; the optimising compiler's left out) instead of CPU time, which load does not move.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, readdir } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { parseArgs } from 'node:util';
import { UPSTREAM_CREDENTIAL } from './lib/gateway.js';
import type { LoadTarget, LoadSample } from './lib/load.js';
import { MEASURED_BODY } from './lib/load.js';
import { cpuSeconds, readyPort, spawnReady } from './lib/processes.js';
import { measureUserOAuth } from './lib/user-oauth-phase.js';

const { values: opts } = parseArgs({
  options: {
    requests: { type: 'string', default: '4000' },
    /** Per route, before the first measured round (uninstrumented under --callgrind). */
    warmup: { type: 'string', default: '1000' },
    rounds: { type: 'string', default: '5' },
    connections: { type: 'string', default: '8' },
    profile: { type: 'string' },
    callgrind: { type: 'boolean', default: false },
  },
});
const REQUESTS = Number(opts.requests);
const CONNECTIONS = Number(opts.connections);

const upstream = await spawnReady('upstream', process.execPath, ['--import', 'tsx', 'bench/servers/upstream.ts'], {
  env: { ...process.env, BENCH_UPSTREAM_CREDENTIAL: UPSTREAM_CREDENTIAL, BENCH_UPSTREAM_KEEP_ALIVE_MS: '3600000' },
  ready: readyPort,
});
const run = promisify(execFile);
const dumps = opts.callgrind ? await mkdtemp(join(tmpdir(), 'mag-uo-callgrind-')) : undefined;
let instrumented = false;
try {
  const profileArgs = opts.profile ? ['--cpu-prof', `--cpu-prof-dir=${resolve(opts.profile)}`] : [];
  const valgrind = dumps ? ['--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${dumps}/gateway.%p`, process.execPath] : [];
  const result = await measureUserOAuth(
    {
      upstreamOrigin: `http://127.0.0.1:${upstream.readyValue as number}`,
      gatewayArgs: [...valgrind, ...profileArgs, 'bin/mcp-auth-gateway.js'],
      settings: { connections: CONNECTIONS, durationSec: 0 },
      rounds: Number(opts.rounds),
      warmupSec: 1,
      ...(dumps && {
        command: 'valgrind',
        readyTimeoutMs: 300_000,
        // Switching instrumentation on stalls the process for seconds: no timeout may cut a request meanwhile.
        // and the built-in AS's tokens (10 minutes by default) must outlive a warm-up under valgrind.
        extraConfig: { limits: { header_timeout: '10m', request_timeout: '10m', keep_alive_timeout: '10m' }, access_token_ttl: '4h' },
      }),
    },
    (line) => console.log(line),
    fixedCount,
  );
  console.log(JSON.stringify(result, null, 2));
} finally {
  await upstream.stop();
}

/** REQUESTS POSTs (--warmup of them in the warm-up round, whose durationSec is 1) and the target's CPU (or instructions) per request. */
async function fixedCount(target: LoadTarget, settings: { durationSec: number }): Promise<LoadSample> {
  const warmup = settings.durationSec > 0;
  if (!dumps || warmup) return posts(target, warmup ? Number(opts.warmup) : REQUESTS);
  if (!instrumented) {
    // Instrumented from here on, and warmed up a little more so that what is measured is optimised code.
    await run('callgrind_control', ['-i', 'on', String(target.pid)]);
    await posts(target, Math.ceil(REQUESTS / 5));
    instrumented = true;
  }
  await run('callgrind_control', ['-z', String(target.pid)]);
  const sample = await posts(target, REQUESTS);
  await run('callgrind_control', ['-d', String(target.pid)]);
  const instructions = await lastDump();
  return { ...sample, targetCpuUsPerRequest: instructions / sample.requests };
}

/** Instructions of the newest dump, the optimising compiler's (a one-off of tiering up) left out. */
async function lastDump(): Promise<number> {
  const files = (await readdir(dumps!)).filter((f) => /\.\d+\.\d+$/.test(f)).sort((a, b) => Number(a.split('.').pop()) - Number(b.split('.').pop()));
  const file = join(dumps!, files.at(-1)!);
  const total = Number(/^(?:totals|summary): (\d+)/m.exec(await readFile(file, 'utf8'))?.[1]);
  const { stdout } = await run('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], { maxBuffer: 256 * 1024 * 1024 });
  const compiler = Number(/^\s*([\d,]+) .*OptimizingCompileDispatcher::CompileTask::RunInternal/m.exec(stdout)?.[1]?.replaceAll(',', '') ?? 0);
  const mainThread = Number(/^\s*([\d,]+) .*deps\/uv\/src\/unix\/core.c:uv_run/m.exec(stdout)?.[1]?.replaceAll(',', '') ?? 0);
  console.log(`    dump ${file}: ${Math.round((total - compiler) / REQUESTS).toLocaleString('en')} instructions per request, main thread ${Math.round(mainThread / REQUESTS).toLocaleString('en')}`);
  return total - compiler;
}

/** `count` POSTs over CONNECTIONS keep-alive connections, one request at a time each; the target's CPU per request from /proc. */
async function posts(target: LoadTarget, count: number): Promise<LoadSample> {
  const { hostname, port, pathname } = new URL(target.url);
  const body = Buffer.from(MEASURED_BODY);
  const headers = { ...target.headers, 'content-length': String(body.length) };
  const before = cpuSeconds(target.pid) ?? NaN;
  const started = performance.now();
  let non2xx = 0;
  const perConnection = Math.ceil(count / CONNECTIONS);
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      for (let k = 0; k < perConnection; k++) {
        await new Promise<void>((done, fail) => {
          const req = request({ hostname, port, path: pathname, method: 'POST', headers, agent }, (res) => {
            if (res.statusCode !== 200) non2xx++;
            res.resume();
            res.once('end', done);
          });
          req.once('error', fail);
          req.end(body);
        });
      }
      agent.destroy();
    }),
  );
  const requests = perConnection * CONNECTIONS;
  const seconds = (performance.now() - started) / 1000;
  const cpu = (cpuSeconds(target.pid) ?? NaN) - before;
  return {
    requestsPerSec: requests / seconds,
    requests,
    latencyMs: { p50: NaN, p90: NaN, p99: NaN, max: NaN, mean: NaN },
    non2xx,
    errors: 0,
    timeouts: 0,
    statusCodes: {},
    targetCpuUsPerRequest: (cpu * 1e6) / requests,
    loadGeneratorCpuPct: NaN,
  };
}
