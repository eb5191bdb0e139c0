// npm run bench:compare -- <entry> <entry> [...]: gateway builds side by side,
// for a change too small to see across runs on a shared machine. Each entry
// is a gateway entry point (bin/mcp-auth-gateway.js of a checkout whose dist/
// is built; the first is the baseline). Same upstream, token and
// configuration as `npm run bench`; interleaved rounds of POST tools/call with
// a cached token, loaded by wrk when installed (else autocannon); prints req/s
// and CPU µs per request per entry, each entry's per-round ratios to the
// first, and its CPU per request ÷ the proxy core's (bench/servers/proxy-core.ts,
// measured in every round beside the entries). List an entry twice to see the noise. An entry ending in `+tracing`
// runs with tracing on (every request sampled, exported as OTLP/HTTP protobuf
// to a sink in this process): `bin/mcp-auth-gateway.js bin/mcp-auth-gateway.js+tracing`
// is what tracing costs.
//   COMPARE_ROUNDS (default 6), COMPARE_SECONDS (default 3)
//   COMPARE_SHAPE  a (default), b16, b1000 or c: the traffic shape of bench/lib/shapes.ts
//                  (c: each gateway walks its own pool of COMPARE_COLD_TOKENS, default 100000)
//   COMPARE_ALG    the tokens' algorithm (default ES256, as npm run bench)
// An entry may name the node that runs it and its flags, before `::`:
//   '/tmp/node24/bin/node --max-semi-space-size=16::bin/mcp-auth-gateway.js'
import { resolve } from 'node:path';
import { audienceOf } from './lib/environment.js';
import { GATEWAY_PATHS, REQUIRED_SCOPE, UPSTREAM_CREDENTIAL, startGatewayProcess, type GatewayProcess } from './lib/gateway.js';
import { interleave, type MeasuredTarget } from './lib/interleave.js';
import { MCP_HEADERS } from './lib/load.js';
import { chooseLoader } from './lib/loader.js';
import { readyPort, spawnReady } from './lib/processes.js';
import { spread, type Spread } from './lib/stats.js';
import { TokenFeed } from './lib/token-feed.js';
import { startIssuer } from './lib/tokens.js';
import { startOtlpSink } from './lib/otlp-sink.js';

const TRACING_SUFFIX = '+tracing';
const entries = process.argv.slice(2).map(parseEntry);
if (entries.length < 2) {
  console.error('usage: npm run bench:compare -- <baseline entry> <entry> [...]');
  process.exit(2);
}
const rounds = Number(process.env.COMPARE_ROUNDS ?? 6);
const durationSec = Number(process.env.COMPARE_SECONDS ?? 3);
const shape = process.env.COMPARE_SHAPE ?? 'a';
const alg = process.env.COMPARE_ALG ?? 'ES256';
const coldTokens = Number(process.env.COMPARE_COLD_TOKENS ?? 100_000);
const USERS: Record<string, number> = { b16: 16, b1000: 1000 };
if (shape !== 'a' && shape !== 'c' && !USERS[shape]) {
  console.error(`COMPARE_SHAPE ${shape}: a, b16, b1000 or c`);
  process.exit(2);
}

interface Entry {
  label: string;
  entry: string;
  tracing: boolean;
  node?: string;
  nodeArgs: string[];
}

/** `[node [flags…]::]entry[+tracing]`: the build, the node that runs it (default: this one), and whether it traces. */
function parseEntry(label: string): Entry {
  const tracing = label.endsWith(TRACING_SUFFIX);
  const argument = tracing ? label.slice(0, -TRACING_SUFFIX.length) : label;
  const at = argument.indexOf('::');
  if (at < 0) return { label, entry: resolve(argument), tracing, nodeArgs: [] };
  const [node, ...nodeArgs] = argument.slice(0, at).trim().split(/\s+/);
  return { label, entry: resolve(argument.slice(at + 2)), tracing, node: node ? resolve(node) : undefined, nodeArgs };
}

