// node --import tsx bench/sse-first-event.ts [--streams N] [--rounds N] [--concurrent N] [--entry FILE[,FILE2]]
//   [--cpu-prof DIR]   (the gateway under node --cpu-prof; its profile summarised over the measured streams)
// Where an event stream's first event waits, step by step: the bench's upstream (GET /stream,
// its events stamped with their send time), reached directly, through the proxy core
// (bench/servers/proxy-core.ts) and through the gateway (the build, JWT, as `npm run bench`
// runs it), each stream on a new connection as the sse phase opens them. The proxies run with
// bench/lib/step-probe.mjs, which stamps each step inside them on the same wall clock as
// the client and the upstream. --concurrent 1 (default) opens one stream at a time, so each step
// is that stream's own; --concurrent 5 opens them five at a time, as the sse phase does (then only
// the first-event times are reported: steps of concurrent streams overlap). Interleaved rounds;
// medians per step over all streams of a target. A second --entry (another build) is a target of its
// own, gateway-2, measured in the same rounds.
import { request } from 'node:http';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { audienceOf } from './lib/environment.js';
import { GATEWAY_PATHS, REQUIRED_SCOPE, UPSTREAM_CREDENTIAL, startGatewayProcess } from './lib/gateway.js';
import { summariseProfile } from './lib/cpu-profile.js';
import { clockTicks, readyPort, spawnReady } from './lib/processes.js';
import { median } from './lib/stats.js';
import { startIssuer } from './lib/tokens.js';

const { values: opts } = parseArgs({
  options: {
    streams: { type: 'string', default: '100' },
    rounds: { type: 'string', default: '3' },
    concurrent: { type: 'string', default: '1' },
    entry: { type: 'string', default: 'bin/mcp-auth-gateway.js' },
    'cpu-prof': { type: 'string' },
  },
});
const STREAMS = Number(opts.streams);
const ROUNDS = Number(opts.rounds);
const CONCURRENT = Number(opts.concurrent);
const PROBE = resolve('bench/lib/step-probe.mjs');
const wallClock = () => performance.timeOrigin + performance.now();

/** A process's own CPU seconds (utime + stime). */
function ownCpu(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / clockTicks();
}

interface ClientTiming {
  start: number;
  connected: number;
  head: number;
  firstEvent: number;
  /** The upstream's send stamp of the first event. */
  sent: number;
}

/** One stream on a new connection (as bench/lib/sse.ts opens them): the client's stamps; the stream is read to its end. */
function timeStream(url: string, headers: Record<string, string>): Promise<ClientTiming> {
  return new Promise((resolvePromise, reject) => {
    const t: Partial<ClientTiming> = { start: wallClock() };
    const req = request(url, { method: 'GET', headers: { accept: 'text/event-stream', ...headers }, agent: false }, (res) => {
      t.head = wallClock();
      let pending = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (t.firstEvent !== undefined) return;
        const arrived = wallClock();
        pending += chunk;
        const end = pending.indexOf('\n\n');
        if (end === -1) return;
        t.firstEvent = arrived;
        const data = pending.slice(0, end).split('\n').find((line) => line.startsWith('data: '))!;
        t.sent = (JSON.parse(data.slice(6)) as { params: { t: number } }).params.t;
      });
      res.once('end', () => (res.statusCode === 200 && t.firstEvent !== undefined ? resolvePromise(t as ClientTiming) : reject(new Error(`${url}: ${res.statusCode}`))));
      res.once('error', reject);
    });
    req.once('socket', (socket) => socket.once('connect', () => (t.connected = wallClock())));
    req.once('error', reject);
    req.end();
  });
}

type Probe = Partial<Record<'request' | 'upstreamCreate' | 'upstreamHeadSent' | 'upstreamHeadReceived' | 'headFlushed' | 'firstWrite', number>>;

