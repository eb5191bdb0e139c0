// Everything the load runs point at, each in its own process: the upstream,
// the gateway, the http-proxy baseline and (when installed) nginx; the token
// issuer's JWKS is served from the harness, which the gateway asks once.
// Each target is checked with one request before any measurement.
import { request } from 'node:http';
import type { BenchOptions } from './options.js';
import { readyPort, spawnReady, type ChildHandle } from './processes.js';
import { startIssuer, type Issuer } from './tokens.js';
import { GATEWAY_PATHS, PUBLIC_URL, REQUIRED_SCOPE, UPSTREAM_CREDENTIAL, startGatewayProcess, type GatewayProcess } from './gateway.js';
import { findNginx, startNginx, type NginxProcess } from './nginx.js';
import { MCP_HEADERS, MEASURED_BODY } from './load.js';

export interface ServerProcess extends ChildHandle {
  url: string;
}

export interface BenchEnvironment {
  upstream: ServerProcess;
  issuer: Issuer;
  gateway: GatewayProcess;
  /** The same gateway with authentication off: the cost of auth. */
  gatewayAuthOff: GatewayProcess;
  httpProxy: ServerProcess;
  proxyCore: ServerProcess;
  nginx: NginxProcess | undefined;
  nginxVersion: string | null;
  notes: string[];
  /** A valid token for a gateway route (audience = its resource). */
  tokenFor(path: string): Promise<string>;
  /** The pool of shape c (a new token every request) for the /mcp route; minting starts with the environment, when asked for. */
  coldTokens: Promise<string[]> | undefined;
  startGateway(name: string, cpuProfileDir?: string, authOff?: boolean): Promise<GatewayProcess>;
  stop(): Promise<void>;
}

const TSX = ['--import', 'tsx'];

export const audienceOf = (path: string) => `${PUBLIC_URL}${path}`;

