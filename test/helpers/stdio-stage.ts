/**
 * A gateway with stdio routes in front of real servers from node_modules (started with
 * `process.execPath`, never npx), tokens from a local issuer, and the real MCP SDK client.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { StartOptions } from '../../src/gateway.js';
import { startTestGateway, type TestGateway } from './gateway.js';
import { gatewayYaml } from './gateway-config.js';
import { startLocalIssuer, type LocalIssuer } from './local-issuer.js';

const require = createRequire(import.meta.url);

/** The bin script of an installed MCP server package. */
export function serverBin(pkg: string): string {
  const manifest = require(`${pkg}/package.json`) as { bin: Record<string, string> | string };
  const bin = typeof manifest.bin === 'string' ? manifest.bin : Object.values(manifest.bin)[0]!;
  return join(dirname(require.resolve(`${pkg}/package.json`)), bin);
}

export const FIXTURE_SERVER = join(import.meta.dirname, 'stdio-fixture-server.mjs');

export interface StdioStage {
  issuer: LocalIssuer;
  gw: TestGateway;
  url(path: string): string;
  token(path: string, sub?: string, scope?: string): Promise<string>;
  close(): Promise<void>;
}

/** `routes`: route path → the rest of that route file (upstream: { stdio } and any rules). */
export async function startStdioStage(routes: Record<string, Record<string, unknown>>, env: NodeJS.ProcessEnv = {}, options: StartOptions = {}): Promise<StdioStage> {
  const issuer = await startLocalIssuer();
  const files: Record<string, unknown> = { 'gateway.yaml': gatewayYaml({ log_level: 'info' }) };
  let i = 0;
  for (const [path, route] of Object.entries(routes)) {
    files[`route-${i++}.yaml`] = {
      path,
      authorization_servers: [issuer.issuer],
      token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['ES256'] } },
      scopes_supported: ['mcp:read', 'mcp:write'],
      required_scopes: ['mcp:read'],
      ...route,
    };
  }
  let gw: TestGateway;
  try {
    gw = await startTestGateway(files, env, options);
  } catch (err) {
    await issuer.close();
    throw err;
  }
  const resourceOf = (path: string) => gw.config.routes.find((r) => r.path === path)!.resource;
  return {
    issuer,
    gw,
    url: (path) => `${gw.url}${path}`,
    token: (path, sub = 'alice', scope = 'mcp:read') => issuer.token({ audience: resourceOf(path), sub, scope }),
    async close() {
      await gw.stop();
      await issuer.close();
    },
  };
}

/** The real SDK client through the gateway, with a static bearer token. */
export async function connectClient(url: string, token: string, options: ConstructorParameters<typeof Client>[1] = {}): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } });
  const client = new Client({ name: 'stdio-test', version: '1' }, options);
  await client.connect(transport);
  return { client, transport };
}

/** The text of a tool result's first content item. */
export function resultText(result: unknown): string {
  const content = (result as { content?: { type: string; text?: string }[] }).content ?? [];
  return content[0]?.text ?? '';
}

/** Whether a process is alive (signal 0 only checks). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export { waitFor } from './wait.js';
