// npm run bench:compare -- <entry> <entry> [...]: gateway builds side by side,
// for a change too small to see across runs on a shared machine. Each entry
// is a gateway entry point (bin/mcp-auth-gateway.js of a checkout whose dist/
// is built; the first is the baseline). Same upstream, token and
// configuration as `npm run bench`; interleaved rounds of POST tools/list with
// a cached token, loaded by wrk when installed (else autocannon); prints req/s
// and CPU µs per request per entry, and each entry's per-round ratios to the
// first. List an entry twice to see the noise. An entry ending in `+tracing`
// runs with tracing on (every request sampled, exported as OTLP/HTTP protobuf
// to a sink in this process): `bin/mcp-auth-gateway.js bin/mcp-auth-gateway.js+tracing`
// is what tracing costs.
//   COMPARE_ROUNDS (default 6), COMPARE_SECONDS (default 3)
import { resolve } from 'node:path';
import { audienceOf } from './lib/environment.js';
import { GATEWAY_PATHS, REQUIRED_SCOPE, UPSTREAM_CREDENTIAL, startGatewayProcess, type GatewayProcess } from './lib/gateway.js';
import { interleave, type MeasuredTarget } from './lib/interleave.js';
import { MCP_HEADERS } from './lib/load.js';
import { chooseLoader } from './lib/loader.js';
import { readyPort, spawnReady } from './lib/processes.js';
import { spread, type Spread } from './lib/stats.js';
import { startIssuer } from './lib/tokens.js';
import { startOtlpSink } from './lib/otlp-sink.js';

const TRACING_SUFFIX = '+tracing';
const entries = process.argv.slice(2).map((entry) => resolve(entry));
if (entries.length < 2) {
  console.error('usage: npm run bench:compare -- <baseline entry> <entry> [...]');
  process.exit(2);
}
const rounds = Number(process.env.COMPARE_ROUNDS ?? 6);
const durationSec = Number(process.env.COMPARE_SECONDS ?? 3);

const upstream = await spawnReady('upstream', process.execPath, ['--import', 'tsx', 'bench/servers/upstream.ts'], {
  env: { ...process.env, BENCH_UPSTREAM_CREDENTIAL: UPSTREAM_CREDENTIAL },
  ready: readyPort,
});
const issuer = await startIssuer('RS256', `${REQUIRED_SCOPE} mcp:write`);
const sink = await startOtlpSink();
const gateways: GatewayProcess[] = [];
try {
  const token = await issuer.mint(audienceOf(GATEWAY_PATHS.mcp), 'bench-user');
  for (const [i, entry] of entries.entries()) {
    gateways.push(
      await startGatewayProcess(`gateway ${i}`, {
        upstreamOrigin: `http://127.0.0.1:${upstream.readyValue as number}`,
        issuer: issuer.issuer,
        jwksUri: issuer.jwksUri,
        alg: 'RS256',
        runtime: 'dist',
        entry: entry.endsWith(TRACING_SUFFIX) ? entry.slice(0, -TRACING_SUFFIX.length) : entry,
        env: entry.endsWith(TRACING_SUFFIX) ? { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url } : {},
      }),
    );
  }
  const targets: MeasuredTarget[] = gateways.map((gateway, i) => ({
    name: `${i}: ${entries[i]}`,
    url: `${gateway.url}${GATEWAY_PATHS.mcp}`,
    headers: { ...MCP_HEADERS, authorization: `Bearer ${token}` },
    pid: gateway.pid,
  }));
  const loader = chooseLoader('auto', 2);
  console.log(`${rounds} interleaved rounds of ${loader.seconds(durationSec)} s, 32 connections, ${loader.name} ${loader.version}`);
  const samples = await interleave(targets, { connections: 32, durationSec }, rounds, 2, () => undefined, loader.run);
  const show = (s: Spread, digits: number) => `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
  const baseline = samples.get(targets[0]!.name)!;
  for (const target of targets) {
    const own = samples.get(target.name)!;
    const line = [
      target.name,
      `  req/s ${show(spread(own.map((r) => r.requestsPerSec)), 0)}`,
      `  CPU µs/req ${show(spread(own.map((r) => r.targetCpuUsPerRequest ?? NaN)), 1)}`,
    ];
    if (target !== targets[0]) {
      line.push(`  vs 0: req/s ×${show(spread(own.map((r, i) => r.requestsPerSec / baseline[i]!.requestsPerSec)), 3)}`);
      line.push(`  CPU ×${show(spread(own.map((r, i) => (r.targetCpuUsPerRequest ?? NaN) / (baseline[i]!.targetCpuUsPerRequest ?? NaN))), 3)}`);
    }
    console.log(line.join('\n'));
  }
} finally {
  await Promise.allSettled(gateways.map((gateway) => gateway.stop()));
  await upstream.stop();
  await issuer.close();
  if (sink.exports > 0) console.log(`OTLP sink: ${sink.exports} exports, ${(sink.bytes / 1e6).toFixed(1)} MB`);
  await sink.close();
}