const dir = await mkdtemp(join(tmpdir(), 'mag-first-event-'));
// Three events 5 ms apart: the first is what is timed; short streams keep the run short.
const upstream = await spawnReady('upstream', process.execPath, ['--import', 'tsx', 'bench/servers/upstream.ts'], {
  env: { ...process.env, BENCH_UPSTREAM_CREDENTIAL: UPSTREAM_CREDENTIAL, BENCH_SSE_EVENTS: '3', BENCH_SSE_INTERVAL_MS: '5' },
  ready: readyPort,
});
const upstreamUrl = `http://127.0.0.1:${upstream.readyValue as number}`;
const issuer = await startIssuer('ES256', `${REQUIRED_SCOPE} mcp:write`);
const probeEnv = (name: string) => ({ BENCH_PROBE_FILE: join(dir, `${name}.jsonl`), BENCH_PROBE_PATH: GATEWAY_PATHS.stream });
const core = await spawnReady('proxy core', process.execPath, ['--import', PROBE, '--import', 'tsx', 'bench/servers/proxy-core.ts'], {
  env: { ...process.env, BENCH_TARGET: upstreamUrl, ...probeEnv('core') },
  ready: readyPort,
});
const entries = opts.entry.split(',');
const gateways = await Promise.all(
  entries.map((entry, i) =>
    startGatewayProcess(i === 0 ? 'gateway' : `gateway-${i + 1}`, {
      upstreamOrigin: upstreamUrl,
      issuer: issuer.issuer,
      jwksUri: issuer.jwksUri,
      alg: 'ES256',
      runtime: 'dist',
      entry: resolve(entry),
      nodeArgs: ['--import', PROBE],
      env: probeEnv(i === 0 ? 'gateway' : `gateway-${i + 1}`),
      ...(opts['cpu-prof'] && i === 0 ? { cpuProfileDir: resolve(opts['cpu-prof']) } : {}),
    }),
  ),
);
const token = await issuer.mint(audienceOf(GATEWAY_PATHS.stream), 'first-event');
const targets: { name: string; url: string; headers: Record<string, string> }[] = [
  { name: 'direct', url: `${upstreamUrl}${GATEWAY_PATHS.stream}`, headers: {} },
  { name: 'core', url: `http://127.0.0.1:${core.readyValue as number}${GATEWAY_PATHS.stream}`, headers: { authorization: `Bearer ${token}` } },
  ...gateways.map((g, i) => ({ name: i === 0 ? 'gateway' : `gateway-${i + 1}`, url: `${g.url}${GATEWAY_PATHS.stream}`, headers: { authorization: `Bearer ${token}` } })),
];
const timings = new Map<string, ClientTiming[]>(targets.map((t) => [t.name, []]));
/** CPU seconds of the process a target's streams went through (direct: the upstream), over the measured streams. */
const pidOf: Record<string, number> = { direct: upstream.pid, core: core.pid, ...Object.fromEntries(gateways.map((g, i) => [i === 0 ? 'gateway' : `gateway-${i + 1}`, g.pid])) };
const cpu = new Map<string, number>(targets.map((t) => [t.name, 0]));
let window: { startUs: number; endUs: number } | undefined;
const batchMedians = new Map<string, number[]>(targets.map((t) => [t.name, []]));

