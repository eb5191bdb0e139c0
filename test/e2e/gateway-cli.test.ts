/**
 * Issue 2 "Done when", through the real command line (bin/mcp-auth-gateway.js, compiled from the
 * current sources): `check` validates (0) or reports `file:line: message` (1); `serve --config
 * <dir>` serves a route as docs/operations.md ("HTTP behaviour") says — challenge, metadata, the SDK client's calls with
 * only the configured credential upstream, and the 400/404 answers — in front of the unmodified
 * server-everything.
 */
import { execFile } from 'node:child_process';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { buildGatewayCli, spawnGateway, writeConfigDir, type GatewayCli, type GatewayProcess } from '../helpers/gateway-process.js';
import { connectWithToken } from '../helpers/mcp-client.js';
import { expectRejection, parseChallenge, simplify, startTestIssuer, tokenSecrets, type TestIssuer } from '../helpers/security-fixtures.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';
import { DPOP_ALGORITHMS } from '../../src/config/jws-algorithms.js';

const REPO = resolve(import.meta.dirname, '../..');
const PUBLIC_URL = 'https://mcp.example.test';
const PATH = '/everything/mcp';
const PAT = 'e2e-upstream-token-0123456789abcdef';

let cli: GatewayCli;
let everything: UpstreamHandle;
let hop: RecordingHop;
let issuer: TestIssuer;
let gateway: GatewayProcess;

const run = (args: string[]) =>
  promisify(execFile)(process.execPath, [join(cli.root, 'bin/mcp-auth-gateway.js'), ...args], { cwd: REPO, env: { PATH: process.env.PATH ?? '' } }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }),
  );

beforeAll(async () => {
  [cli, everything, issuer] = await Promise.all([buildGatewayCli(), startEverythingServer(), startTestIssuer('ES256')]);
  hop = await startRecordingHop(everything.url);
  const dir = await writeConfigDir({
    'gateway.yaml': gatewayYaml({ public_url: PUBLIC_URL, log_level: 'info' }),
    'everything.yaml': stringify({
      path: PATH,
      upstream: hop.url,
      authorization_servers: [issuer.issuer],
      token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['ES256'] } },
      scopes_supported: ['mcp:read', 'mcp:write'],
      required_scopes: ['mcp:read'],
      upstream_auth: { kind: 'static', value: { env: 'EVERYTHING_PAT' } },
    }),
  });
  gateway = await spawnGateway(cli, { configDir: dir, env: { EVERYTHING_PAT: PAT } });
}, 120_000);

afterAll(async () => {
  await gateway?.stop();
  await Promise.all([hop?.close(), issuer?.close()]);
  await everything?.close();
});

describe('mcp-auth-gateway check', () => {
  it('accepts the example policies/ and prints the routes', async () => {
    const { code, stdout } = await run(['check', '--config', join(REPO, 'policies')]);
    expect(code).toBe(0);
    expect(stdout).toMatch(/\/everything\/mcp/);
  });

  it('refuses an unknown key with file:line: message and exit 1', async () => {
    const dir = await writeConfigDir({
      'gateway.yaml': 'public_url: https://mcp.example.test\n',
      'bad.yaml': 'path: /bad/mcp\nupstream: http://127.0.0.1:1/mcp\nauthorization_servers: [https://as.example]\ntoken: { jwt: { issuer: https://as.example } }\nupstreem_auth: { kind: none }\n',
    });
    const { code, stderr } = await run(['check', '--config', dir]);
    expect(code).toBe(1);
    expect(stderr).toMatch(/bad\.yaml:5(:\d+)?: .*upstreem_auth: unknown key \(did you mean upstream_auth\?\)/);
  });

  it('--online reaches the key set and the upstream: 0 when both answer, 1 with the 404 of a wrong upstream path', async () => {
    const route = (upstream: string) =>
      stringify({ path: PATH, upstream, authorization_servers: [issuer.issuer], token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['ES256'] } } });
    const publicUrlOnly = stringify({ public_url: PUBLIC_URL });
    const good = await run(['check', '--online', '--config', await writeConfigDir({ 'gateway.yaml': publicUrlOnly, 'a.yaml': route(everything.url) })]);
    expect(good.code, good.stdout + good.stderr).toBe(0);
    expect(good.stdout).toContain(`ok     jwks: ${issuer.jwksUri} has 1 key, 1 for ES256`);
    expect(good.stdout).toContain(`ok     upstream: ${everything.url} answered initialize with HTTP 200`);
    const origin = new URL(everything.url).origin;
    const bad = await run(['check', '--online', '--config', await writeConfigDir({ 'gateway.yaml': publicUrlOnly, 'a.yaml': route(origin) })]);
    expect(bad.code).toBe(1);
    expect(bad.stdout).toContain(`upstream: ${origin} has no path`);
    expect(bad.stdout).toContain(`error  upstream: ${origin} answered initialize with HTTP 404: is the path right?`);
  });
});

