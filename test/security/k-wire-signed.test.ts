/**
 * SECURITY-CASES group K, [K77]: a `signed` upstream credential never passes as an access token
 * (SECURITY.md, DESIGN.md §8.3). `upstream_auth: signed` hands upstreams JWTs signed with the
 * built-in authorization server's key, `iss` the gateway. A `token.jwt` route trusting that issuer
 * (or the gateway's own key set) reads no `typ`, so it would take one replayed by the upstream as
 * the caller's access token: such a configuration is refused at load, by `check` and `serve`.
 * Where the built-in verifier reads them, `typ: JWT` (not `at+jwt`) refuses them, whatever their
 * audience — shown here with the credential an upstream really received.
 */
import { createRemoteJWKSet, decodeJwt, decodeProtectedHeader } from 'jose';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createJwtVerifier } from '../../src/auth/jwt-verifier.js';
import { main } from '../../src/cli.js';
import { loadConfig } from '../../src/config/load.js';
import { startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { writeConfigDir } from '../helpers/gateway-process.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/security-fixtures.js';

const PUBLIC = 'http://127.0.0.1:8080';
const gatewayYaml = (asIssuer?: string) =>
  `listen: { host: "127.0.0.1", port: 0 }\npublic_url: ${PUBLIC}\naudit: { sink: none }\nauthorization_server:\n  enabled: true\n  login: { kind: dev }\n${asIssuer ? `  issuer: ${asIssuer}\n` : ''}`;
const SIGNED_ROUTE = 'path: /signed/mcp\nupstream: http://127.0.0.1:1/mcp\nscopes_supported: [mcp:read]\nupstream_auth: { kind: signed }\n';
const jwtRouteYaml = (issuer: string, jwksUri = 'https://idp.example.com/jwks.json') =>
  `path: /jwt/mcp\nupstream: http://127.0.0.1:1/mcp\nscopes_supported: [mcp:read]\nauthorization_servers: ["${issuer}"]\ntoken:\n  jwt:\n    issuer: "${issuer}"\n    jwks_uri: "${jwksUri}"\n    algorithms: [ES256]\n`;

/** `check --config dir` in process: exit code and everything printed. */
async function check(dir: string): Promise<{ code: number | undefined; output: string }> {
  const out: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...line: unknown[]) => void out.push(line.map(String).join(' ')));
  const error = vi.spyOn(console, 'error').mockImplementation((...line: unknown[]) => void out.push(line.map(String).join(' ')));
  try {
    return { code: await main(['check', '--config', dir]), output: out.join('\n') };
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
}

async function expectRefused(files: Record<string, string>, where: RegExp): Promise<void> {
  const dir = await writeConfigDir(files);
  await expect(loadConfig(dir, {})).rejects.toThrow(where);
  const { code, output } = await check(dir);
  expect(code).toBe(1);
  expect(output).toMatch(where);
}

async function expectAccepted(files: Record<string, string>): Promise<void> {
  const dir = await writeConfigDir(files);
  await expect(loadConfig(dir, {})).resolves.toMatchObject({ publicUrl: PUBLIC });
  expect((await check(dir)).code).toBe(0);
}

describe('[K77] a token.jwt route trusting the gateway beside a signed route is refused at load', () => {
  const ISSUER_AT = /jwt\.yaml:\d+:\d+: token\.jwt\.issuer: this issuer is the gateway itself/;
  const KEYS_AT = /jwt\.yaml:\d+:\d+: token\.jwt\.jwks_uri: these keys are the gateway's own/;

  it('[K77] the issuer spelled as the public URL, in any case, with trailing slashes, or as the AS issuer (property)', async () => {
    const spelling = fc.record({
      scheme: fc.constantFrom('http', 'HTTP', 'Http'),
      host: fc.constantFrom('127.0.0.1'),
      port: fc.constantFrom(':8080'),
      slashes: fc.constantFrom('', '/', '//'),
    });
    await fc.assert(
      fc.asyncProperty(spelling, async ({ scheme, host, port, slashes }) => {
        await expectRefused({ 'gateway.yaml': gatewayYaml(), 'signed.yaml': SIGNED_ROUTE, 'jwt.yaml': jwtRouteYaml(`${scheme}://${host}${port}${slashes}`) }, ISSUER_AT);
      }),
      { numRuns: 9 },
    );
    const asIssuer = `${PUBLIC}/as`;
    await expectRefused({ 'gateway.yaml': gatewayYaml(asIssuer), 'signed.yaml': SIGNED_ROUTE, 'jwt.yaml': jwtRouteYaml(asIssuer) }, ISSUER_AT);
  });

  it('[K77] another issuer whose jwks_uri is on the gateway\'s own origin (its key set, or anything it serves)', async () => {
    for (const jwks of [`${PUBLIC}/jwks.json`, `${PUBLIC}/.well-known/jwks.json`, 'HTTP://127.0.0.1:8080/anything']) {
      await expectRefused({ 'gateway.yaml': gatewayYaml(), 'signed.yaml': SIGNED_ROUTE, 'jwt.yaml': jwtRouteYaml('https://idp.example.com', jwks) }, KEYS_AT);
    }
  });

  it('[K77] accepted: the same token.jwt route with no signed route, and a signed route beside a foreign issuer and keys', async () => {
    await expectAccepted({ 'gateway.yaml': gatewayYaml(), 'jwt.yaml': jwtRouteYaml(PUBLIC, `${PUBLIC}/.well-known/jwks.json`) });
    await expectAccepted({ 'gateway.yaml': gatewayYaml(), 'signed.yaml': SIGNED_ROUTE, 'jwt.yaml': jwtRouteYaml('https://idp.example.com') });
    // Another port of the same host is another origin, and another issuer.
    await expectAccepted({ 'gateway.yaml': gatewayYaml(), 'signed.yaml': SIGNED_ROUTE, 'jwt.yaml': jwtRouteYaml('http://127.0.0.1:8081', 'http://127.0.0.1:8081/jwks') });
  });
});

