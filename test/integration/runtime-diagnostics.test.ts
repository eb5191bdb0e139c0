/**
 * The running gateway says what `check --online` says, once per cause, with
 * the configured and the seen value: an issuer whose metadata names another
 * issuer (a trailing slash), an upstream URL without its path (404 to
 * initialize) or one that refuses POST (405), a stdio command that does not
 * exist (named, with its errno). Real servers on loopback, the real gateway
 * in-process, its log lines read back. And `check`: the stdio command
 * resolved as the process would look for it, `check --online` starting it
 * once for the handshake.
 */
import { createServer, type RequestListener } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { closeServer, listen } from '../helpers/net.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { MCP_HEADERS } from './policy-harness.js';
import { resolveCommand } from '../../src/proxy/stdio/command-path.js';
import { probeStdio } from '../../src/check/probe-stdio.js';
import type { RouteConfig, StdioUpstreamConfig } from '../../src/config/types.js';
import { DEFAULT_STDIO_RESOURCES } from '../../src/config/schema.js';

const FIXTURE_SERVER = new URL('../helpers/stdio-fixture-server.mjs', import.meta.url).pathname;
const MISSING = 'mag-no-such-command-7f3a';
const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } });

let issuer: TestIssuer;
let gw: TestGateway;
const servers: Array<ReturnType<typeof createServer>> = [];
let metadataIssuer: string;

async function serve(handler: RequestListener): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  return `http://127.0.0.1:${await listen(server)}`;
}

const lines = () => gw.logs.flatMap((chunk) => chunk.split('\n')).filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
const diagnoses = (cause: string) => lines().filter((l) => l.cause === cause);

beforeAll(async () => {
  issuer = await startTestIssuer('ES256');
  // Metadata that names its issuer without the trailing slash the route is configured with.
  metadataIssuer = await serve((req, res) => {
    if (req.url === '/.well-known/openid-configuration') res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ issuer: metadataIssuer, jwks_uri: issuer.jwksUri }));
    else res.writeHead(404).end();
  });
  const notFound = await serve((_req, res) => res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>'));
  const getOnly = await serve((_req, res) => res.writeHead(405, { allow: 'GET' }).end());
  gw = await startTestGateway({
    'gateway.yaml': gatewayYaml(),
    'slash.yaml': { ...jwtRoute('/slash/mcp', `${notFound}/mcp`, issuer), token: { jwt: { issuer: `${metadataIssuer}/`, algorithms: ['ES256'] } } },
    'nopath.yaml': jwtRoute('/nopath/mcp', `${notFound}?key=upstream-secret`, issuer),
    'getonly.yaml': jwtRoute('/getonly/mcp', `${getOnly}/mcp`, issuer),
    'missing.yaml': { ...jwtRoute('/missing/mcp', 'unused', issuer), upstream: { stdio: { command: MISSING, args: ['--token', 'arg-secret'] } } },
  });
}, 60_000);

afterAll(async () => {
  await gw?.stop();
  await Promise.all([issuer?.close(), ...servers.map((s) => closeServer(s))]);
});

async function post(path: string, times = 3): Promise<number[]> {
  const token = await issuer.mint({ aud: resourceOf(path) });
  const statuses: number[] = [];
  for (let i = 0; i < times; i++) {
    const res = await fetch(`${gw.url}${path}`, { method: 'POST', headers: { ...MCP_HEADERS, authorization: `Bearer ${token}` }, body: INITIALIZE });
    await res.arrayBuffer();
    statuses.push(res.status);
  }
  return statuses;
}

