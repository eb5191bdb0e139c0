// `mcp-auth-gateway demo`: everything in one process on this machine — the
// demo MCP server on a free loopback port, and in front of it the gateway
// with the built-in authorization server and the dev login, on
// 127.0.0.1:8080 (PORT overrides); and a second route, the common case, an
// unmodified stdio server (`@modelcontextprotocol/server-memory`, a
// dependency: started with this Node from node_modules, so it works offline)
// that the gateway starts per session, in a bubblewrap sandbox when bwrap
// works here (the demo runs without it too); and a third, both servers behind
// one aggregated route (`upstreams:`, DESIGN §8.2). Configuration is embedded (validated by
// the same schema and resolver as files), the store is in memory.
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { GatewayConfig } from '../config/types.js';
import { startGateway } from '../gateway.js';
import { sandboxProblem } from '../proxy/stdio/bubblewrap-check.js';
import { startDemoMcpServer } from './demo-mcp-server.js';
import { newAccountTokensKey, startRemoteService, type RemoteService } from './demo-remote-service.js';
import { resolveEmbeddedConfig } from './embedded-config.js';

export const DEMO_ROUTE_PATH = '/demo/mcp';
/** The machine client of the README's headless recipe; its secret is made at each start and printed. */
export const DEMO_MACHINE_CLIENT = 'demo-ci';
const DEMO_SECRET_ENV = 'MAG_DEMO_CI_SECRET';
export const DEMO_MEMORY_ROUTE_PATH = '/memory/mcp';
/** Both servers behind one route: tools shown as `demo__echo`, `memory__read_graph`. */
export const DEMO_ALL_ROUTE_PATH = '/all/mcp';
/** A remote server that wants each user's own account at its own AS (`user_oauth`, DESIGN §8.1). */
export const DEMO_REMOTE_ROUTE_PATH = '/remote/mcp';
const DEMO_TOKENS_KEY_ENV = 'MAG_DEMO_ACCOUNT_TOKENS_KEY';
/** The MCP Inspector the README pins: its CLI has --header and runs on Node 20 (its engines field says 22; tried on 20.20 against the demo). */
export const INSPECTOR_VERSION = '0.21.2';

/** server-memory's bin script, resolved in node_modules (never fetched by npx). */
export function memoryServerScript(): string {
  const require = createRequire(import.meta.url);
  const manifest = require('@modelcontextprotocol/server-memory/package.json') as { bin: Record<string, string> };
  return join(dirname(require.resolve('@modelcontextprotocol/server-memory/package.json')), manifest.bin['mcp-server-memory']!);
}

/** The node_modules folder server-memory and its dependencies are in. */
const nodeModulesOf = (script: string) => script.slice(0, script.lastIndexOf('/node_modules/') + '/node_modules'.length);

/** What the demo's stdio route runs in when bubblewrap works here: server-memory and this node readable, nothing else. */
export function demoSandbox() {
  return { kind: 'bubblewrap' as const, readable: [nodeModulesOf(memoryServerScript()), dirname(process.execPath)], writable: [], network: false };
}

/** The demo's stdio route is sandboxed when bubblewrap works on this machine; without it the demo still runs (and says so). */
export async function demoCanSandbox(pathVariable?: string): Promise<boolean> {
  return (await sandboxProblem(demoSandbox(), undefined, pathVariable)) === undefined;
}

/** server-memory as the gateway starts it, one process per session. */
function demoMemoryUpstream(sandboxed: boolean) {
  return {
    stdio: {
      command: process.execPath,
      args: [memoryServerScript()],
      // One knowledge graph per process, so per session: alice never sees bob's.
      env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' },
      max_processes: 20,
      idle_timeout: '10m',
      ...(sandboxed && { sandbox: demoSandbox() }),
    },
  };
}

/** The two servers behind one route, the same policy on shown names. */
function demoAllRoute(upstream: string, memoryUpstream: ReturnType<typeof demoMemoryUpstream>) {
  return {
    path: DEMO_ALL_ROUTE_PATH,
    upstreams: { demo: { upstream }, memory: { upstream: memoryUpstream } },
    scopes_supported: ['mcp:read'],
    required_scopes: ['mcp:read'],
    rules: [
      { match: { method: 'tools/call', tool: 'demo__delete_*' }, require_scopes: ['mcp:write'] },
      { match: { method: 'tools/call', tool: 'demo__add_note' }, require_scopes: ['mcp:write'] },
      { match: { method: 'tools/call', tool: 'demo__shell' }, deny: true },
      { match: { method: 'tools/call', tool: 'memory__read_graph' }, require_scopes: ['mcp:read'] },
      { match: { method: 'tools/call', tool: 'memory__search_nodes' }, require_scopes: ['mcp:read'] },
      { match: { method: 'tools/call', tool: 'memory__open_nodes' }, require_scopes: ['mcp:read'] },
      { match: { method: 'tools/call', upstream: 'memory' }, require_scopes: ['mcp:write'] },
    ],
    filter_tools_list: true,
  };
}

