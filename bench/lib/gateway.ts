// The gateway under test, run as users run it (`mcp-auth-gateway serve
// --config <dir>`) in its own process: a config directory with one route per
// upstream endpoint, each with JWT validation against the local JWKS,
// required scopes and a static upstream credential.
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT, spawnReady, type ChildHandle } from './processes.js';

export interface GatewayRoutes {
  /** POST tools/call */
  mcp: string;
  /** GET: 200 events */
  stream: string;
  /** GET: one event, then idle */
  idle: string;
}

export const GATEWAY_PATHS: GatewayRoutes = { mcp: '/mcp', stream: '/stream', idle: '/idle' };

/** Only the audience of the tokens: the gateway listens on a port of its own choosing. */
export const PUBLIC_URL = 'http://127.0.0.1:8080';

export const UPSTREAM_CREDENTIAL_VALUE = 'bench-upstream-secret';
/** What the upstream receives from the gateway (`static` adds the Bearer scheme). */
export const UPSTREAM_CREDENTIAL = `Bearer ${UPSTREAM_CREDENTIAL_VALUE}`;

export const REQUIRED_SCOPE = 'mcp:read';

export interface GatewayOptions {
  upstreamOrigin: string;
  issuer: string;
  jwksUri: string;
  alg: string;
  /** Run the built dist (default) or the TypeScript sources through tsx. */
  runtime: 'dist' | 'src';
  /** The JS entry point for runtime dist. */
  entry: string;
  /** The node binary (default: the harness's own) and flags before the entry point. */
  node?: string;
  nodeArgs?: readonly string[];
  /** Write a V8 CPU profile into this directory when the process exits. */
  cpuProfileDir?: string;
  /** The same gateway with authentication off (bench/servers/gateway-auth-off.ts), for the cost of auth. */
  authOff?: boolean;
  /** Further environment of the gateway process (OTEL_EXPORTER_OTLP_ENDPOINT for the tracing-on variant). */
  env?: Record<string, string>;
  /** How long to wait for the listening line (default 30 s; longer under valgrind). */
  readyTimeoutMs?: number;
  /** Further top-level lines of gateway.yaml (bench/instructions.ts: limits a process slowed by valgrind cannot trip). */
  extraConfig?: readonly string[];
  /** Further route files, by file name (bench/instructions.ts: the stdio route). */
  extraRoutes?: Readonly<Record<string, string>>;
}

export interface GatewayProcess extends ChildHandle {
  url: string;
  configDir: string;
}

export async function startGatewayProcess(name: string, options: GatewayOptions): Promise<GatewayProcess> {
  const configDir = await mkdtemp(join(tmpdir(), 'mag-bench-'));
  await writeFile(
    join(configDir, 'gateway.yaml'),
    [
      'listen: { host: 127.0.0.1, port: 0 }',
      `public_url: ${PUBLIC_URL}`,
      'store: { kind: memory }',
      'audit: { sink: none }',
      'log_level: info',
      // Stopping a gateway between phases need not wait as it would for Kubernetes.
      'shutdown_grace: 2s',
      'drain_delay: 0s',
      ...(options.extraConfig ?? []),
      '',
    ].join('\n'),
  );
  for (const [file, path] of Object.entries(GATEWAY_PATHS)) {
    await writeFile(
      join(configDir, `${file}.yaml`),
      [
        `path: ${path}`,
        `upstream: ${options.upstreamOrigin}${path}`,
        `authorization_servers: [${options.issuer}]`,
        `token: { jwt: { issuer: ${options.issuer}, jwks_uri: ${options.jwksUri}, algorithms: [${options.alg}] } }`,
        'scopes_supported: [mcp:read, mcp:write]',
        `required_scopes: [${REQUIRED_SCOPE}]`,
        'upstream_auth: { kind: static, header: Authorization, value: { env: BENCH_UPSTREAM_TOKEN } }',
        // The idle-stream measure holds all its streams, and the load measures all their POSTs, with one user's token.
        'limits: { max_get_streams_per_user: 1000000, max_requests_in_flight_per_user: 1000000 }',
        '',
      ].join('\n'),
    );
  }
  for (const [file, text] of Object.entries(options.extraRoutes ?? {})) await writeFile(join(configDir, file), text);
  const nodeArgs = [...(options.nodeArgs ?? []), ...(options.cpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfileDir}`] : [])];
  const command = options.authOff
    ? ['--import', 'tsx', 'bench/servers/gateway-auth-off.ts', configDir]
    : [...(options.runtime === 'dist' ? [options.entry] : ['--import', 'tsx', 'bench/lib/gateway-from-src.ts']), 'serve', '--config', configDir];
  // Only what the gateway needs: no stray PORT/HOST/PUBLIC_URL overrides from the shell.
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    BENCH_UPSTREAM_TOKEN: UPSTREAM_CREDENTIAL_VALUE,
    BENCH_GATEWAY_MODULES: options.runtime,
    ...options.env,
    // bench/servers/cluster-gateway.ts: how many workers.
    ...(process.env.BENCH_WORKERS ? { BENCH_WORKERS: process.env.BENCH_WORKERS } : {}),
  };
  const handle = await spawnReady(name, options.node ?? process.execPath, [...nodeArgs, ...command], {
    env,
    ready: listeningUrl,
    readyTimeoutMs: options.readyTimeoutMs,
  });
  const stopProcess = handle.stop;
  return Object.assign(handle, {
    url: handle.readyValue as string,
    configDir,
    async stop(signal?: NodeJS.Signals) {
      await stopProcess(signal);
      await rm(configDir, { recursive: true, force: true });
    },
  });
}

/** The gateway's `gateway listening` log line carries the URL it bound. */
function listeningUrl(line: string): string | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const entry = JSON.parse(line) as { msg?: unknown; url?: unknown };
    return entry.msg === 'gateway listening' && typeof entry.url === 'string' ? entry.url : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The node arguments that run `mcp-auth-gateway` for the route benchmarks (bench/stdio-route.ts,
 * bench/sse-route.ts): the build, as users run it, when there is one; else the sources through
 * tsx, whose loader thread and on-the-fly compiling then count in the gateway's CPU.
 * BENCH_GATEWAY_RUNTIME=src asks for the sources.
 */
export function gatewayCommand(): { args: string[]; runtime: 'dist' | 'src' } {
  const built = existsSync(join(REPO_ROOT, 'dist/cli.js'));
  if (built && process.env.BENCH_GATEWAY_RUNTIME !== 'src') return { args: ['bin/mcp-auth-gateway.js'], runtime: 'dist' };
  return { args: ['--import', 'tsx', 'bench/lib/gateway-from-src.ts'], runtime: 'src' };
}
