import { startEnvironment } from './lib/environment.js';
import { parseOptions } from './lib/options.js';
import { startGatewayProcess } from './lib/gateway.js';
import { readyPort, spawnReady } from './lib/processes.js';
import { runLoad, MCP_HEADERS } from './lib/load.js';
import { spread } from './lib/stats.js';
const env = await startEnvironment(parseOptions(['--smoke']));
const extra: { stop(): Promise<void> }[] = [];
try {
  const floor = await spawnReady('floor', process.execPath, ['/tmp/mag-ab/floor/server.mjs'], { env: { ...process.env, BENCH_TARGET: env.upstream.url }, ready: readyPort });
  extra.push(floor);
  const variants = (process.env.VARIANTS ?? 'all').split(',');
  const gws = [];
  for (const v of variants) { const g = await startGatewayProcess(v, { upstreamOrigin: env.upstream.url, issuer: env.issuer.issuer, jwksUri: env.issuer.jwksUri, alg: 'RS256', runtime: 'dist', entry: `/tmp/mag-ab/${v}/bin/mcp-auth-gateway.js` }); extra.push(g); gws.push(g); }
  const token = await env.tokenFor('/mcp');
  const auth = { ...MCP_HEADERS, authorization: `Bearer ${token}` };
  const targets = [
    { name: 'http-proxy', url: `${env.httpProxy.url}/mcp`, headers: { ...MCP_HEADERS }, pid: env.httpProxy.pid },
    { name: 'undici-floor', url: `http://127.0.0.1:${floor.readyValue}/mcp`, headers: { ...MCP_HEADERS }, pid: floor.pid },
    { name: 'gateway', url: `${env.gateway.url}/mcp`, headers: auth, pid: env.gateway.pid },
    ...gws.map((g, i) => ({ name: `gw-${variants[i]}`, url: `${g.url}/mcp`, headers: auth, pid: g.pid })),
  ];
  const res = new Map(targets.map((t) => [t.name, [] as { rps: number; cpu: number }[]]));
  for (const t of targets) await runLoad(t, { connections: 32, durationSec: 1.5 });
  const rounds = Number(process.env.ROUNDS ?? 6);
  for (let r = 0; r < rounds; r++) for (const t of (r % 2 ? [...targets].reverse() : targets)) {
    const s = await runLoad(t, { connections: 32, durationSec: 2 });
    res.get(t.name)!.push({ rps: s.requestsPerSec, cpu: s.targetCpuUsPerRequest ?? NaN });
  }
  for (const [name, xs] of res) {
    const c = spread(xs.map((x) => x.cpu)); const q = spread(xs.map((x) => x.rps));
    console.log(name.padEnd(16), 'cpu µs/req', c.median.toFixed(1), `(${c.min.toFixed(1)}–${c.max.toFixed(1)})`, ' req/s', Math.round(q.median), `(${Math.round(q.min)}–${Math.round(q.max)})`);
  }
} finally { await Promise.all(extra.map((g) => g.stop())); await env.stop(); }