/** The demo's configuration, as it would be written in policies/. */
export function demoConfigFiles(port: number, upstream: string, sandboxed = false, remoteUpstream?: string) {
  const publicUrl = `http://127.0.0.1:${port}`;
  const memoryUpstream = demoMemoryUpstream(sandboxed);
  return {
    gateway: {
      listen: { host: '127.0.0.1', port },
      public_url: publicUrl,
      store: { kind: 'memory' },
      audit: { sink: 'stderr' },
      log_level: process.env.LOG_LEVEL ?? 'warn',
      // Two routes: a 2025-03-26 client that sends no `resource` gets the first one's.
      authorization_server: {
        enabled: true,
        login: { kind: 'dev' },
        default_resource: `${publicUrl}${DEMO_ROUTE_PATH}`,
        // The README's headless recipe: client_credentials, without a browser.
        clients: [{ client_id: DEMO_MACHINE_CLIENT, client_secret: { env: DEMO_SECRET_ENV }, grant_types: ['client_credentials'], scopes: ['mcp:read'] }],
      },
      // The remote route's upstream accounts: connected on the consent or connect page, listed (and disconnected) at /account/apps.
      account: { enabled: true },
      account_tokens: { encryption_key: { env: DEMO_TOKENS_KEY_ENV } },
    },
    route: {
      path: DEMO_ROUTE_PATH,
      upstream,
      scopes_supported: ['mcp:read'],
      required_scopes: ['mcp:read'],
      rules: [
        { match: { method: 'tools/call', tool: 'delete_*' }, require_scopes: ['mcp:write'] },
        { match: { method: 'tools/call', tool: 'add_note' }, require_scopes: ['mcp:write'] },
        { match: { method: 'tools/call', tool: 'shell' }, deny: true },
      ],
      filter_tools_list: true,
      upstream_auth: { kind: 'none' },
    },
    memoryRoute: {
      path: DEMO_MEMORY_ROUTE_PATH,
      upstream: memoryUpstream,
      scopes_supported: ['mcp:read'],
      required_scopes: ['mcp:read'],
      rules: [
        { match: { method: 'tools/call', tool: 'read_graph' }, require_scopes: ['mcp:read'] },
        { match: { method: 'tools/call', tool: 'search_nodes' }, require_scopes: ['mcp:read'] },
        { match: { method: 'tools/call', tool: 'open_nodes' }, require_scopes: ['mcp:read'] },
        { match: { method: 'tools/call', tool: '*' }, require_scopes: ['mcp:write'] },
      ],
      filter_tools_list: true,
      upstream_auth: { kind: 'none' },
    },
    allRoute: demoAllRoute(upstream, memoryUpstream),
    ...(remoteUpstream && { remoteRoute: demoRemoteRoute(remoteUpstream) }),
  };
}

/** The user's own account at the remote service: nothing configured but the kind, the rest is discovered from its 401. */
function demoRemoteRoute(upstream: string) {
  return { path: DEMO_REMOTE_ROUTE_PATH, upstream, scopes_supported: ['mcp:read'], required_scopes: ['mcp:read'], upstream_auth: { kind: 'user_oauth' } };
}

export async function demoConfig(port: number, upstream: string, sandboxed = false, machineSecret = randomBytes(24).toString('base64url'), remoteUpstream?: string): Promise<GatewayConfig> {
  const files = demoConfigFiles(port, upstream, sandboxed, remoteUpstream);
  const routes = [files.route, files.memoryRoute, files.allRoute, ...(files.remoteRoute ? [files.remoteRoute] : [])];
  return resolveEmbeddedConfig(files.gateway, routes, { ...process.env, [DEMO_SECRET_ENV]: machineSecret, [DEMO_TOKENS_KEY_ENV]: newAccountTokensKey() });
}

export interface RunningDemo {
  mcpUrl: string;
  /** The stdio route (server-memory). */
  memoryUrl: string;
  /** Both servers behind one aggregated route. */
  allUrl: string;
  /** The remote service, each user with their own account there (user_oauth). */
  remoteUrl: string;
  /** Its processes run in a bubblewrap sandbox. */
  sandboxed: boolean;
  /** The secret of DEMO_MACHINE_CLIENT, new at each start. */
  machineSecret: string;
  close(): Promise<void>;
}

