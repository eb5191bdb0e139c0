/**
 * The built-in AS's signing keys (configured JWK or JWKS with a rotation, the dev key and its
 * loopback-only rule) and its metadata documents (path-inserted forms for an issuer with a path,
 * what is advertised, nothing reflected from the request).
 */
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT, decodeProtectedHeader, importJWK, type JWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadSigningKeys, SigningKeyError } from '../../src/authorization-server/keys/signing-keys.js';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/security-fixtures.js';
import { startAsGateway, type AsGateway } from '../helpers/authorization-server.js';

let upstream: RecordingUpstream;
beforeAll(async () => {
  upstream = await startRecordingUpstream();
});
afterAll(async () => {
  await upstream?.close();
});

describe('signing keys', () => {
  it('refuses to generate a dev key when public_url is not loopback', async () => {
    await expect(loadSigningKeys({ publicUrl: 'https://mcp.example.com', devKeyDirectory: join(tmpdir(), 'never') })).rejects.toThrow(/signing_key is required/);
  });

  it('generates the dev key once, 0600 in a 0700 directory, and reuses it', async () => {
    const dir = join(await mkdtemp(join(tmpdir(), 'mag-devkey-')), '.dev-keys');
    try {
      const first = await loadSigningKeys({ publicUrl: 'http://127.0.0.1:8080', devKeyDirectory: dir });
      const second = await loadSigningKeys({ publicUrl: 'http://localhost:8080', devKeyDirectory: dir });
      expect(second.jwks).toEqual(first.jwks);
      expect((await stat(join(dir, 'signing.jwk.json'))).mode & 0o777).toBe(0o600);
      expect((await stat(dir)).mode & 0o777).toBe(0o700);
      expect(JSON.stringify(first.jwks)).not.toMatch(/"d"/);
    } finally {
      await rm(join(dir, '..'), { recursive: true, force: true });
    }
  });

  it.each([
    ['a symmetric key', { kty: 'oct', k: 'c2VjcmV0', kid: 'x', alg: 'HS256' }],
    ['a public key only', { kty: 'EC', crv: 'P-256', x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0', kid: 'x' }],
    ['not JSON', 'nope'],
    ['an empty JWKS', { keys: [] }],
  ])('refuses %s', async (_name, key) => {
    await expect(loadSigningKeys({ configured: typeof key === 'string' ? key : JSON.stringify(key), publicUrl: 'https://mcp.example.com' })).rejects.toThrow(SigningKeyError);
  });

  it('refuses a key without kid', async () => {
    const { kid: _kid, ...key } = await generateSigningKey();
    await expect(loadSigningKeys({ configured: JSON.stringify(key), publicUrl: 'https://mcp.example.com' })).rejects.toThrow(/kid/);
  });

  describe('a configured JWKS: the first key signs, the others stay verifiable (rotation)', () => {
    let gateway: AsGateway;
    let current: JWK;
    let previous: JWK;

    beforeAll(async () => {
      current = await generateSigningKey();
      previous = await generateSigningKey();
      gateway = await startAsGateway({
        upstream: `${upstream.origin}/mcp`,
        routes: { 'r.yaml': { path: '/r/mcp', scopes_supported: ['mcp:read'] } },
        authorizationServer: {
          signing_key: { env: 'AS_KEYS' },
          clients: [{ client_id: 'svc', client_secret: { env: 'SVC_SECRET' }, grant_types: ['client_credentials'] }],
        },
        env: { AS_KEYS: JSON.stringify({ keys: [current, previous] }), SVC_SECRET: 'a-long-service-secret-value' },
      });
    });
    afterAll(async () => {
      await gateway?.stop();
    });

    const call = (token: string) =>
      fetch(`${gateway.issuer}/r/mcp`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
      });

    it('publishes both public keys and signs with the first', async () => {
      const jwks = (await (await fetch(`${gateway.issuer}/jwks.json`)).json()) as { keys: JWK[] };
      expect(jwks.keys.map((k) => k.kid)).toEqual([current.kid, previous.kid]);
      for (const key of jwks.keys) expect(key).not.toHaveProperty('d');
      const res = await fetch(`${gateway.issuer}/token`, {
        method: 'POST',
        body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'svc', client_secret: 'a-long-service-secret-value' }),
      });
      const { access_token } = (await res.json()) as { access_token: string };
      expect(decodeProtectedHeader(access_token)).toMatchObject({ kid: current.kid, alg: 'ES256', typ: 'at+jwt' });
      expect((await call(access_token)).status).toBe(200);
    });

    it('accepts a token signed with the previous key, and refuses one signed with a key it does not publish', async () => {
      const now = Math.floor(Date.now() / 1000);
      // Every access token of this AS names its grant (gid): revocation is checked by grant.
      const claims = { iss: gateway.issuer, sub: 'svc', aud: `${gateway.issuer}/r/mcp`, client_id: 'svc', scope: '', iat: now, exp: now + 60, jti: 'j', gid: 'rotation-grant' };
      const sign = async (key: JWK) => new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: key.kid! }).sign(await importJWK(key, 'ES256'));
      expect((await call(await sign(previous))).status).toBe(200);
      const stranger = await generateSigningKey();
      expect((await call(await sign({ ...stranger, kid: current.kid })).then((r) => r.status))).toBe(401);
    });
  });
});