describe('runtime diagnoses, once per cause', () => {
  it('an issuer whose metadata names another issuer (trailing slash): 503 to the client, one line naming both', async () => {
    expect(await post('/slash/mcp')).toEqual([503, 503, 503]);
    const said = diagnoses('issuer_mismatch');
    expect(said).toHaveLength(1);
    expect(said[0]).toMatchObject({ route: '/slash/mcp', configured: `${metadataIssuer}/`, seen: metadataIssuer, metadata: `${metadataIssuer}/.well-known/openid-configuration` });
    expect(said[0]!.msg).toContain('only a trailing slash differs');
  });

  it('an upstream URL without its path (404 to initialize): the client gets the 404, the log one line with the masked URL', async () => {
    expect(await post('/nopath/mcp')).toEqual([404, 404, 404]);
    const said = diagnoses('upstream_not_mcp').filter((l) => l.route === '/nopath/mcp');
    expect(said).toHaveLength(1);
    expect(said[0]).toMatchObject({ seen: 404 });
    expect(String(said[0]!.configured)).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?…$/);
    expect(said[0]!.msg).toContain('is the path right?');
  });

  it('an upstream that refuses POST (405)', async () => {
    expect(await post('/getonly/mcp', 2)).toEqual([405, 405]);
    const said = diagnoses('upstream_not_mcp').filter((l) => l.route === '/getonly/mcp');
    expect(said).toHaveLength(1);
    expect(said[0]!.msg).toContain('not a Streamable HTTP MCP endpoint');
  });

  it('a stdio command that does not exist: 502 to the client, one line naming the command, its errno and the PATH searched', async () => {
    expect(await post('/missing/mcp')).toEqual([502, 502, 502]);
    const said = diagnoses('stdio_spawn');
    expect(said).toHaveLength(1);
    expect(said[0]).toMatchObject({ route: '/missing/mcp', command: MISSING, errno: 'ENOENT' });
    expect(said[0]!.msg).toContain(`${MISSING}: ENOENT`);
    expect(said[0]!.msg).toContain('is not found in the process');
  });

  it('masks what may be secret: no upstream query, no stdio argument in a diagnosis', () => {
    const text = JSON.stringify(lines().filter((l) => l.cause !== undefined));
    expect(text).toContain('stdio_spawn');
    expect(text).not.toContain('upstream-secret');
    expect(text).not.toContain('arg-secret');
  });
});

const stdioConfig = (command: string, more: Partial<StdioUpstreamConfig> = {}): StdioUpstreamConfig => ({
  command,
  args: [],
  env: {},
  inheritEnv: ['PATH'],
  maxProcesses: 1,
  maxProcessesPerPrincipal: 1,
  idleTimeoutMs: 60_000,
  resources: DEFAULT_STDIO_RESOURCES,
  ...more,
});

describe('check: the stdio command resolved as the process looks for it', () => {
  it('finds commands on the PATH the process gets, and names each that it cannot find', () => {
    expect(resolveCommand(stdioConfig('sh'), { PATH: '/usr/bin:/bin' })).toEqual({ found: expect.stringMatching(/\/sh$/) as unknown });
    // Without PATH in inherit_env the process searches the system default, not the gateway's PATH.
    expect(resolveCommand(stdioConfig('node', { inheritEnv: [] }), { PATH: '/nowhere' })).toMatchObject({ found: expect.any(String) as unknown });
    expect(resolveCommand(stdioConfig('sh', { env: { PATH: '/nowhere' } }), { PATH: '/usr/bin:/bin' })).toMatchObject({ problem: expect.stringContaining('/nowhere') as unknown });
    expect(resolveCommand(stdioConfig('./server.js'), {})).toMatchObject({ problem: expect.stringContaining('relative path') as unknown });
    expect(resolveCommand(stdioConfig(FIXTURE_SERVER), {})).toMatchObject({ problem: expect.stringContaining('not executable') as unknown });
  });

  it('property: a name found on no PATH directory is a problem that names it', () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z][a-z0-9-]{3,20}$/), (name) => {
        const command = `mag-${name}-absent`;
        const answer = resolveCommand(stdioConfig(command), { PATH: '/usr/bin:/bin' });
        expect(answer).toMatchObject({ problem: expect.stringContaining(JSON.stringify(command)) as unknown });
      }),
    );
  });

  it('in a sandbox, a program outside what the sandbox binds is named', () => {
    const sandbox = { kind: 'bubblewrap' as const, readable: [], writable: [], network: false };
    expect(resolveCommand(stdioConfig('/usr/bin/env', { sandbox }), {})).toMatchObject({ found: '/usr/bin/env' });
    expect(resolveCommand(stdioConfig(process.execPath, { sandbox, cwd: undefined }), {})).toSatisfy((r: object) => (process.execPath.startsWith('/usr/') ? 'found' in r : 'problem' in r));
  });
});

describe('check --online: a stdio command started once for the handshake', () => {
  const route = (stdio: StdioUpstreamConfig) => ({ path: '/s/mcp', stdio, maxBodyBytes: 1 << 20, upstreamTimeoutMs: 10_000 }) as unknown as RouteConfig;

  it('a server that answers initialize', async () => {
    const finding = await probeStdio(route(stdioConfig(process.execPath, { args: [FIXTURE_SERVER, 'probe', '/tmp'] })));
    expect(finding.level).toBe('ok');
    expect(finding.message).toContain('answered initialize');
  });

  it('a server that exits at once, and one that does not exist', async () => {
    const exits = await probeStdio(route(stdioConfig(process.execPath, { args: [FIXTURE_SERVER, 'exit'] })));
    expect(exits.level).toBe('error');
    expect(exits.message).toContain('code 3');
    const missing = await probeStdio(route(stdioConfig(MISSING)));
    expect(missing).toMatchObject({ level: 'error', message: expect.stringContaining(MISSING) as unknown });
  });
});