describe('mcp-auth-gateway serve', () => {
  it('answers without a token with the challenge and serves the metadata', async () => {
    const res = await simplify(await fetch(`${gateway.url}${PATH}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }));
    expect(res.status).toBe(401);
    expect(parseChallenge(res.header('www-authenticate')!).params).toEqual({
      scope: 'mcp:read',
      resource_metadata: `${PUBLIC_URL}/.well-known/oauth-protected-resource${PATH}`,
    });
    const prm = await fetch(`${gateway.url}/.well-known/oauth-protected-resource${PATH}`);
    expect(await prm.json()).toEqual({
      resource: `${PUBLIC_URL}${PATH}`,
      authorization_servers: [issuer.issuer],
      scopes_supported: ['mcp:read', 'mcp:write'],
      bearer_methods_supported: ['header'],
      dpop_signing_alg_values_supported: [...DPOP_ALGORITHMS],
    });
  });

  it('carries the SDK client to server-everything with only the configured credential upstream', async () => {
    const token = await issuer.mint({ aud: `${PUBLIC_URL}${PATH}`, scope: 'mcp:read' });
    const client = await connectWithToken(`${gateway.url}${PATH}`, token);
    try {
      expect((await client.listTools()).tools.map((t) => t.name)).toContain('echo');
      expect((await client.callTool({ name: 'echo', arguments: { message: 'cli' } })).content).toEqual([{ type: 'text', text: 'Echo: cli' }]);
    } finally {
      await client.close();
    }
    expect(hop.requests.length).toBeGreaterThan(0);
    for (const r of hop.requests) {
      expect(r.headers.filter(([n]) => n.toLowerCase() === 'authorization').map(([, v]) => v)).toEqual([`Bearer ${PAT}`]);
      const text = `${r.url}\n${r.headers.map(([n, v]) => `${n}: ${v}`).join('\n')}\n${r.body.toString('latin1')}`;
      for (const secret of tokenSecrets(token)) expect(text).not.toContain(secret);
    }
  });

  it('answers 401 invalid_token, 403, 400 and 404 as docs/operations.md (HTTP behaviour) says, forwarding nothing', async () => {
    const before = hop.requests.length;
    const good = await issuer.mint({ aud: `${PUBLIC_URL}${PATH}`, scope: 'mcp:read' });
    const cases: Array<[string, RequestInit & { path?: string }, Parameters<typeof expectRejection>[1], string]> = [
      ['wrong audience', { headers: { authorization: `Bearer ${await issuer.mint({ aud: `${PUBLIC_URL}/other/mcp` })}` } }, { status: 401, error: 'invalid_token', challenge: 'error' }, ''],
      ['expired', { headers: { authorization: `Bearer ${await issuer.mint({ aud: `${PUBLIC_URL}${PATH}`, exp: Math.floor(Date.now() / 1000) - 3600 })}` } }, { status: 401, error: 'invalid_token', challenge: 'error' }, ''],
      ['no scope', { headers: { authorization: `Bearer ${await issuer.mint({ aud: `${PUBLIC_URL}${PATH}`, scope: 'mcp:write' })}` } }, { status: 403, error: 'insufficient_scope', challenge: 'error', scope: 'mcp:read' }, ''],
      ['token in the query', { path: `${PATH}?access_token=${good}`, headers: {} }, { status: 400, error: 'invalid_request' }, good],
      ['trailing slash', { path: `${PATH}/`, headers: { authorization: `Bearer ${good}` } }, { status: 404, error: 'not_found' }, good],
      ['sub-path', { path: `${PATH}/x`, headers: { authorization: `Bearer ${good}` } }, { status: 404, error: 'not_found' }, good],
    ];
    for (const [name, init, want, secret] of cases) {
      const res = await simplify(
        await fetch(`${gateway.url}${init.path ?? PATH}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(init.headers as Record<string, string>) }, body: '{}' }),
      );
      expect(res.status, name).toBe(want.status);
      expectRejection(res, want, secret ? tokenSecrets(secret) : []);
    }
    expect(hop.requests.length).toBe(before);
  });

  it('logs JSON lines and no token', () => {
    expect(gateway.logs.some((l) => l.msg === 'gateway listening')).toBe(true);
    expect(JSON.stringify(gateway.logs)).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\./);
  });
});
