// node --import tsx bench/aggregate-cpu.ts [--rounds N] [--calls N] [--profile DIR] [--entry FILE]
// The aggregate phase's set-up (bench/lib/aggregate-phase.ts: one gateway, the build, with an
// aggregated route of server-everything over HTTP and server-memory and server-filesystem over
// stdio, and each alone on a route of its own) under a light fixed load: per route, interleaved
// rounds of sequential tools/list, the gateway's CPU per list (/proc, 10 ms ticks: read it over
// hundreds of lists) and the p50. CPU per list does not depend on the machine's load the way a
// latency does, so a change to the merged list's path can be measured on a shared host; with
// --profile DIR the gateway runs under `node --cpu-prof` and the profile's summary (self time by
// function and area, gateway functions with their callees) is printed too.
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { freePort } from '../test/helpers/net.js';
import { startLocalIssuer } from '../test/helpers/local-issuer.js';
import { serverBin } from '../test/helpers/stdio-stage.js';
import { startEverythingServer } from '../test/helpers/upstream.js';
import { summariseProfile } from './lib/cpu-profile.js';
import { MCP_HEADERS } from './lib/load.js';
import { cpuSeconds, spawnReady } from './lib/processes.js';
import { percentile } from './lib/stats.js';

const { values: opts } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    calls: { type: 'string', default: '150' },
    profile: { type: 'string' },
    entry: { type: 'string', default: 'bin/mcp-auth-gateway.js' },
    top: { type: 'string', default: '30' },
  },
});
const ROUNDS = Number(opts.rounds);
const CALLS = Number(opts.calls);
const ALL = '/all/mcp';

const [everything, issuer, port, root] = await Promise.all([startEverythingServer(), startLocalIssuer(), freePort(), mkdtemp(join(tmpdir(), 'mag-agg-cpu-root-'))]);
const origin = `http://127.0.0.1:${port}`;
const upstreams: Record<string, unknown> = {
  everything: { upstream: everything.url },
  memory: { upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } },
  files: { upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-filesystem'), root] } } },
};
const dir = await mkdtemp(join(tmpdir(), 'mag-agg-cpu-'));
const json = (value: unknown) => JSON.stringify(value) + '\n';
await writeFile(join(dir, 'gateway.yaml'), json({ listen: { host: '127.0.0.1', port }, public_url: origin, audit: { sink: 'none' }, log_level: 'info' }));
const common = { authorization_servers: [issuer.issuer], token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['ES256'] } }, scopes_supported: ['mcp:read'], required_scopes: ['mcp:read'] };
await writeFile(join(dir, 'all.yaml'), json({ path: ALL, upstreams, ...common }));
for (const [name, entry] of Object.entries(upstreams)) await writeFile(join(dir, `${name}.yaml`), json({ path: `/${name}/mcp`, ...(entry as object), ...common }));

const profileDir = opts.profile ? resolve(opts.profile) : undefined;
const gateway = await spawnReady('gateway-aggregate', process.execPath, [...(profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []), resolve(opts.entry), 'serve', '--config', dir], {
  env: { PATH: process.env.PATH, HOME: process.env.HOME },
  ready: (line) => (line.includes('"gateway listening"') ? true : undefined),
  readyTimeoutMs: 60_000,
});
let window: { startUs: number; endUs: number } | undefined;
try {
  const paths = [ALL, ...Object.keys(upstreams).map((name) => `/${name}/mcp`)];
  const sessions = await Promise.all(paths.map(async (path) => openSession(`${origin}${path}`, await issuer.token({ audience: `${origin}${path}`, sub: 'bench-aggregate', scope: 'mcp:read' }))));
  // Warm-up: each route's lists once as many times as a round asks, unmeasured.
  for (const s of sessions) await lists(s, CALLS);
  const cpu = new Map<string, number[]>(paths.map((p) => [p, []]));
  const p50 = new Map<string, number[]>(paths.map((p) => [p, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (let k = 0; k < sessions.length; k++) {
      const i = (k + round) % sessions.length;
      const before = cpuSeconds(gateway.pid) ?? 0;
      const ms = await lists(sessions[i]!, CALLS);
      cpu.get(paths[i]!)!.push((((cpuSeconds(gateway.pid) ?? 0) - before) * 1e6) / CALLS);
      p50.get(paths[i]!)!.push(percentile(ms, 50));
    }
  }
  // The profile's window: the merged route alone, as many lists as the rounds asked of it.
  const startUs = Number(process.hrtime.bigint() / 1000n);
  if (profileDir) await lists(sessions[0]!, ROUNDS * CALLS);
  window = { startUs, endUs: Number(process.hrtime.bigint() / 1000n) };
  console.log(`\n| route | gateway CPU µs per tools/list, per round | p50 ms, per round |\n|---|---|---|`);
  for (const p of paths) console.log(`| ${p} | ${cpu.get(p)!.map((x) => Math.round(x).toLocaleString('en')).join(' / ')} | ${p50.get(p)!.map((x) => x.toFixed(2)).join(' / ')} |`);
} finally {
  await gateway.stop();
  await Promise.allSettled([everything.close(), issuer.close(), rm(dir, { recursive: true, force: true }), rm(root, { recursive: true, force: true })]);
}
if (profileDir && window) {
  const file = join(profileDir, (await readdir(profileDir)).filter((f) => f.endsWith('.cpuprofile')).sort().at(-1)!);
  const summary = summariseProfile(file, window, Number(opts.top));
  const merged = (ROUNDS * CALLS) / 1000;
  const per = (ms: number) => (ms / merged).toFixed(1);
  console.log(`\nprofile ${file}: ${summary.idlePct} % idle; ${per(summary.busyMs)} µs busy per merged tools/list (${ROUNDS * CALLS} lists after the rounds)`);
  console.log('\nareas:');
  for (const a of summary.areas.slice(0, Number(opts.top))) console.log(`  ${per(a.ms).padStart(8)}  ${a.pct.toFixed(1).padStart(5)} %  ${a.name}`);
  console.log('\nself, by function:');
  for (const e of summary.topSelf.slice(0, Number(opts.top))) console.log(`  ${per(e.ms).padStart(8)}  ${e.pct.toFixed(1).padStart(5)} %  ${e.name}`);
  console.log('\ngateway functions including callees:');
  for (const g of summary.gatewayInclusive.slice(0, Number(opts.top))) console.log(`  ${per(g.ms).padStart(8)}  ${g.pct.toFixed(1).padStart(5)} %  ${g.name}`);
}

interface Session {
  url: string;
  headers: Record<string, string>;
}

async function openSession(url: string, token: string): Promise<Session> {
  const headers: Record<string, string> = { ...MCP_HEADERS, authorization: `Bearer ${token}` };
  const init = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } }) });
  await init.text();
  const id = init.headers.get('mcp-session-id');
  if (!init.ok || !id) throw new Error(`initialize on ${url} answered ${init.status}`);
  const session = { url, headers: { ...headers, 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' } };
  await (await fetch(url, { method: 'POST', headers: session.headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();
  return session;
}

/** `calls` sequential tools/list: each one's time; throws on an answer that is not a list. */
async function lists(session: Session, calls: number): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 1; i <= calls; i++) {
    const started = performance.now();
    const res = await fetch(session.url, { method: 'POST', headers: session.headers, body: JSON.stringify({ jsonrpc: '2.0', id: i, method: 'tools/list' }) });
    const body = await res.text();
    ms.push(performance.now() - started);
    if (!res.ok || !body.includes('"tools"')) throw new Error(`${session.url}: tools/list answered ${res.status}`);
  }
  return ms;
}
