import { startEnvironment } from './lib/environment.js';
import { parseOptions } from './lib/options.js';
import { startGatewayProcess } from './lib/gateway.js';
import { runLoad, MCP_HEADERS } from './lib/load.js';
import { spread } from './lib/stats.js';
const variants = process.argv.slice(2);
const options = parseOptions(['--smoke']);
const env = await startEnvironment(options);
const gws = [];
try {
  for (const v of variants) gws.push(await startGatewayProcess(v, { upstreamOrigin: env.upstream.url, issuer: env.issuer.issuer, jwksUri: env.issuer.jwksUri, alg: 'RS256', runtime: 'dist', entry: `/tmp/mag-ab/${v}/bin/mcp-auth-gateway.js` }));
  const token = await env.tokenFor('/mcp');
  const targets = gws.map((g, i) => ({ name: variants[i]!, url: `${g.url}/mcp`, headers: { ...MCP_HEADERS, authorization: `Bearer ${token}` }, pid: g.pid }));
  const res = new Map(targets.map((t) => [t.name, [] as { rps: number; cpu: number }[]]));
  for (const t of targets) await runLoad(t, { connections: 32, durationSec: 1.5 });
  for (let r = 0; r < 5; r++) for (const t of (r % 2 ? [...targets].reverse() : targets)) {
    const s = await runLoad(t, { connections: 32, durationSec: 3 });
    res.get(t.name)!.push({ rps: s.requestsPerSec, cpu: s.targetCpuUsPerRequest ?? NaN });
  }
  for (const [name, xs] of res) {
    const c = spread(xs.map((x) => x.cpu)); const q = spread(xs.map((x) => x.rps));
    console.log(name.padEnd(6), 'cpu µs/req', c.median.toFixed(1), `(${c.min.toFixed(1)}–${c.max.toFixed(1)})`, ' req/s', Math.round(q.median), `(${Math.round(q.min)}–${Math.round(q.max)})`);
  }
} finally { await Promise.all(gws.map((g) => g.stop())); await env.stop(); }
