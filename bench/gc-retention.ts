// node --import tsx bench/gc-retention.ts [--target auth-off|jwt] [--warmup N] [--requests N]
//   [--connections N] [--snapshots DIR] [--entry FILE]
// What a target keeps per request (issue 23): the gateway under `--trace-gc`, warmed up, then a
// fixed number of `tools/call` POSTs; the report counts scavenges and mark-compacts in the measured
// part and the old generation's growth between them. With --snapshots DIR, heap snapshots are
// written (SIGUSR2) after half and all of the measured requests, for comparison by constructor.
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { audienceOf } from './lib/environment.js';
import { GATEWAY_PATHS, REQUIRED_SCOPE, UPSTREAM_CREDENTIAL, startGatewayProcess } from './lib/gateway.js';
import { sendPosts } from './lib/sequential-posts.js';
import { readyPort, spawnReady } from './lib/processes.js';
import { startIssuer } from './lib/tokens.js';

const { values: opts } = parseArgs({
  options: {
    target: { type: 'string', default: 'auth-off' },
    requests: { type: 'string', default: '20000' },
    warmup: { type: 'string', default: '5000' },
    connections: { type: 'string', default: '8' },
    entry: { type: 'string', default: 'bin/mcp-auth-gateway.js' },
    snapshots: { type: 'string' },
    promoted: { type: 'string' },
  },
});
const CONNECTIONS = Number(opts.connections);

const upstream = await spawnReady('upstream', process.execPath, ['--import', 'tsx', 'bench/servers/upstream.ts'], {
  env: { ...process.env, BENCH_UPSTREAM_CREDENTIAL: UPSTREAM_CREDENTIAL, BENCH_UPSTREAM_KEEP_ALIVE_MS: '3600000' },
  ready: readyPort,
});
const issuer = await startIssuer('ES256', `${REQUIRED_SCOPE} mcp:write`);
const gcLines: string[] = [];
try {
  const token = await issuer.mint(audienceOf(GATEWAY_PATHS.mcp), 'gc');
  const gateway = await startGatewayProcess(opts.target, {
    upstreamOrigin: `http://127.0.0.1:${upstream.readyValue as number}`,
    issuer: issuer.issuer,
    jwksUri: issuer.jwksUri,
    alg: 'ES256',
    runtime: 'dist',
    entry: resolve(opts.entry),
    nodeArgs: ['--trace-gc', ...diagnosticArgs()],
    env: opts.promoted ? { MAG_ALLOC_PROFILE: resolve(opts.promoted), MAG_ALLOC_MINOR: '0' } : {},
    authOff: opts.target === 'auth-off',
  });
  gateway.child.stdout!.on('data', (chunk: string) => gcLines.push(...chunk.split('\n').filter((l) => l.includes('ms: '))));
  try {
    const url = `${gateway.url}${GATEWAY_PATHS.mcp}`;
    await drive(url, token, Number(opts.warmup));
    const half = Math.floor(Number(opts.requests) / 2);
    gcLines.length = 0;
    if (opts.promoted) process.kill(gateway.pid, 'SIGUSR2');
    await drive(url, token, half);
    if (opts.snapshots) await snapshot(gateway.pid);
    await drive(url, token, Number(opts.requests) - half);
    if (opts.snapshots) await snapshot(gateway.pid);
    if (opts.promoted) process.kill(gateway.pid, 'SIGUSR2');
    report();
    if (opts.promoted) await new Promise((done) => setTimeout(done, 5_000));
  } finally {
    await gateway.stop();
  }
} finally {
  await upstream.stop();
  await issuer.close();
}

/** Heap snapshots on SIGUSR2, or the sampling profile of what survives scavenges (bench/lib/alloc-sampler.mjs). */
function diagnosticArgs(): string[] {
  if (opts.snapshots) return ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${opts.snapshots}`];
  return opts.promoted ? ['--import', resolve('bench/lib/alloc-sampler.mjs')] : [];
}

/** SIGUSR2 writes a snapshot synchronously in the target; wait until it answers again. */
async function snapshot(pid: number): Promise<void> {
  process.kill(pid, 'SIGUSR2');
  await new Promise((done) => setTimeout(done, 15_000));
}

function report(): void {
  const scavenges = gcLines.filter((l) => l.includes('Scavenge')).length;
  const markCompacts = gcLines.filter((l) => l.includes('Mark-Compact'));
  for (const line of gcLines) console.log(line.trim());
  console.log(`\n${opts.target}: ${opts.requests} requests: ${scavenges} scavenges, ${markCompacts.length} mark-compacts`);
}

function drive(url: string, bearer: string, count: number): Promise<void> {
  return sendPosts(url, () => bearer, count, CONNECTIONS);
}
