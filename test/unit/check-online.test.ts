import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { checkOnline } from '../../src/check/online-check.js';
import { keyFits } from '../../src/check/probe-issuer.js';
import { loadConfig } from '../../src/config/load.js';

const SECRET = 'check-online-secret-0123456789';
const PAT = 'check-online-pat-0123456789';

/** An IdP (OpenID metadata only, a JWKS, introspection) and an MCP upstream at /mcp, on one port. */
let server: Server;
let base = '';
let jwks: unknown;
const seen: string[] = [];

beforeAll(async () => {
  const { publicKey } = await generateKeyPair('ES256');
  jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', use: 'sig' }] };
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? ''}`);
    const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
      res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
    req.resume();
    req.on('end', () => {
      if (req.url === '/.well-known/openid-configuration') return json(200, { issuer: base, jwks_uri: `${base}/jwks` });
      if (req.url === '/jwks') return json(200, jwks);
      if (req.url === '/introspect') {
        // RFC 6749 §2.3.1: each part form-encoded before base64.
        const [id, secret] = Buffer.from(req.headers.authorization?.slice(6) ?? '', 'base64').toString().split(':').map(decodeURIComponent);
        const good = id === 'gateway' && secret === SECRET;
        return good ? json(200, { active: false }) : json(401, { error: 'invalid_client' });
      }
      if (req.url === '/mcp' && req.method === 'POST') {
        if (req.headers.authorization !== `Bearer ${PAT}`) return json(401, { error: 'unauthorized' });
        return json(200, { jsonrpc: '2.0', id: 1, result: { protocolVersion: '2025-06-18', serverInfo: { name: 'fake\u001b[31m', version: '1' } } }, { 'mcp-session-id': 's1' });
      }
      if (req.url === '/mcp' && req.method === 'DELETE') return res.writeHead(204).end();
      res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** `check --online` over one route file; the report's lines, with the server's address shortened. */
async function online(route: Record<string, unknown>, gateway: Record<string, unknown> = {}): Promise<{ ok: boolean; text: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'mag-online-'));
  try {
    await writeFile(join(dir, 'gateway.yaml'), stringify({ public_url: 'https://mcp.example.com', ...gateway }));
    const upstreamAuth = { kind: 'static', value: { env: 'PAT' } };
    await writeFile(join(dir, 'a.yaml'), stringify({ path: '/a/mcp', upstream: `${base}/mcp`, authorization_servers: [base], upstream_auth: upstreamAuth, ...route }));
    const report = await checkOnline(await loadConfig(dir, { PAT, SECRET }));
    return { ok: report.ok, text: report.lines.join('\n').replaceAll(base, 'IDP') };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const jwt = (overrides: Record<string, unknown> = {}) => ({ token: { jwt: { issuer: base, algorithms: ['ES256'], ...overrides } } });

describe('check --online', () => {
  it('reaches the metadata, the key set and the upstream, and ends the session it opened', async () => {
    seen.length = 0;
    const { ok, text } = await online(jwt());
    expect(text).toBe(
      [
        'online:',
        '/a/mcp  (tokens must carry aud https://mcp.example.com/a/mcp)',
        '  ok     issuer metadata: IDP/.well-known/openid-configuration names issuer IDP',
        '  ok     jwks: IDP/jwks has 1 key, 1 for ES256',
        '  ok     upstream: IDP/mcp answered initialize with HTTP 200 (fake?[31m, protocol 2025-06-18)',
        'online: everything answered as expected',
      ].join('\n'),
    );
    expect(ok).toBe(true);
    expect(seen).toContain(`DELETE /mcp Bearer ${PAT}`);
  });

  it('refuses an issuer that differs from the metadata by a trailing slash', async () => {
    const { ok, text } = await online({ ...jwt({ issuer: `${base}/` }), authorization_servers: [`${base}/`] });
    expect(ok).toBe(false);
    expect(text).toContain('error  issuer metadata: IDP/.well-known/openid-configuration names issuer "IDP", the configuration IDP/: the gateway needs them equal exactly (only a trailing slash differs)');
  });

  it('reports a key set with no key for the allowed algorithms, and a wrong upstream path', async () => {
    const { ok, text } = await online({ ...jwt({ algorithms: ['RS256'] }), upstream: `${base}/` });
    expect(ok).toBe(false);
    expect(text).toContain('error  jwks: IDP/jwks has 1 key, 0 for RS256: no token can be verified (token.jwt.algorithms?)');
    expect(text).toContain('error  upstream: IDP/ answered initialize with HTTP 404: is the path right?');
    expect(text).toMatch(/online: 2 problems$/);
  });

  it('reports an unreachable upstream by its error code, and an upstream refusing the credential', async () => {
    expect((await online({ ...jwt(), upstream: 'http://127.0.0.1:1/mcp' })).text).toContain('error  upstream: http://127.0.0.1:1/mcp: unreachable (ECONNREFUSED)');
    expect((await online({ ...jwt(), upstream_auth: { kind: 'none' } })).text).toContain('error  upstream: IDP/mcp answered initialize with HTTP 401: it refuses the credential the gateway would send (upstream_auth none)');
  });

  it('probes an introspection endpoint with the client credentials, never printing them', async () => {
    const introspection = (secret: string) => ({ token: { introspection: { endpoint: `${base}/introspect`, client_id: 'gateway', client_secret: { env: secret } } } });
    const good = await online(introspection('SECRET'));
    expect(good.text).toContain('ok     introspection: IDP/introspect accepts client gateway and calls an unknown token inactive');
    const bad = await online(introspection('PAT'));
    expect(bad.ok).toBe(false);
    expect(bad.text).toContain('error  introspection: IDP/introspect answered HTTP 401 invalid_client: the client credentials are refused');
    for (const text of [good.text, bad.text]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(PAT);
    }
  });

  it('reports an advertised authorization server without metadata, and names no URL credentials', async () => {
    const { ok, text } = await online({ ...jwt(), authorization_servers: [base, 'http://user:hunter2@127.0.0.1:1'] });
    expect(ok).toBe(false);
    expect(text).toContain('error  authorization server: http://***@127.0.0.1:1/ has no metadata, so clients cannot sign in');
    expect(text).not.toContain('hunter2');
  });
});

describe('check --online with the built-in authorization server', () => {
  it("probes the third-party login's OpenID metadata, and has nothing to reach for the built-in tokens", async () => {
    const login = (issuer: string) => ({ authorization_server: { login: { kind: 'oidc', issuer, client_id: 'gw' } } });
    const good = await online({ authorization_servers: undefined }, login(base));
    expect(good.text).toContain('ok     tokens: signed by the built-in authorization server (nothing to reach)');
    expect(good.text).toContain('authorization_server.login\n  ok     login issuer: IDP/.well-known/openid-configuration names issuer IDP');
    expect(good.ok).toBe(true);
    const slash = await online({ authorization_servers: undefined }, login(`${base}/`));
    expect(slash.ok).toBe(false);
    expect(slash.text).toContain('error  login issuer: IDP/.well-known/openid-configuration names issuer "IDP", the configuration IDP/: the gateway needs them equal exactly (only a trailing slash differs)');
  });
});

describe('check --online with enterprise IdPs (ID-JAG)', () => {
  it("fetches each enterprise IdP's key set, as the jwt-bearer grant will", async () => {
    const idps = (jwksUri: string) => ({ authorization_server: { login: { kind: 'oidc', issuer: base, client_id: 'gw' }, enterprise_idps: [{ issuer: base, jwks_uri: jwksUri }] } });
    const good = await online({ authorization_servers: undefined }, idps(`${base}/jwks`));
    expect(good.text).toContain('authorization_server.enterprise_idps  (ID-JAGs of IDP)\n  ok     jwks: IDP/jwks has 1 key, 1 for RS256');
    expect(good.ok).toBe(true);
    const bad = await online({ authorization_servers: undefined }, idps(`${base}/no-keys`));
    expect(bad.ok).toBe(false);
    expect(bad.text).toMatch(/authorization_server\.enterprise_idps {2}\(ID-JAGs of IDP\)\n {2}error {2}jwks: IDP\/no-keys: /);
  });
});

describe('keyFits', () => {
  it('matches key type, curve, use and alg', () => {
    expect(keyFits({ kty: 'EC', crv: 'P-256' }, 'ES256')).toBe(true);
    expect(keyFits({ kty: 'EC', crv: 'P-384' }, 'ES256')).toBe(false);
    expect(keyFits({ kty: 'RSA', alg: 'RS256' }, 'PS256')).toBe(false);
    expect(keyFits({ kty: 'RSA', use: 'enc' }, 'RS256')).toBe(false);
    expect(keyFits({ kty: 'OKP', crv: 'Ed25519', alg: 'EdDSA' }, 'Ed25519')).toBe(true);
  });
});