describe('[K77] the credential an upstream received never passes as an access token', () => {
  let upstream: RecordingUpstream;
  let gateway: AsGateway;
  const SECRET = 'svc-secret-value-0123456789';
  const PLAIN_RESOURCE = 'https://plain.example.test/mcp';

  beforeAll(async () => {
    upstream = await startRecordingUpstream();
    gateway = await startAsGateway({
      upstream: `${upstream.origin}/mcp`,
      routes: {
        'plain.yaml': { path: '/plain/mcp', resource: PLAIN_RESOURCE, scopes_supported: ['mcp:read'] },
        // Its credential's audience is the plain route's resource: a replay there has the right `aud`.
        'signed.yaml': { path: '/signed/mcp', scopes_supported: ['mcp:read'], upstream_auth: { kind: 'signed', audience: PLAIN_RESOURCE } },
      },
      authorizationServer: { clients: [{ client_id: 'svc', client_secret: { env: 'SVC_SECRET' }, grant_types: ['client_credentials'], scopes: ['mcp:read'] }] },
      env: { SVC_SECRET: SECRET },
    });
  });

  afterAll(async () => {
    await gateway?.stop();
    await upstream?.close();
  });

  async function accessToken(resource: string): Promise<string> {
    const res = await fetch(`${gateway.issuer}/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`svc:${SECRET}`).toString('base64')}` },
      body: new URLSearchParams({ grant_type: 'client_credentials', resource, scope: 'mcp:read' }),
    });
    expect(res.status).toBe(200);
    return String(((await res.json()) as { access_token: string }).access_token);
  }

  const postWith = (path: string, bearer: string) =>
    fetch(`${gateway.issuer}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });

  it('[K77] typ JWT (not at+jwt): refused by the built-in verifier on every route, its own audience\'s included; the refused configuration would have taken it', async () => {
    const token = await accessToken(`${gateway.issuer}/signed/mcp`);
    const before = upstream.requests.length;
    expect((await postWith('/signed/mcp', token)).status).toBe(200);
    const credential = upstream.headerValues('authorization').at(-1)!.replace(/^Bearer /, '');
    expect(upstream.requests.length).toBe(before + 1);
    expect(decodeProtectedHeader(credential).typ).toBe('JWT');
    const claims = decodeJwt(credential);
    expect(claims).toMatchObject({ iss: gateway.issuer, aud: PLAIN_RESOURCE, sub: 'svc', client_id: 'svc' });
    for (const path of ['/signed/mcp', '/plain/mcp']) {
      const res = await postWith(path, credential);
      expect(res.status, path).toBe(401);
      expect(res.headers.get('www-authenticate'), path).toMatch(/invalid_token/);
    }
    expect(upstream.requests.length).toBe(before + 1);
    // What load refuses: a generic JWT route trusting the gateway as issuer reads no typ, and takes it for its audience.
    const generic = createJwtVerifier(PLAIN_RESOURCE, { kind: 'jwt', issuer: gateway.issuer, algorithms: ['ES256', 'RS256', 'EdDSA', 'PS256'], clockSkewSeconds: 0 }, createRemoteJWKSet(new URL(`${gateway.issuer}/jwks.json`)));
    await expect(generic.verify(credential, undefined as never, undefined as never)).resolves.toMatchObject({ subject: 'svc' });
  });
});