const upstream = await spawnReady('upstream', process.execPath, ['--import', 'tsx', 'bench/servers/upstream.ts'], {
  env: { ...process.env, BENCH_UPSTREAM_CREDENTIAL: UPSTREAM_CREDENTIAL },
  ready: readyPort,
});
const upstreamUrl = `http://127.0.0.1:${upstream.readyValue as number}`;
// The proxy core beside the builds, every round: a gateway's CPU per request as a multiple of it
// carries across runs, where µs per request moves with the host (see docs/benchmark.md).
const core = await spawnReady('proxy core', process.execPath, ['--import', 'tsx', 'bench/servers/proxy-core.ts'], {
  env: { ...process.env, BENCH_TARGET: upstreamUrl },
  ready: readyPort,
});
const issuer = await startIssuer(alg, `${REQUIRED_SCOPE} mcp:write`);
const sink = await startOtlpSink();
const gateways: GatewayProcess[] = [];
try {
  const audience = audienceOf(GATEWAY_PATHS.mcp);
  const token = await issuer.mint(audience, 'bench-user');
  const users = USERS[shape] ? await issuer.mintMany(audience, USERS[shape], `bench-${shape}`) : undefined;
  const pool = shape === 'c' ? await issuer.mintMany(audience, coldTokens, 'bench-pool') : undefined;
  for (const [i, { entry, node, nodeArgs, tracing }] of entries.entries()) {
    gateways.push(
      await startGatewayProcess(`gateway ${i}`, {
        upstreamOrigin: upstreamUrl,
        issuer: issuer.issuer,
        jwksUri: issuer.jwksUri,
        alg,
        runtime: 'dist',
        entry,
        env: tracing ? { OTEL_EXPORTER_OTLP_ENDPOINT: sink.url } : {},
        ...(node ? { node } : {}),
        nodeArgs,
      }),
    );
  }
  const targets: MeasuredTarget[] = gateways.map((gateway, i) => ({
    name: `${i}: ${entries[i]!.label}`,
    url: `${gateway.url}${GATEWAY_PATHS.mcp}`,
    headers: { ...MCP_HEADERS, authorization: `Bearer ${token}` },
    pid: gateway.pid,
    // Every gateway its own feed: each walks the pool of shape c from its start, each cache cold.
    ...(users ? { tokens: new TokenFeed('rotate', users) } : pool ? { tokens: new TokenFeed('once', pool) } : {}),
  }));
  // The same request bytes, token included (dropped unread); tokens rotate as for the builds.
  const coreTarget: MeasuredTarget = {
    name: 'proxy core (reference)',
    url: `http://127.0.0.1:${core.readyValue as number}${GATEWAY_PATHS.mcp}`,
    headers: targets[0]!.headers,
    pid: core.pid,
    ...(users ? { tokens: new TokenFeed('rotate', users) } : pool ? { tokens: new TokenFeed('once', pool) } : {}),
  };
  targets.push(coreTarget);
  const loader = chooseLoader('auto', 2);
  console.log(`${rounds} interleaved rounds of ${loader.seconds(durationSec)} s, shape ${shape} (${alg}), 32 connections, ${loader.name} ${loader.version}`);
  const samples = await interleave(targets, { connections: 32, durationSec }, rounds, 2, () => undefined, loader.run);
  const show = (s: Spread, digits: number) => `${s.median.toFixed(digits)} (${s.min.toFixed(digits)}–${s.max.toFixed(digits)})`;
  const baseline = samples.get(targets[0]!.name)!;
  const coreCpu = samples.get(coreTarget.name)!.map((r) => r.targetCpuUsPerRequest ?? NaN);
  for (const target of targets) {
    const own = samples.get(target.name)!;
    const line = [
      target.name,
      `  req/s ${show(spread(own.map((r) => r.requestsPerSec)), 0)}`,
      `  CPU µs/req ${show(spread(own.map((r) => r.targetCpuUsPerRequest ?? NaN)), 1)}`,
    ];
    if (target !== coreTarget) line.push(`  CPU ÷ proxy core ×${show(spread(own.map((r, i) => (r.targetCpuUsPerRequest ?? NaN) / coreCpu[i]!)), 3)}`);
    if (target !== targets[0] && target !== coreTarget) {
      line.push(`  vs 0: req/s ×${show(spread(own.map((r, i) => r.requestsPerSec / baseline[i]!.requestsPerSec)), 3)}`);
      line.push(`  CPU ×${show(spread(own.map((r, i) => (r.targetCpuUsPerRequest ?? NaN) / (baseline[i]!.targetCpuUsPerRequest ?? NaN))), 3)}`);
    }
    console.log(line.join('\n'));
  }
} finally {
  await Promise.allSettled(gateways.map((gateway) => gateway.stop()));
  await core.stop();
  await upstream.stop();
  await issuer.close();
  if (sink.exports > 0) console.log(`OTLP sink: ${sink.exports} exports, ${(sink.bytes / 1e6).toFixed(1)} MB`);
  await sink.close();
}
