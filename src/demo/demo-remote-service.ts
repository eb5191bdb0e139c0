// The demo's second MCP server, the kind `user_oauth` is for: a remote server
// that wants each user's own account at its own authorization server, as
// GitHub's or an internal one does. Here it is a small SDK server (`whoami`
// answers the account whose token came with the call) behind its own AS,
// which is a second instance of this gateway's built-in AS: a real OAuth 2.1
// AS (RFC 8414 metadata, dynamic registration, PKCE, rotating refresh tokens,
// RFC 7009 revocation, RFC 9207 `iss`) whose route answers 401 with an RFC
// 9728 challenge and metadata. Its public URL is `localhost`, not 127.0.0.1:
// browsers keep cookies per host, not per port, so the two AS's cookies
// stay apart. Everything is loopback; nothing leaves the machine.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { generateSigningKey } from '../authorization-server/keys/signing-keys.js';
import { startGateway } from '../gateway.js';
import { startStatelessMcpServer, type DemoMcpServer } from './demo-mcp-server.js';
import { resolveEmbeddedConfig } from './embedded-config.js';

/** The scope the remote service's AS grants; the gateway asks for it (its RFC 9728 metadata lists it). */
export const REMOTE_SCOPE = 'remote:read';
/** The header the remote service's own gateway gives its server: the account at the service. */
const ACCOUNT_HEADER = 'x-remote-account';
const SIGNING_KEY_ENV = 'MAG_DEMO_REMOTE_SIGNING_KEY';

export interface RemoteService {
  /** Its MCP endpoint, `http://localhost:<port>/mcp`: the demo route's upstream. */
  url: string;
  close(): Promise<void>;
}

/** The SDK server behind the remote service's AS: it knows the account from its own gateway's header. */
function remoteServer(account: string): McpServer {
  const server = new McpServer({ name: 'mcp-auth-gateway-demo-remote', version: '1.0.0' });
  server.registerTool('whoami', { description: 'The account at the remote service whose token came with this call' }, () => ({
    content: [{ type: 'text' as const, text: account }],
  }));
  return server;
}

/** A free loopback port (the AS's issuer must be known before it listens). */
function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

/** The remote service's configuration: its AS with the dev login, one route in front of the SDK server. */
export function remoteServiceConfigFiles(port: number, upstream: string) {
  return {
    gateway: {
      listen: { host: '127.0.0.1', port },
      public_url: `http://localhost:${port}`,
      store: { kind: 'memory' },
      audit: { sink: 'none' },
      log_level: process.env.LOG_LEVEL ?? 'warn',
      authorization_server: { enabled: true, login: { kind: 'dev' }, signing_key: { env: SIGNING_KEY_ENV } },
    },
    route: {
      path: '/mcp',
      upstream,
      scopes_supported: [REMOTE_SCOPE],
      required_scopes: [REMOTE_SCOPE],
      identity_headers: { [ACCOUNT_HEADER]: 'sub' },
      upstream_auth: { kind: 'none' },
    },
  };
}

export async function startRemoteService(): Promise<RemoteService> {
  const server: DemoMcpServer = await startStatelessMcpServer((req) => remoteServer(String(req.headers[ACCOUNT_HEADER] ?? '')));
  try {
    const port = await freeLoopbackPort();
    const files = remoteServiceConfigFiles(port, server.url);
    // A key of its own, new at each start: its tokens are for itself only.
    const env = { ...process.env, [SIGNING_KEY_ENV]: JSON.stringify(await generateSigningKey()) };
    const gateway = await startGateway(await resolveEmbeddedConfig(files.gateway, [files.route], env));
    return {
      url: `${files.gateway.public_url}/mcp`,
      async close() {
        await gateway.close();
        await server.close();
      },
    };
  } catch (err) {
    await server.close();
    throw err;
  }
}

/** A fresh key for the demo's sealed upstream tokens (the store is in memory: they end with the process). */
export const newAccountTokensKey = () => randomBytes(32).toString('base64');
