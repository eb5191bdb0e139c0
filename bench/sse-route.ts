// node --import tsx bench/sse-route.ts — what a legacy HTTP+SSE route costs: the same MCP SDK
// calls (tools/call echo, one at a time) straight to server-everything in its
// `sse` mode (SSEClientTransport) and through the gateway's sse route
// (StreamableHTTPClientTransport, JWT checked on every request), interleaved
// in rounds in one run; plus the time to open a session both ways. The
// upstream and the gateway run in processes of their own; the clients here.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { spawnReady } from './lib/processes.js';
import { gatewayCommand } from './lib/gateway.js';
import { median, percentile } from './lib/stats.js';

const ROUNDS = Number(process.env.SSE_BENCH_ROUNDS ?? 5);
const CALLS = Number(process.env.SSE_BENCH_CALLS ?? 200);
const CONNECTS = Number(process.env.SSE_BENCH_CONNECTS ?? 20);
/** A port free now (taken by the child soon after; a race here only fails the run). */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
const [UPSTREAM_PORT, GATEWAY_PORT, JWKS_PORT] = [await freePort(), await freePort(), await freePort()];
const PATH = '/legacy/mcp';

const everything = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-everything/dist/index.js');

async function issuer(): Promise<{ token: string; close(): void }> {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'bench', alg: 'ES256', use: 'sig' };
  const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [jwk] })));
  await new Promise<void>((resolve) => server.listen(JWKS_PORT, '127.0.0.1', resolve));
  const iss = `http://127.0.0.1:${JWKS_PORT}`;
  const now = Math.floor(Date.now() / 1000);
  const token = await new SignJWT({ iss, sub: 'bench', client_id: 'bench', scope: 'mcp:read', aud: `http://127.0.0.1:${GATEWAY_PORT}${PATH}`, iat: now, exp: now + 3600 })
    .setProtectedHeader({ alg: 'ES256', kid: 'bench', typ: 'at+jwt' })
    .sign(privateKey);
  return { token, close: () => server.close() };
}

async function timeCalls(client: Client, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const start = performance.now();
    await client.callTool({ name: 'echo', arguments: { message: `call ${i}` } });
    out.push(performance.now() - start);
  }
  return out;
}

async function main(): Promise<void> {
  const jwt = await issuer();
  const dir = await mkdtemp(join(tmpdir(), 'mag-bench-sse-'));
  const iss = `http://127.0.0.1:${JWKS_PORT}`;
  await writeFile(join(dir, 'gateway.yaml'), `listen: { host: 127.0.0.1, port: ${GATEWAY_PORT} }\npublic_url: http://127.0.0.1:${GATEWAY_PORT}\naudit: { sink: none }\nlog_level: warn\n`);
  await writeFile(
    join(dir, 'legacy.yaml'),
    `path: ${PATH}\nupstream: { sse: http://127.0.0.1:${UPSTREAM_PORT}/sse }\nauthorization_servers: [${iss}]\ntoken: { jwt: { issuer: ${iss}, jwks_uri: ${iss}/jwks.json, algorithms: [ES256] } }\nrequired_scopes: [mcp:read]\n`,
  );
  const upstream = await spawnReady('server-everything sse', process.execPath, [everything, 'sse'], {
    env: { ...process.env, PORT: String(UPSTREAM_PORT) },
    // It says so on stderr, which spawnReady does not read for readiness: any HTTP answer will do.
    probe: async () => ((await fetch(`http://127.0.0.1:${UPSTREAM_PORT}/ready-probe`).catch(() => undefined)) ? true : undefined),
  });
  const { args, runtime } = gatewayCommand();
  console.log(`gateway: ${runtime === 'dist' ? 'the build (dist/)' : 'the sources through tsx'}`);
  const gateway = await spawnReady('gateway', process.execPath, [...args, 'serve', '--config', dir], {
    probe: async () => ((await fetch(`http://127.0.0.1:${GATEWAY_PORT}/readyz`).catch(() => undefined))?.ok ? true : undefined),
  });
  const direct = () => new SSEClientTransport(new URL(`http://127.0.0.1:${UPSTREAM_PORT}/sse`));
  const viaGateway = () => new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${GATEWAY_PORT}${PATH}`), { requestInit: { headers: { authorization: `Bearer ${jwt.token}` } } });
  const connect = async (transport: SSEClientTransport | StreamableHTTPClientTransport) => {
    const client = new Client({ name: 'bench', version: '0' });
    await client.connect(transport);
    return client;
  };
  try {
    const a = await connect(direct());
    const b = await connect(viaGateway());
    await timeCalls(a, 50);
    await timeCalls(b, 50);
    const samples = { direct: [] as number[], gateway: [] as number[] };
    for (let round = 0; round < ROUNDS; round++) {
      samples.direct.push(...(await timeCalls(a, CALLS)));
      samples.gateway.push(...(await timeCalls(b, CALLS)));
    }
    await Promise.all([a.close(), b.close()]);
    const connects = { direct: [] as number[], gateway: [] as number[] };
    for (let i = 0; i < CONNECTS; i++) {
      for (const [name, make] of [['direct', direct], ['gateway', viaGateway]] as const) {
        const start = performance.now();
        const c = await connect(make());
        connects[name].push(performance.now() - start);
        await c.close();
      }
    }
    const ms = (v: number) => `${v.toFixed(2)} ms`;
    console.log(`tools/call echo, ${ROUNDS} x ${CALLS} sequential calls each way (interleaved rounds):`);
    for (const name of ['direct', 'gateway'] as const) {
      console.log(`  ${name.padEnd(8)} p50 ${ms(median(samples[name]))}  p99 ${ms(percentile(samples[name], 99))}`);
    }
    console.log(`  overhead p50 ${ms(median(samples.gateway) - median(samples.direct))}`);
    console.log(`session open (connect: initialize + initialized), ${CONNECTS} each way:`);
    for (const name of ['direct', 'gateway'] as const) console.log(`  ${name.padEnd(8)} p50 ${ms(median(connects[name]))}`);
  } finally {
    await Promise.all([gateway.stop(), upstream.stop()]);
    jwt.close();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
