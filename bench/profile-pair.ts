// node --import tsx bench/profile-pair.ts [--targets auth-off,jwt] [--shape a|b16] [--warmup N]
//   [--requests N] [--connections N] [--entry FILE] [--out DIR] [--top N]
// The gateway's targets side by side under the same fixed, light load (bench/lib/sequential-posts.ts:
// N keep-alive connections, one request at a time each), each in its own process under
// `node --cpu-prof`: per target, CPU µs per request (/proc, the measured requests only) and the
// profile's self time by function and by area in µs per request, only samples taken while the
// measured requests ran. Light enough for a shared machine (no wrk); the profile's shares, not
// the µs, are what carry across loads. Then, per function, target 2 minus target 1.
import { mkdtemp, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { audienceOf } from './lib/environment.js';
import { summariseProfile } from './lib/cpu-profile.js';
import { GATEWAY_PATHS, REQUIRED_SCOPE, UPSTREAM_CREDENTIAL, startGatewayProcess } from './lib/gateway.js';
import { cpuSeconds, readyPort, spawnReady } from './lib/processes.js';
import { sendPosts } from './lib/sequential-posts.js';
import { startIssuer } from './lib/tokens.js';

const { values: opts } = parseArgs({
  options: {
    targets: { type: 'string', default: 'auth-off,jwt' },
    shape: { type: 'string', default: 'a' },
    warmup: { type: 'string', default: '10000' },
    requests: { type: 'string', default: '20000' },
    connections: { type: 'string', default: '8' },
    entry: { type: 'string', default: 'bin/mcp-auth-gateway.js' },
    out: { type: 'string' },
    top: { type: 'string', default: '30' },
  },
});
const REQUESTS = Number(opts.requests);
const CONNECTIONS = Number(opts.connections);
const TOP = Number(opts.top);

const upstream = await spawnReady('upstream', process.execPath, ['--import', 'tsx', 'bench/servers/upstream.ts'], {
  env: { ...process.env, BENCH_UPSTREAM_CREDENTIAL: UPSTREAM_CREDENTIAL, BENCH_UPSTREAM_KEEP_ALIVE_MS: '3600000' },
  ready: readyPort,
});
const issuer = await startIssuer('ES256', `${REQUIRED_SCOPE} mcp:write`);
const outDir = opts.out ? resolve(opts.out) : await mkdtemp(join(tmpdir(), 'mag-profile-pair-'));
const bySelf: Map<string, number>[] = [];
try {
  const audience = audienceOf(GATEWAY_PATHS.mcp);
  const single = await issuer.mint(audience, 'pair');
  const users = await issuer.mintMany(audience, 16, 'pair-b16');
  const tokenOf = opts.shape === 'b16' ? (c: number, k: number) => users[(k * 7 + c * 5) % users.length]! : () => single;
  for (const name of opts.targets.split(',')) {
    const profileDir = join(outDir, name);
    const gateway = await startGatewayProcess(name, {
      upstreamOrigin: `http://127.0.0.1:${upstream.readyValue as number}`,
      issuer: issuer.issuer,
      jwksUri: issuer.jwksUri,
      alg: 'ES256',
      runtime: 'dist',
      entry: resolve(opts.entry),
      cpuProfileDir: profileDir,
      authOff: name === 'auth-off',
    });
    const url = `${gateway.url}${GATEWAY_PATHS.mcp}`;
    let window;
    let cpu = 0;
    try {
      await sendPosts(url, tokenOf, Number(opts.warmup), CONNECTIONS);
      const startUs = Number(process.hrtime.bigint() / 1000n);
      const before = cpuSeconds(gateway.pid) ?? 0;
      await sendPosts(url, tokenOf, REQUESTS, CONNECTIONS);
      cpu = (cpuSeconds(gateway.pid) ?? 0) - before;
      window = { startUs, endUs: Number(process.hrtime.bigint() / 1000n) };
    } finally {
      await gateway.stop();
    }
    const file = join(profileDir, (await readdir(profileDir)).find((f) => f.endsWith('.cpuprofile'))!);
    const summary = summariseProfile(file, window, 100_000);
    const perRequest = (ms: number) => ((ms * 1000) / REQUESTS).toFixed(2);
    console.log(`\n## ${name}, shape ${opts.shape}: ${((cpu * 1e6) / REQUESTS).toFixed(1)} µs CPU per request (/proc), ${perRequest(summary.busyMs)} µs busy JavaScript thread per request (profile, ${summary.idlePct} % idle); ${file}`);
    console.log('\nareas (µs/req):');
    for (const a of summary.areas.slice(0, TOP)) console.log(`  ${perRequest(a.ms).padStart(7)}  ${a.name}`);
    console.log('\ngateway functions including callees (µs/req):');
    for (const g of summary.gatewayInclusive.slice(0, TOP)) console.log(`  ${perRequest(g.ms).padStart(7)}  ${g.name}`);
    bySelf.push(new Map(summary.topSelf.map((e) => [e.name, (e.ms * 1000) / REQUESTS])));
  }
  if (bySelf.length === 2) {
    const [first, second] = bySelf as [Map<string, number>, Map<string, number>];
    const names = new Set([...first.keys(), ...second.keys()]);
    const diff = [...names].map((n) => [n, (second.get(n) ?? 0) - (first.get(n) ?? 0)] as const).sort((a, b) => Math.abs(b[1]) - Math.abs(a[1]));
    console.log(`\nself time by function, second target − first (µs/req), the ${TOP} largest differences:`);
    for (const [n, d] of diff.slice(0, TOP)) console.log(`  ${d.toFixed(2).padStart(7)}  ${n}`);
  }
} finally {
  await upstream.stop();
  await issuer.close();
}