describe('metadata', () => {
  let gateway: AsGateway;
  beforeAll(async () => {
    gateway = await startAsGateway({
      upstream: `${upstream.origin}/mcp`,
      routes: {
        'a.yaml': { path: '/a/mcp', scopes_supported: ['mcp:read', 'offline_access'], required_scopes: ['mcp:read'] },
        // files:write is asked for by step-up only: not in the protected resource's minimal set, but the AS grants and advertises it.
        'b.yaml': { path: '/b/mcp', scopes_supported: ['files:read'], rules: [{ match: { method: 'tools/call', tool: 'write_*' }, require_scopes: ['files:write'] }] },
      },
      authorizationServer: { issuer: 'http://127.0.0.1:1/tenant', registration: { dynamic: false, client_id_metadata_documents: false } },
    });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('is served at the root and path-inserted forms, with issuer exactly the configured one', async () => {
    const paths = [
      '/.well-known/oauth-authorization-server',
      '/.well-known/openid-configuration',
      '/.well-known/oauth-authorization-server/tenant',
      '/.well-known/openid-configuration/tenant',
      '/tenant/.well-known/openid-configuration',
    ];
    for (const path of paths) {
      const res = await fetch(`${gateway.issuer}${path}`, { headers: { host: 'evil.example', 'x-forwarded-host': 'evil.example' } });
      expect(res.status, path).toBe(200);
      const body = (await res.json()) as Record<string, unknown>;
      expect(body.issuer).toBe('http://127.0.0.1:1/tenant');
      expect(body.token_endpoint).toBe('http://127.0.0.1:1/token');
      expect(JSON.stringify(body)).not.toContain('evil.example');
    }
    expect((await fetch(`${gateway.issuer}/.well-known/oauth-authorization-server/other`)).status).toBe(404);
  });

  it('advertises the union of the routes’ scopes (their rules’ included) without offline_access, and no registration when it is off', async () => {
    const body = (await (await fetch(`${gateway.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(body.scopes_supported).toEqual(['mcp:read', 'files:read', 'files:write']);
    expect(body).not.toHaveProperty('registration_endpoint');
    expect(body.client_id_metadata_document_supported).toBe(false);
    const register = await fetch(`${gateway.issuer}/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    expect(register.status).toBe(404);
  });

  it('answers CORS preflights for browser-based clients', async () => {
    const res = await fetch(`${gateway.issuer}/.well-known/oauth-authorization-server`, {
      method: 'OPTIONS',
      headers: { origin: 'https://inspector.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'mcp-protocol-version' },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-headers')).toContain('mcp-protocol-version');
  });
});