export async function startEnvironment(options: BenchOptions, coldTokenCount = 0): Promise<BenchEnvironment> {
  const started: { stop(): Promise<void> }[] = [];
  const notes: string[] = [];
  try {
    const upstream = await startServer('upstream', 'bench/servers/upstream.ts', {
      BENCH_UPSTREAM_CREDENTIAL: UPSTREAM_CREDENTIAL,
      BENCH_SSE_EVENTS: String(options.sseEvents),
      BENCH_SSE_INTERVAL_MS: String(options.sseIntervalMs),
    });
    started.push(upstream);
    const issuer = await startIssuer(options.alg, `${REQUIRED_SCOPE} mcp:write`);
    started.push({ stop: () => issuer.close() });
    // Signed on libuv's thread pool while the other processes start, not while anything is measured.
    const coldTokens = coldTokenCount > 0 ? issuer.mintMany(audienceOf(GATEWAY_PATHS.mcp), coldTokenCount, 'bench-pool') : undefined;
    coldTokens?.catch(() => undefined);
    const startGateway = (name: string, cpuProfileDir?: string, authOff = false) =>
      startGatewayProcess(name, {
        upstreamOrigin: upstream.url,
        issuer: issuer.issuer,
        jwksUri: issuer.jwksUri,
        alg: options.alg,
        runtime: options.runtime,
        entry: options.gatewayEntry,
        ...(cpuProfileDir ? { cpuProfileDir } : {}),
        authOff,
      });
    const binary = findNginx();
    if (!binary) notes.push('nginx is not installed: the nginx baseline was skipped (Debian: apt-get install nginx-light).');
    // In parallel: each needs only the upstream. All settle before a failure is thrown, so none is left running.
    const settled = await Promise.allSettled([
      startGateway('gateway'),
      startGateway('gateway, auth off', undefined, true),
      startServer('http-proxy', 'bench/servers/http-proxy.ts', { BENCH_TARGET: upstream.url }),
      startServer('proxy core', 'bench/servers/proxy-core.ts', { BENCH_TARGET: upstream.url }),
      binary ? startNginx(binary, Number(new URL(upstream.url).port)) : Promise.resolve(undefined),
    ]);
    for (const outcome of settled) if (outcome.status === 'fulfilled' && outcome.value) started.push(outcome.value);
    const [gatewayOutcome, authOffOutcome, httpProxyOutcome, proxyCoreOutcome, nginxOutcome] = settled;
    for (const outcome of [gatewayOutcome, authOffOutcome, httpProxyOutcome, proxyCoreOutcome]) if (outcome.status === 'rejected') throw outcome.reason;
    const gateway = (gatewayOutcome as PromiseFulfilledResult<GatewayProcess>).value;
    const gatewayAuthOff = (authOffOutcome as PromiseFulfilledResult<GatewayProcess>).value;
    const httpProxy = (httpProxyOutcome as PromiseFulfilledResult<ServerProcess>).value;
    const proxyCore = (proxyCoreOutcome as PromiseFulfilledResult<ServerProcess>).value;
    let nginx: NginxProcess | undefined;
    if (nginxOutcome.status === 'fulfilled') nginx = nginxOutcome.value;
    else notes.push(`nginx (${binary?.version}) did not start, so its baseline was skipped: ${(nginxOutcome.reason as Error).message.split('\n')[0]}`);

    const tokens = new Map<string, Promise<string>>();
    const tokenFor = (path: string) => {
      let token = tokens.get(path);
      if (!token) tokens.set(path, (token = issuer.mint(audienceOf(path), 'bench-user')));
      return token;
    };

    // The baselines get the client's token too and must drop it: the upstream refuses any but the gateway's credential.
    const bearer = { authorization: `Bearer ${await tokenFor(GATEWAY_PATHS.mcp)}` };
    await expectStatus('upstream (direct)', `${upstream.url}${GATEWAY_PATHS.mcp}`, {}, 200);
    await expectStatus('http-proxy', `${httpProxy.url}${GATEWAY_PATHS.mcp}`, bearer, 200);
    await expectStatus('proxy core', `${proxyCore.url}${GATEWAY_PATHS.mcp}`, bearer, 200);
    if (nginx) await expectStatus('nginx', `http://127.0.0.1:${nginx.port}${GATEWAY_PATHS.mcp}`, bearer, 200);
    await expectStatus('gateway without a token', `${gateway.url}${GATEWAY_PATHS.mcp}`, {}, 401);
    await expectStatus('gateway with a token', `${gateway.url}${GATEWAY_PATHS.mcp}`, bearer, 200);
    await expectStatus('gateway with auth off, without a token', `${gatewayAuthOff.url}${GATEWAY_PATHS.mcp}`, {}, 200);

    return {
      upstream,
      issuer,
      gateway,
      gatewayAuthOff,
      httpProxy,
      proxyCore,
      nginx,
      nginxVersion: binary?.version ?? null,
      notes,
      tokenFor,
      coldTokens,
      startGateway,
      stop: () => stopAll(started),
    };
  } catch (err) {
    await stopAll(started);
    throw err;
  }
}

async function stopAll(started: { stop(): Promise<void> }[]): Promise<void> {
  await Promise.allSettled(started.reverse().map((s) => s.stop()));
}

async function startServer(name: string, script: string, env: Record<string, string>): Promise<ServerProcess> {
  const handle = await spawnReady(name, process.execPath, [...TSX, script], { env: { ...process.env, ...env }, ready: readyPort });
  return Object.assign(handle, { url: `http://127.0.0.1:${handle.readyValue as number}` });
}

/** One measured request (tools/call); a target that answers anything else is not measured. */
function expectStatus(what: string, url: string, headers: Record<string, string>, status: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { ...MCP_HEADERS, ...headers } }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.once('end', () => {
        if (res.statusCode === status && (status !== 200 || body.includes('"content"'))) resolve();
        else reject(new Error(`${what}: expected ${status}, got ${res.statusCode}: ${body.slice(0, 200)}`));
      });
    });
    req.once('error', (err) => reject(new Error(`${what}: ${err.message}`)));
    req.end(MEASURED_BODY);
  });
}
