/**
 * The MCP Inspector (npm `@modelcontextprotocol/inspector`, pinned 0.21.2 as the README pins it),
 * unmodified, in its CLI mode: `--cli <url> --transport http --header 'Authorization: Bearer …'`.
 * It has no OAuth in that mode, so the test mints the token (client_credentials from a client
 * configured on the built-in AS, as demo-aggregate does) and hands it over as the user would.
 * The gateway: the built-in AS in front of the demo MCP server, a route whose `deny` rule refuses
 * `shell` (DESIGN §8.4). Asserted on the CLI's own output and exit status: tools/list and an
 * allowed call succeed; the denied call prints the gateway's JSON-RPC error (-32003, "denied by
 * policy", the whole body, as the error after "Error POSTing to endpoint:"; it does not print the
 * status) — once it printed "tool not found" — and exits 1; no authorization is started (the CLI
 * mode has no OAuth provider; the AS's store gets no registration).
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDemoMcpServer, type DemoMcpServer } from '../../src/demo/demo-mcp-server.js';
import { startAsGateway, type AsGateway } from '../helpers/authorization-server.js';

const require = createRequire(import.meta.url);
const inspectorCli = join(require.resolve('@modelcontextprotocol/inspector/package.json'), '..', 'cli', 'build', 'cli.js');
const CLIENT = { id: 'inspector-user', secret: 'inspector-user-secret-0123456789abcdef' };

let upstream: DemoMcpServer;
let gateway: AsGateway;
let mcpUrl: string;
let token: string;

beforeAll(async () => {
  upstream = await startDemoMcpServer();
  gateway = await startAsGateway({
    upstream: upstream.url,
    authorizationServer: { clients: [{ client_id: CLIENT.id, client_secret: { env: 'INSPECTOR_SECRET' }, grant_types: ['client_credentials'], scopes: ['mcp:read'] }] },
    env: { INSPECTOR_SECRET: CLIENT.secret },
    routes: {
      'notes.yaml': {
        path: '/notes/mcp',
        scopes_supported: ['mcp:read', 'mcp:write'],
        required_scopes: ['mcp:read'],
        rules: [{ match: { method: 'tools/call', tool: 'shell' }, deny: true }],
      },
    },
  });
  mcpUrl = `${gateway.issuer}/notes/mcp`;
  token = await clientCredentialsToken(mcpUrl);
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await upstream?.close();
});

async function clientCredentialsToken(resource: string): Promise<string> {
  const res = await fetch(`${gateway.issuer}/token`, {
    method: 'POST',
    headers: { authorization: `Basic ${Buffer.from(`${CLIENT.id}:${CLIENT.secret}`).toString('base64')}` },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource, scope: 'mcp:read' }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { access_token: string }).access_token;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The Inspector's CLI as a user runs it (its bin, on this Node), against the route with the minted token. */
function inspector(...args: string[]): Promise<Run> {
  const child = spawn(process.execPath, [inspectorCli, '--cli', mcpUrl, '--transport', 'http', '--header', `Authorization: Bearer ${token}`, ...args], {
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('MCP Inspector 0.21.2 CLI through a route with a deny rule', () => {
  it('lists the tools', async () => {
    const run = await inspector('--method', 'tools/list');
    expect(run.code, run.stderr).toBe(0);
    const { tools } = JSON.parse(run.stdout) as { tools: Array<{ name: string }> };
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'shell']));
  }, 60_000);

  it('calls an allowed tool', async () => {
    const run = await inspector('--method', 'tools/call', '--tool-name', 'echo', '--tool-arg', 'message=hello inspector');
    expect(run.code, run.stderr).toBe(0);
    const result = JSON.parse(run.stdout) as { content: Array<{ text: string }>; isError?: boolean };
    expect(result.isError).toBeFalsy();
    expect(result.content[0]?.text).toBe('hello inspector');
  }, 60_000);

  it('shows the denied call as the gateway\'s denial, and starts no authorization', async () => {
    const mark = gateway.recording.writes.length;
    const run = await inspector('--method', 'tools/call', '--tool-name', 'shell', '--tool-arg', 'command=id');
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    // What it prints: "Failed to call tool shell: Streamable HTTP error: Error POSTing to endpoint: <the body>".
    const shown = /^Failed to call tool shell: Streamable HTTP error: Error POSTing to endpoint: (\{.*\})$/m.exec(run.stderr);
    expect(shown, run.stderr).not.toBeNull();
    expect(JSON.parse(shown![1]!)).toEqual({
      jsonrpc: '2.0',
      id: expect.any(Number),
      error: { code: -32003, message: "denied by policy: the tool 'shell' is not allowed and no scope would allow it", data: { error: 'access_denied' } },
    });
    expect(run.stderr).not.toMatch(/not found|unauthori[sz]ed|invalid_token|insufficient_scope/i);
    // A /register writes a `client` record (and /authorize needs a registered client): nothing written means neither.
    expect(gateway.recording.namespacesSince(mark)).toEqual([]);
  }, 60_000);
});
