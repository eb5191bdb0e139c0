// node --import tsx bench/alloc-profile.ts [entry|core] [a|b16] [seconds]:
// what one request allocates, in bytes, by allocating function. The gateway
// build (default bin/mcp-auth-gateway.js) or the proxy core under wrk (or
// autocannon), 32 connections, in shape a or b16; a V8 sampling allocation
// profile is taken over the load run only (bench/lib/alloc-sampler.mjs).
// Bytes per request hardly depend on the machine's load, unlike CPU time,
// which makes this the measure to compare builds on a busy machine.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { audienceOf } from './lib/environment.js';
import { GATEWAY_PATHS, REQUIRED_SCOPE, UPSTREAM_CREDENTIAL, startGatewayProcess } from './lib/gateway.js';
import { MCP_HEADERS } from './lib/load.js';
import { chooseLoader } from './lib/loader.js';
import { readyPort, spawnReady } from './lib/processes.js';
import { TokenFeed } from './lib/token-feed.js';
import { startIssuer } from './lib/tokens.js';

interface ProfileNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: ProfileNode[];
}

const [entry = 'bin/mcp-auth-gateway.js', shape = 'b16', seconds = '8'] = process.argv.slice(2);
const dir = await mkdtemp(join(tmpdir(), 'mag-alloc-'));
const file = join(dir, 'alloc.heapprofile');
const sampler = ['--import', resolve('bench/lib/alloc-sampler.mjs')];
const upstream = await spawnReady('upstream', process.execPath, ['--import', 'tsx', 'bench/servers/upstream.ts'], {
  env: { ...process.env, BENCH_UPSTREAM_CREDENTIAL: UPSTREAM_CREDENTIAL },
  ready: readyPort,
});
const issuer = await startIssuer('ES256', `${REQUIRED_SCOPE} mcp:write`);
try {
  const upstreamOrigin = `http://127.0.0.1:${upstream.readyValue as number}`;
  const target = entry === 'core' ? await startCore(upstreamOrigin) : await startGateway(upstreamOrigin);
  const audience = audienceOf(GATEWAY_PATHS.mcp);
  const tokens = shape === 'b16' ? new TokenFeed('rotate', await issuer.mintMany(audience, 16, 'alloc-b16')) : undefined;
  const load = { name: entry, url: `${target.url}${GATEWAY_PATHS.mcp}`, headers: { ...MCP_HEADERS, authorization: `Bearer ${await issuer.mint(audience, 'alloc')}` }, pid: target.pid, ...(tokens ? { tokens } : {}) };
  const loader = chooseLoader('auto', 2);
  await loader.run(load, { connections: 32, durationSec: 2 });
  process.kill(target.pid, 'SIGUSR2');
  const sample = await loader.run(load, { connections: 32, durationSec: Number(seconds) });
  process.kill(target.pid, 'SIGUSR2');
  await waitForFile(file);
  await target.stop();
  const head = (JSON.parse(await readFile(file, 'utf8')) as { head: ProfileNode }).head;
  console.log(`${entry}, shape ${shape}: ${sample.requests} requests at ${Math.round(sample.requestsPerSec)} req/s`);
  console.log(summary(head, sample.requests));
} finally {
  await upstream.stop();
  await issuer.close();
  await rm(dir, { recursive: true, force: true });
}

function startGateway(upstreamOrigin: string) {
  return startGatewayProcess('gateway', {
    upstreamOrigin,
    issuer: issuer.issuer,
    jwksUri: issuer.jwksUri,
    alg: 'ES256',
    runtime: 'dist',
    entry: resolve(entry),
    nodeArgs: sampler,
    env: { MAG_ALLOC_PROFILE: file },
  });
}

async function startCore(upstreamOrigin: string) {
  const core = await spawnReady('proxy core', process.execPath, [...sampler, '--import', 'tsx', 'bench/servers/proxy-core.ts'], {
    env: { ...process.env, BENCH_TARGET: upstreamOrigin, MAG_ALLOC_PROFILE: file },
    ready: readyPort,
  });
  return Object.assign(core, { url: `http://127.0.0.1:${core.readyValue as number}` });
}

async function waitForFile(path: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await readFile(path).then(() => true, () => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`no allocation profile was written to ${path}`);
}

/** Bytes per request: in all, by the gateway's own functions (its build or sources), and the largest allocating functions. */
function summary(head: ProfileNode, requests: number): string {
  const bySite = new Map<string, number>();
  let total = 0;
  let own = 0;
  const walk = (node: ProfileNode) => {
    const { functionName, url, lineNumber } = node.callFrame;
    const site = `${functionName || '(anonymous)'} ${url.replace(/^.*\/(node_modules|dist|src|bench)\//, '$1/')}:${lineNumber + 1}`;
    total += node.selfSize;
    if (/\/(dist|src)\//.test(url) && !url.includes('node_modules')) own += node.selfSize;
    bySite.set(site, (bySite.get(site) ?? 0) + node.selfSize);
    node.children.forEach(walk);
  };
  walk(head);
  const perRequest = (bytes: number) => `${Math.round(bytes / requests)} B`;
  const top = [...bySite].sort((a, b) => b[1] - a[1]).slice(0, 25);
  return [
    `allocated per request: ${perRequest(total)}, by the gateway's own functions ${perRequest(own)}`,
    ...top.map(([site, bytes]) => `  ${perRequest(bytes).padStart(8)}  ${site}`),
  ].join('\n');
}
