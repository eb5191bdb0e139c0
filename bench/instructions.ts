// node --import tsx bench/instructions.ts [--targets core,auth-off,jwt,stdio,sse] [--shapes a,b16] [--requests N]
//   [--warmup N] [--repeat N] [--connections N] [--stdio-sessions 1,8] [--entry FILE] [--keep DIR] [--before-jwks-settings]
// Machine instructions per request of the proxy core and of the gateway (auth off, JWT), counted
// by valgrind's callgrind in the target process (every thread: JavaScript, GC helpers, libuv),
// over a fixed number of requests sent by a loader in this process. Instruction counts do not
// move with what else runs on the machine, unlike CPU time or requests/s, so two builds can be
// compared on a busy host. Each target: started under callgrind with instrumentation off, switched
// on, warmed up, then counters zeroed and dumped around each measured batch (`callgrind_control`).
// The dumps are kept with --keep DIR for `callgrind_annotate --inclusive=yes`. Target stdio: the
// gateway's stdio route (bench/lib/stdio-target.ts), `tools/call` by SDK clients, one session per
// principal, as many sessions as each --stdio-sessions entry says (shapes s1, s8); the children's
// instructions are not counted (valgrind does not follow them). Target sse: the gateway with JWT, each
// "request" one GET event stream of the bench's upstream on a new connection (3 events 1 ms apart,
// read to its end), one at a time as bench/sse-first-event.ts opens them (shape e3).
import { execFile } from 'node:child_process';
import { request as httpRequest } from 'node:http';
import { mkdtemp, readFile, readdir, rm, mkdir, copyFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { parseArgs } from 'node:util';
import { audienceOf } from './lib/environment.js';
import { GATEWAY_PATHS, REQUIRED_SCOPE, UPSTREAM_CREDENTIAL, startGatewayProcess } from './lib/gateway.js';
import { sendPosts } from './lib/sequential-posts.js';
import { readyPort, spawnReady, type ChildHandle } from './lib/processes.js';
import { openStdioSessions, STDIO_PATH, stdioRouteYaml } from './lib/stdio-target.js';
import { startIssuer } from './lib/tokens.js';

const run = promisify(execFile);
const { values: opts } = parseArgs({
  options: {
    targets: { type: 'string', default: 'core,auth-off,jwt' },
    shapes: { type: 'string', default: 'a,b16' },
    requests: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '20000' },
    repeat: { type: 'string', default: '3' },
    connections: { type: 'string', default: '8' },
    'stdio-sessions': { type: 'string', default: '1,8' },
    entry: { type: 'string', default: 'bin/mcp-auth-gateway.js' },
    keep: { type: 'string' },
    // An entry built before gateway.yaml's `jwks:` (which it would refuse): its key set is fetched again after
    // 10 min with a 5 s timeout, which a JWT target slowed 50-fold by valgrind may not survive.
    'before-jwks-settings': { type: 'boolean', default: false },
  },
});
const REQUESTS = Number(opts.requests);
const WARMUP = Number(opts.warmup);
const REPEAT = Number(opts.repeat);
const CONNECTIONS = Number(opts.connections);
const USERS = 16;

type TargetName = 'core' | 'auth-off' | 'jwt' | 'stdio' | 'sse';
interface Target {
  handle: ChildHandle;
  url: string;
  stop(): Promise<void>;
}

