// node --import tsx bench/stdio-route.ts — what a stdio route costs: the real
// @modelcontextprotocol/server-memory reached directly (the SDK's
// StdioClientTransport, one process per session) and through the gateway's
// stdio route (StreamableHTTPClientTransport, JWT checked on every request, a
// process per session started by the gateway), interleaved in rounds in one
// run: tools/call latency and calls/s for one session and for 8 sessions of 8
// principals, CPU per call of the gateway process (its children separately),
// all read from /proc; then the processes and memory that idle sessions hold,
// and whether idle reaping gives them back. With bubblewrap at hand, the same
// route in a sandbox is a third target (STDIO_BENCH_SANDBOX=0 leaves it out).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { clockTicks, spawnReady } from './lib/processes.js';
import { gatewayCommand } from './lib/gateway.js';
import { median, percentile } from './lib/stats.js';

const ROUNDS = Number(process.env.STDIO_BENCH_ROUNDS ?? 5);
const CALLS = Number(process.env.STDIO_BENCH_CALLS ?? 200);
const SESSIONS = Number(process.env.STDIO_BENCH_SESSIONS ?? 8);
const IDLE_SESSIONS = Number(process.env.STDIO_BENCH_IDLE ?? 20);
/** STDIO_BENCH_PHASES: calls, idle or both (the default). */
const PHASES = (process.env.STDIO_BENCH_PHASES ?? 'calls,idle').split(',');
const IDLE_TIMEOUT_S = Number(process.env.STDIO_BENCH_IDLE_TIMEOUT ?? 60);

/** A port free now (taken by the child soon after; a race here only fails the run). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
const [GATEWAY_PORT, JWKS_PORT] = [await freePort(), await freePort()];
const ISS = `http://127.0.0.1:${JWKS_PORT}`;
const memoryScript = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-memory/dist/index.js');

// ---- /proc: a process tree's CPU ticks, process count and memory ----

interface ProcEntry {
  pid: number;
  ppid: number;
  ticks: number;
}

function readEntry(pid: string): ProcEntry | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { pid: Number(pid), ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) };
  } catch {
    return undefined;
  }
}

/** A process and every process below it (a sandbox's bwrap, its init and the server included). */
function tree(root: number): ProcEntry[] {
  const all = readdirSync('/proc').filter((e) => /^[0-9]+$/.test(e)).map(readEntry).filter((e): e is ProcEntry => e !== undefined);
  const out = all.filter((e) => e.pid === root);
  for (let i = 0; i < out.length; i++) out.push(...all.filter((e) => e.ppid === out[i]!.pid));
  return out;
}

/** CPU ticks of a process alone, and of everything below it. */
function cpuTicks(root: number): { own: number; children: number } {
  const entries = tree(root);
  const own = entries.find((e) => e.pid === root)?.ticks ?? 0;
  return { own, children: entries.reduce((sum, e) => sum + e.ticks, 0) - own };
}