try {
  // Warm-up, not recorded: the route's first token check, JIT, the proxies' upstream connections.
  for (const target of targets) for (let i = 0; i < 50; i++) await timeStream(target.url, target.headers);
  const startUs = Number(process.hrtime.bigint() / 1000n);
  for (let round = 1; round <= ROUNDS; round++) {
    for (const target of targets) {
      const before = ownCpu(pidOf[target.name]!);
      for (let i = 0; i < STREAMS; i += CONCURRENT) {
        const batch = await Promise.all(Array.from({ length: CONCURRENT }, () => timeStream(target.url, target.headers)));
        timings.get(target.name)!.push(...batch);
        batchMedians.get(target.name)!.push(median(batch.map((t) => t.firstEvent - t.start)));
      }
      cpu.set(target.name, cpu.get(target.name)! + ownCpu(pidOf[target.name]!) - before);
    }
  }
  window = { startUs, endUs: Number(process.hrtime.bigint() / 1000n) };
  for (const proc of [core, ...gateways]) process.kill(proc.pid, 'SIGUSR2');
  await new Promise((r) => setTimeout(r, 500));
  const probes = async (name: string): Promise<Probe[]> => (await readFile(join(dir, `${name}.jsonl`), 'utf8')).trim().split('\n').map((l) => JSON.parse(l) as Probe);
  const proxies = targets.filter((t) => t.name !== 'direct').map((t) => t.name);
  const recorded = Object.fromEntries(await Promise.all(proxies.map(async (name) => [name, await probes(name)] as const)));

  const ms = (v: number) => v.toFixed(3).padStart(8);
  console.log(`${ROUNDS} rounds × ${STREAMS} streams per target, ${CONCURRENT} at a time, each on a new connection; medians in ms`);
  console.log(`first event (request start → first event), median of per-batch medians:`);
  for (const target of targets) {
    const perStream = (cpu.get(target.name)! * 1e6) / (ROUNDS * STREAMS);
    console.log(`  ${target.name.padEnd(8)} ${ms(median(batchMedians.get(target.name)!))}   CPU of ${target.name === 'direct' ? 'the upstream' : 'the proxy'} ${perStream.toFixed(0)} µs per stream (/proc, 3 events each)`);
  }
  if (CONCURRENT === 1) {
    console.log('\nstep by step (each stream one at a time; the proxies\' steps from their probe):');
    const direct = timings.get('direct')!;
    console.log(`  direct:  client → upstream's first write ${ms(median(direct.map((t) => t.sent - t.start)))}, → client has it ${ms(median(direct.map((t) => t.firstEvent - t.sent)))}`);
    for (const name of proxies) {
      const client = timings.get(name)!;
      // The last client timings: the probe also stamped the warm-up streams, which came first.
      const probe = recorded[name]!.slice(-client.length);
      const step = (f: (c: ClientTiming, p: Probe) => number | undefined) => {
        const values = client.map((c, i) => f(c, probe[i]!)).filter((v): v is number => typeof v === 'number' && !Number.isNaN(v));
        return values.length > 0 ? ms(median(values)) : '       –';
      };
      console.log(`  ${name}:`);
      console.log(`    client start → connected                       ${step((c) => c.connected - c.start)}`);
      console.log(`    connected → proxy has the request              ${step((c, p) => p.request! - c.connected)}`);
      console.log(`    request → upstream request created             ${step((_, p) => p.upstreamCreate! - p.request!)}`);
      console.log(`    created → upstream head written                ${step((_, p) => p.upstreamHeadSent! - p.upstreamCreate!)}`);
      console.log(`    head written → upstream's first write          ${step((c, p) => c.sent - p.upstreamHeadSent!)}`);
      console.log(`    upstream's first write → proxy has its head    ${step((c, p) => p.upstreamHeadReceived! - c.sent)}`);
      console.log(`    head received → head flushed to client         ${step((_, p) => (p.headFlushed === undefined ? undefined : p.headFlushed - p.upstreamHeadReceived!))}`);
      console.log(`    head received → first write to client          ${step((_, p) => p.firstWrite! - p.upstreamHeadReceived!)}`);
      console.log(`    first write → client has the event             ${step((c, p) => c.firstEvent - p.firstWrite!)}`);
      console.log(`    client: head → event                           ${step((c) => c.firstEvent - c.head)}`);
      console.log(`    total                                          ${step((c) => c.firstEvent - c.start)}`);
    }
  }
} finally {
  for (const g of gateways) await g.stop();
  await core.stop();
  await upstream.stop();
  await issuer.close();
  await rm(dir, { recursive: true, force: true });
}

// The gateway's profile over the measured streams only: its own functions including callees, per stream.
if (opts['cpu-prof'] && window) {
  const profileDir = resolve(opts['cpu-prof']);
  const file = (await readdir(profileDir)).filter((f) => f.endsWith('.cpuprofile')).sort().at(-1)!;
  const summary = summariseProfile(join(profileDir, file), window, 40);
  const perStream = (msValue: number) => ((msValue * 1000) / (ROUNDS * STREAMS)).toFixed(1).padStart(7);
  console.log(`\ngateway profile (${file}), measured streams only: ${perStream(summary.busyMs)} µs busy per stream (all targets' rounds: the gateway idles during the others')`);
  console.log('areas, µs per gateway stream:');
  for (const a of summary.areas.slice(0, 20)) console.log(`  ${perStream(a.ms)}  ${a.name}`);
  console.log('gateway functions including callees, µs per gateway stream:');
  for (const g of summary.gatewayInclusive.slice(0, 40)) console.log(`  ${perStream(g.ms)}  ${g.name}`);
}