const dir = await mkdtemp(join(tmpdir(), 'mag-instr-'));
const upstream = await spawnReady('upstream', process.execPath, ['--import', 'tsx', 'bench/servers/upstream.ts'], {
  // Streams of three events (target sse): what is counted is a stream's opening and its few events.
  env: { ...process.env, BENCH_UPSTREAM_CREDENTIAL: UPSTREAM_CREDENTIAL, BENCH_UPSTREAM_KEEP_ALIVE_MS: '3600000', BENCH_SSE_EVENTS: '3', BENCH_SSE_INTERVAL_MS: '1' },
  ready: readyPort,
});
const issuer = await startIssuer('ES256', `${REQUIRED_SCOPE} mcp:write`);
const results: { target: string; shape: string; perRequest: number[]; mainThread: number[] }[] = [];
try {
  const upstreamOrigin = `http://127.0.0.1:${upstream.readyValue as number}`;
  const audience = audienceOf(GATEWAY_PATHS.mcp);
  const single = await issuer.mint(audience, 'instr');
  const users = await issuer.mintMany(audience, USERS, 'instr-b16');
  for (const name of opts.targets.split(',') as TargetName[]) {
    const shapes = name === 'stdio' ? opts['stdio-sessions'].split(',').map((n) => `s${n}`) : name === 'sse' ? ['e3'] : opts.shapes.split(',');
    for (const shape of shapes) {
      const out = join(dir, `${name}-${shape}`);
      const target = await startTarget(name, upstreamOrigin, out);
      const stdio = name === 'stdio' ? await openStdioSessions(`${target.url}${STDIO_PATH}`, await issuer.mintMany(audienceOf(STDIO_PATH), Number(shape.slice(1)), 'instr-stdio')) : undefined;
      try {
        const tokenOf = shape === 'b16' ? rotation(users) : () => single;
        const streamToken = name === 'sse' ? await issuer.mint(audienceOf(GATEWAY_PATHS.stream), 'instr-sse') : '';
        const load = (count: number) =>
          stdio ? stdio.calls(count) : name === 'sse' ? openStreams(`${target.url}${GATEWAY_PATHS.stream}`, streamToken, count) : drive(`${target.url}${GATEWAY_PATHS.mcp}`, tokenOf, count);
        // Warmed up uninstrumented (fast), then a little more instrumented, so the measured code is optimised.
        await load(WARMUP);
        await callgrind(target.handle.pid, '-i', 'on');
        await load(Math.ceil(WARMUP / 10));
        const perRequest: number[] = [];
        const compiler: number[] = [];
        const mainThread: number[] = [];
        for (let i = 0; i < REPEAT; i++) {
          await callgrind(target.handle.pid, '-z');
          await load(REQUESTS);
          await callgrind(target.handle.pid, '-d');
          const dump = await lastDump(out);
          perRequest.push((dump.total - dump.compiler) / REQUESTS);
          compiler.push(dump.compiler / REQUESTS);
          mainThread.push(dump.mainThread / REQUESTS);
        }
        results.push({ target: name, shape, perRequest, mainThread });
        console.log(
          `${new Date().toISOString().slice(11, 19)} ${name.padEnd(8)} ${shape.padEnd(4)} ${perRequest.map(thousands).join(' / ')} instructions per request; main thread ${mainThread.map(thousands).join(' / ')}; optimising compiler (left out) ${compiler.map(thousands).join(' / ')}`,
        );
        if (opts.keep) await keepDumps(out, opts.keep, `${name}-${shape}`);
      } finally {
        await stdio?.close();
        await target.stop();
      }
    }
  }
  printTable();
} finally {
  await upstream.stop();
  await issuer.close();
  await rm(dir, { recursive: true, force: true });
}