/** Rss and Pss (shared pages divided among their users) in KiB; 0 when the process is gone. */
function memory(pid: number): { rss: number; pss: number } {
  try {
    const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+([0-9]+) kB$`, 'm').exec(text)?.[1] ?? 0);
    return { rss: field('Rss'), pss: field('Pss') };
  } catch {
    return { rss: 0, pss: 0 };
  }
}

function treeFootprint(root: number): { processes: number; rss: number; pss: number } {
  const entries = tree(root);
  const mems = entries.map((e) => memory(e.pid));
  return { processes: entries.length, rss: mems.reduce((s, m) => s + m.rss, 0), pss: mems.reduce((s, m) => s + m.pss, 0) };
}

// ---- the gateway, its token issuer and the clients ----

async function issuer(): Promise<{ token(path: string, sub: string): Promise<string>; close(): void }> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'bench', alg: 'ES256', use: 'sig' };
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
  await new Promise<void>((resolve) => server.listen(JWKS_PORT, '127.0.0.1', resolve));
  return { token: (path, sub) => sign(privateKey, path, sub), close: () => server.close() };
}

function sign(key: CryptoKey, path: string, sub: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ iss: ISS, sub, client_id: 'bench', scope: 'mcp:read', aud: `http://127.0.0.1:${GATEWAY_PORT}${path}`, iat: now, exp: now + 3600 })
    .setProtectedHeader({ alg: 'ES256', kid: 'bench', typ: 'at+jwt' })
    .sign(key);
}

/** bwrap present and allowed to make its namespaces here (a container may forbid them). */
function bubblewrapWorks(): boolean {
  if (process.env.STDIO_BENCH_SANDBOX === '0') return false;
  try {
    execFileSync('bwrap', ['--ro-bind', '/', '/', '--unshare-pid', '--die-with-parent', 'true'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

function routeYaml(path: string, idleTimeout: string, sandboxed: boolean): string {
  const stdio = {
    command: process.execPath,
    args: [memoryScript],
    env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' },
    max_processes: 40,
    idle_timeout: idleTimeout,
    ...(sandboxed && { sandbox: { kind: 'bubblewrap', readable: [dirname(dirname(dirname(dirname(memoryScript)))), dirname(process.execPath)], writable: [], network: false } }),
  };
  return `path: ${path}\nupstream: ${JSON.stringify({ stdio })}\nauthorization_servers: [${ISS}]\ntoken: { jwt: { issuer: ${ISS}, jwks_uri: ${ISS}/jwks.json, algorithms: [ES256] } }\nrequired_scopes: [mcp:read]\n`;
}

const ROUTES = { gateway: '/memory/mcp', sandboxed: '/memory-bwrap/mcp', idle: '/idle/mcp', idleSandboxed: '/idle-bwrap/mcp' } as const;

async function startGateway(dir: string, sandbox: boolean) {
  await writeFile(join(dir, 'gateway.yaml'), `listen: { host: 127.0.0.1, port: ${GATEWAY_PORT} }\npublic_url: http://127.0.0.1:${GATEWAY_PORT}\naudit: { sink: none }\nlog_level: warn\n`);
  await writeFile(join(dir, 'memory.yaml'), routeYaml(ROUTES.gateway, '10m', false));
  await writeFile(join(dir, 'idle.yaml'), routeYaml(ROUTES.idle, `${IDLE_TIMEOUT_S}s`, false));
  if (sandbox) {
    await writeFile(join(dir, 'memory-bwrap.yaml'), routeYaml(ROUTES.sandboxed, '10m', true));
    await writeFile(join(dir, 'idle-bwrap.yaml'), routeYaml(ROUTES.idleSandboxed, `${IDLE_TIMEOUT_S}s`, true));
  }
  // STDIO_BENCH_GATEWAY_NODE_ARGS: node options for the gateway alone (e.g. --cpu-prof --cpu-prof-dir=/tmp/prof).
  const nodeArgs = (process.env.STDIO_BENCH_GATEWAY_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const { args, runtime } = gatewayCommand();
  console.log(`gateway: ${runtime === 'dist' ? 'the build (dist/)' : 'the sources through tsx'}`);
  return spawnReady('gateway', process.execPath, [...nodeArgs, ...args, 'serve', '--config', dir], {
    probe: async () => ((await fetch(`http://127.0.0.1:${GATEWAY_PORT}/readyz`).catch(() => undefined))?.ok ? true : undefined),
    readyTimeoutMs: 120_000,
  });
}

interface Session {
  client: Client;
  /** The server process whose CPU a direct session costs (the gateway's sessions: the gateway's tree). */
  pid?: number;
  end(): Promise<void>;
}

async function directSession(dir: string, n: number): Promise<Session> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [memoryScript], env: { MEMORY_FILE_PATH: join(dir, `direct-${n}.jsonl`) }, stderr: 'ignore' });
  const client = new Client({ name: 'bench', version: '0' });
  await client.connect(transport);
  return { client, pid: transport.pid ?? undefined, end: () => client.close() };
}

async function gatewaySession(token: string, path: string): Promise<Session> {
  const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${GATEWAY_PORT}${path}`), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
  const client = new Client({ name: 'bench', version: '0' });
  await client.connect(transport);
  return {
    client,
    end: async () => {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    },
  };
}

// ---- the measurements ----

async function timeCalls(client: Client, n: number, out: number[]): Promise<void> {
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    await client.callTool({ name: 'search_nodes', arguments: { query: `q${i}` } });
    out.push(performance.now() - start);
  }
}

interface Tally {
  latencies: number[];
  calls: number;
  seconds: number;
  ownTicks: number;
  childTicks: number;
}
const emptyTally = (): Tally => ({ latencies: [], calls: 0, seconds: 0, ownTicks: 0, childTicks: 0 });

/** One round: every session calls `perSession` times at once; CPU from the gateway's tree, or the direct servers. */
async function round(sessions: Session[], perSession: number, gatewayPid: number, tally: Tally): Promise<void> {
  const direct = sessions[0]!.pid !== undefined;
  const cpu = () => (direct ? { own: 0, children: sessions.reduce((s, x) => s + (tree(x.pid!)[0]?.ticks ?? 0), 0) } : cpuTicks(gatewayPid));
  const before = cpu();
  const start = performance.now();
  await Promise.all(sessions.map((s) => timeCalls(s.client, perSession, tally.latencies)));
  tally.seconds += (performance.now() - start) / 1000;
  const after = cpu();
  tally.calls += perSession * sessions.length;
  tally.ownTicks += after.own - before.own;
  tally.childTicks += after.children - before.children;
}

type Targets = Record<string, Session[]>;

async function openTargets(count: number, dir: string, issue: (path: string, sub: string) => Promise<string>, sandbox: boolean): Promise<Targets> {
  const range = [...Array(count).keys()];
  const targets: Targets = {
    direct: await Promise.all(range.map((i) => directSession(dir, i))),
    gateway: await Promise.all(range.map(async (i) => gatewaySession(await issue(ROUTES.gateway, `user-${i}`), ROUTES.gateway))),
  };
  if (sandbox) targets.sandboxed = await Promise.all(range.map(async (i) => gatewaySession(await issue(ROUTES.sandboxed, `user-${i}`), ROUTES.sandboxed)));
  return targets;
}

async function measure(label: string, targets: Targets, gatewayPid: number): Promise<void> {
  const perSession = Math.max(1, Math.round(CALLS / Object.values(targets)[0]!.length));
  for (const sessions of Object.values(targets)) await round(sessions, Math.min(20, perSession), gatewayPid, emptyTally());
  const tallies = Object.fromEntries(Object.keys(targets).map((name) => [name, emptyTally()]));
  for (let r = 0; r < ROUNDS; r++) for (const [name, sessions] of Object.entries(targets)) await round(sessions, perSession, gatewayPid, tallies[name]!);
  report(label, tallies);
  for (const sessions of Object.values(targets)) await Promise.all(sessions.map((s) => s.end()));
}

function report(label: string, tallies: Record<string, Tally>): void {
  const us = (ticks: number, calls: number) => `${Math.round((ticks / clockTicks() / calls) * 1e6)}`.padStart(5);
  console.log(`\n${label}: tools/call search_nodes, ${ROUNDS} interleaved rounds, ${tallies.direct!.calls / ROUNDS} calls per round per target`);
  console.log('  target      p50 ms   p99 ms   calls/s   gateway CPU µs/call   children CPU µs/call');
  for (const [name, t] of Object.entries(tallies)) {
    const own = name === 'direct' ? '    -' : us(t.ownTicks, t.calls);
    console.log(`  ${name.padEnd(10)} ${median(t.latencies).toFixed(2).padStart(6)}   ${percentile(t.latencies, 99).toFixed(2).padStart(6)}   ${(t.calls / t.seconds).toFixed(0).padStart(7)}   ${own.padStart(19)}   ${us(t.childTicks, t.calls).padStart(20)}`);
  }
  const d = median(tallies.direct!.latencies);
  for (const name of Object.keys(tallies).filter((n) => n !== 'direct')) console.log(`  ${name} overhead p50 ${(median(tallies[name]!.latencies) - d).toFixed(2)} ms`);
}

async function idle(label: string, path: string, gatewayPid: number, issue: (path: string, sub: string) => Promise<string>): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 3000)); // the measured sessions' processes stopping
  const before = treeFootprint(gatewayPid);
  // All at once: opened one by one on a loaded machine, the first could be reaped before the last is open.
  const sessions = await Promise.all(
    [...Array(IDLE_SESSIONS).keys()].map(async (i) => {
      const s = await gatewaySession(await issue(path, `idle-${i}`), path);
      await s.client.callTool({ name: 'read_graph', arguments: {} });
      return s;
    }),
  );
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const open = treeFootprint(gatewayPid);
  const per = (a: number, b: number) => (a - b) / IDLE_SESSIONS;
  console.log(`\n${label}: ${IDLE_SESSIONS} idle sessions of ${IDLE_SESSIONS} principals (gateway + descendants, from /proc)`);
  console.log(`  before  ${before.processes} processes, Rss ${(before.rss / 1024).toFixed(1)} MiB, Pss ${(before.pss / 1024).toFixed(1)} MiB`);
  console.log(`  open    ${open.processes} processes, Rss ${(open.rss / 1024).toFixed(1)} MiB, Pss ${(open.pss / 1024).toFixed(1)} MiB`);
  console.log(`  per idle session: ${per(open.processes, before.processes).toFixed(2)} processes, Rss ${(per(open.rss, before.rss) / 1024).toFixed(1)} MiB, Pss ${(per(open.pss, before.pss) / 1024).toFixed(1)} MiB`);
  const start = performance.now();
  let now = open;
  while (now.processes > before.processes && performance.now() - start < (IDLE_TIMEOUT_S + 60) * 1000) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    now = treeFootprint(gatewayPid);
  }
  console.log(`  reaped  ${now.processes} processes, Rss ${(now.rss / 1024).toFixed(1)} MiB after ${((performance.now() - start) / 1000 + 2).toFixed(0)} s idle (idle_timeout ${IDLE_TIMEOUT_S} s)`);
  await Promise.all(sessions.map((s) => s.client.close()));
}

async function calls(dir: string, gatewayPid: number, issue: (path: string, sub: string) => Promise<string>, sandbox: boolean): Promise<void> {
  await measure('1 session', await openTargets(1, dir, issue, sandbox), gatewayPid);
  await measure(`${SESSIONS} sessions of ${SESSIONS} principals, all at once`, await openTargets(SESSIONS, dir, issue, sandbox), gatewayPid);
}

async function main(): Promise<void> {
  const jwt = await issuer();
  const dir = await mkdtemp(join(tmpdir(), 'mag-bench-stdio-'));
  const sandbox = bubblewrapWorks();
  const gateway = await startGateway(dir, sandbox);
  try {
    console.log(`load average at start: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}; sandbox target: ${sandbox ? 'yes' : 'no (bwrap unusable or STDIO_BENCH_SANDBOX=0)'}`);
    if (PHASES.includes('calls')) await calls(dir, gateway.pid, jwt.token, sandbox);
    if (PHASES.includes('idle')) {
      await idle('idle, unsandboxed', ROUTES.idle, gateway.pid, jwt.token);
      if (sandbox) await idle('idle, sandboxed', ROUTES.idleSandboxed, gateway.pid, jwt.token);
    }
    console.log(`\nload average at end: ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`);
  } finally {
    await gateway.stop();
    jwt.close();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