export async function startDemo(port: number): Promise<RunningDemo> {
  const upstream = await startDemoMcpServer();
  let remote: RemoteService | undefined;
  try {
    remote = await startRemoteService();
    const sandboxed = await demoCanSandbox();
    const machineSecret = randomBytes(24).toString('base64url');
    const gateway = await startGateway(await demoConfig(port, upstream.url, sandboxed, machineSecret, remote.url));
    const running = remote;
    return {
      machineSecret,
      mcpUrl: `${gateway.url}${DEMO_ROUTE_PATH}`,
      memoryUrl: `${gateway.url}${DEMO_MEMORY_ROUTE_PATH}`,
      allUrl: `${gateway.url}${DEMO_ALL_ROUTE_PATH}`,
      remoteUrl: `${gateway.url}${DEMO_REMOTE_ROUTE_PATH}`,
      sandboxed,
      async close() {
        await gateway.close();
        await running.close();
        await upstream.close();
      },
    };
  } catch (err) {
    await remote?.close();
    await upstream.close();
    throw err;
  }
}

/** The CLI command: starts, prints how to connect, stops on SIGINT/SIGTERM. */
export async function demoCommand(env: NodeJS.ProcessEnv = process.env): Promise<number | undefined> {
  const port = env.PORT ? Number(env.PORT) : 8080;
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`PORT must be a port number, got ${env.PORT}`);
    return 2;
  }
  let demo: RunningDemo;
  try {
    demo = await startDemo(port);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    console.error(code === 'EADDRINUSE' ? `Port ${port} is in use: set PORT to another port.` : `The demo could not start: ${(err as Error).message}`);
    return 1;
  }
  console.log(demoBanner(demo));
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    demo.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  return undefined;
}

/** What the demo prints when it is up: its URLs and how to connect. */
function demoBanner(demo: RunningDemo): string {
  return [
    '',
    'mcp-auth-gateway demo is running.',
    '',
    `  MCP server URL:  ${demo.mcpUrl}`,
    '',
    `  Point an MCP client at that URL, e.g. \`npx @modelcontextprotocol/inspector@${INSPECTOR_VERSION}\` (transport: Streamable HTTP).`,
    '  It discovers the built-in authorization server, registers itself, and opens a consent page that',
    '  names it; then sign in with any user name (the dev login). Scopes: mcp:read lists and calls',
    '  echo, add, list_notes; mcp:write also add_note and delete_note; shell is denied by policy.',
    '',
    `  stdio server URL: ${demo.memoryUrl}`,
    '',
    '  The same, in front of an unmodified stdio server (@modelcontextprotocol/server-memory): the gateway',
    '  starts one process per MCP session, so each user gets a knowledge graph of their own. mcp:read',
    '  reads the graph (read_graph, search_nodes, open_nodes); mcp:write also changes it.',
    demo.sandboxed
      ? '  Each process runs in a bubblewrap sandbox: its own directory, no network, no view of the gateway.'
      : '  Its processes run unsandboxed: bubblewrap (bwrap) is not available here (apt-get install bubblewrap).',
    '',
    `  Both behind one route: ${demo.allUrl}`,
    '',
    '  One MCP server to the client, one authorization: the tools of both, shown as demo__echo,',
    '  memory__read_graph, ..., under the same policy (docs/aggregation.md).',
    '',
    `  Your own account at a remote server: ${demo.remoteUrl}`,
    '',
    '  A server that wants each user\'s own token from its own authorization server (upstream_auth:',
    '  user_oauth, docs/user-oauth.md). After the consent page the browser visits that server\'s AS once:',
    '  approve and sign in there with any name; whoami then answers that name. Disconnect at /account/apps.',
    '',
    `  Without a browser (the README's headless recipe): the machine client ${DEMO_MACHINE_CLIENT}, secret ${demo.machineSecret} (new at each start)`,
    `    TOKEN=$(curl -s -u '${DEMO_MACHINE_CLIENT}:${demo.machineSecret}' -d grant_type=client_credentials -d resource=${demo.mcpUrl} ${new URL(demo.mcpUrl).origin}/token | jq -r .access_token)`,
    `    npx @modelcontextprotocol/inspector@${INSPECTOR_VERSION} --cli ${demo.mcpUrl} --header "Authorization: Bearer $TOKEN" --method tools/list`,
    '',
    'Press Ctrl-C to stop.',
    '',
    ].join('\n');
}