/** valgrind in front of the target's node: instrumentation off until switched on, so start-up is quick. */
function valgrindArgs(out: string): string[] {
  return ['--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${out}.%p`, process.execPath];
}

async function startTarget(name: TargetName, upstreamOrigin: string, out: string): Promise<Target> {
  if (name === 'core') {
    const handle = await spawnReady('proxy core', 'valgrind', [...valgrindArgs(out), '--import', 'tsx', 'bench/servers/proxy-core.ts'], {
      env: { ...process.env, BENCH_TARGET: upstreamOrigin },
      ready: readyPort,
      readyTimeoutMs: 900_000,
    });
    return { handle, url: `http://127.0.0.1:${handle.readyValue as number}`, stop: () => handle.stop() };
  }
  const [node, ...nodeArgs] = valgrindArgs(out).reverse();
  const gateway = await startGatewayProcess(name, {
    upstreamOrigin,
    issuer: issuer.issuer,
    jwksUri: issuer.jwksUri,
    alg: 'ES256',
    runtime: 'dist',
    entry: resolve(opts.entry),
    node: 'valgrind',
    nodeArgs: [...nodeArgs.reverse(), node!],
    authOff: name === 'auth-off',
    extraRoutes: name === 'stdio' ? { 'stdio.yaml': stdioRouteYaml(issuer) } : undefined,
    readyTimeoutMs: 900_000,
    // Switching instrumentation on stalls the process for seconds: no timeout may cut a request meanwhile,
    // nor may the key set be fetched again (then under valgrind) while the batches run.
    extraConfig: [
      'limits: { header_timeout: 10m, request_timeout: 10m, keep_alive_timeout: 10m }',
      ...(opts['before-jwks-settings'] ? [] : ['jwks: { cache_max_age: 24h, fetch_timeout: 60s }']),
    ],
  });
  return { handle: gateway, url: gateway.url, stop: () => gateway.stop() };
}

async function callgrind(pid: number, ...args: string[]): Promise<void> {
  await run('callgrind_control', [...args, String(pid)]);
}

function thousands(n: number): string {
  return Math.round(n).toLocaleString('en');
}

/**
 * The newest dump of this target: its instructions, and those of V8's optimising compiler on its
 * background threads (tiering up as the warm-up ends; a one-off, left out of the figures).
 */
async function lastDump(out: string): Promise<{ total: number; compiler: number; mainThread: number }> {
  const base = out.slice(out.lastIndexOf('/') + 1);
  // Dumps on request are `<out>.<pid>.<n>`; `<out>.<pid>` is the one written at exit.
  const files = (await readdir(dir)).filter((f) => f.startsWith(`${base}.`) && /\.\d+\.\d+$/.test(f)).sort((a, b) => dumpIndex(a) - dumpIndex(b));
  const file = join(dir, files.at(-1)!);
  const match = /^(?:totals|summary): (\d+)/m.exec(await readFile(file, 'utf8'));
  if (!match) throw new Error(`no totals in ${file}`);
  const { stdout } = await run('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], { maxBuffer: 256 * 1024 * 1024 });
  const inclusive = (fn: string) => Number(new RegExp(`^\\s*([\\d,]+) .*${fn}`, 'm').exec(stdout)?.[1]?.replaceAll(',', '') ?? 0);
  return { total: Number(match[1]), compiler: inclusive('OptimizingCompileDispatcher::CompileTask::RunInternal'), mainThread: inclusive('deps/uv/src/unix/core.c:uv_run') };
}

function dumpIndex(file: string): number {
  return Number(/\.(\d+)$/.exec(file)?.[1] ?? 0);
}

async function keepDumps(out: string, into: string, label: string): Promise<void> {
  await mkdir(into, { recursive: true });
  const base = out.slice(out.lastIndexOf('/') + 1);
  for (const file of await readdir(dir)) if (file.startsWith(`${base}.`)) await copyFile(join(dir, file), join(into, `${label}.${file.slice(base.length + 1)}`));
}

/** b16: each connection walks the 16 users' tokens in its own fixed order, never the same token twice in a row. */
function rotation(tokens: readonly string[]) {
  return (connection: number, k: number) => tokens[(k * 7 + connection * 5) % tokens.length]!;
}

/** `count` POSTs over CONNECTIONS keep-alive connections, each connection one request at a time; throws on any non-200. */
function drive(url: string, tokenOf: (connection: number, k: number) => string, count: number): Promise<void> {
  return sendPosts(url, tokenOf, count, CONNECTIONS);
}

/** `count` event streams, one at a time, each on a new connection (as the sse phase opens them) and read to its end. */
async function openStreams(url: string, token: string, count: number): Promise<void> {
  for (let i = 0; i < count; i++) {
    await new Promise<void>((done, fail) => {
      const req = httpRequest(url, { headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` }, agent: false }, (res) => {
        res.resume();
        res.once('end', () => (res.statusCode === 200 ? done() : fail(new Error(`stream: status ${res.statusCode}`))));
      });
      req.once('error', fail);
      req.end();
    });
  }
}

function printTable(): void {
  const of = (target: string, shape: string) => results.find((r) => r.target === target && r.shape === shape);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(`\n| target | shape | instructions/request, median (batches of ${REQUESTS}) | main thread | ÷ proxy core |\n|---|---|---:|---:|---:|`);
  for (const r of results) {
    const core = of('core', r.shape);
    const ratio = core ? (median(r.perRequest) / median(core.perRequest)).toFixed(2) : '–';
    const spread = (xs: number[]) => `${thousands(median(xs))} (${thousands(Math.min(...xs))}–${thousands(Math.max(...xs))})`;
    console.log(`| ${r.target} | ${r.shape} | ${spread(r.perRequest)} | ${spread(r.mainThread)} | ${ratio} |`);
  }
}
