import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { base64url, CompactSign, EncryptJWT, exportJWK, exportSPKI, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';
import { JwksRegistry, metadataUrls } from '../../src/auth/jwks.js';
import { createJwtVerifier, createLocalJwtVerifier } from '../../src/auth/jwt-verifier.js';
import { createTokenVerifier } from '../../src/auth/create-token-verifier.js';
import type { JwtAlgorithm } from '../../src/config/jws-algorithms.js';
import type { JwtTokenConfig, RouteConfig } from '../../src/config/types.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { rejection } from '../helpers/rejection.js';
import { watchLoopBlocks } from '../helpers/loop-blocks.js';

const ISSUER = 'https://idp.example.com/tenant';
const RESOURCE = 'https://mcp.example.com/github/mcp';

/** A JWKS / metadata server on 127.0.0.1 that counts every request by path. */
class KeyServer {
  readonly hits = new Map<string, number>();
  routes = new Map<string, (res: ServerResponse) => void>();
  private server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const path = req.url ?? '';
    this.hits.set(path, (this.hits.get(path) ?? 0) + 1);
    const handler = this.routes.get(path);
    if (handler) handler(res);
    else res.writeHead(404).end();
  });
  base = '';

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.base = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  json(path: string, body: unknown, status = 200): void {
    this.routes.set(path, (res) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body)));
  }

  count(path: string): number {
    return this.hits.get(path) ?? 0;
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

let server: KeyServer;
let es: { privateKey: CryptoKey; publicKey: CryptoKey };
let rsa: { privateKey: CryptoKey; publicKey: CryptoKey };
let attacker: { privateKey: CryptoKey; publicKey: CryptoKey };
let jwks: { keys: JWK[] };

beforeAll(async () => {
  es = await generateKeyPair('ES256', { extractable: true });
  rsa = await generateKeyPair('RS256', { extractable: true });
  attacker = await generateKeyPair('ES256', { extractable: true });
  jwks = {
    keys: [
      { ...(await exportJWK(es.publicKey)), kid: 'es1', alg: 'ES256', use: 'sig' },
      { ...(await exportJWK(rsa.publicKey)), kid: 'rsa1', alg: 'RS256', use: 'sig' },
    ],
  };
  server = await new KeyServer().start();
  server.json('/jwks', jwks);
});
afterAll(() => server.stop());
afterEach(() => server.hits.clear());

const now = () => Math.floor(Date.now() / 1000);

function claims(overrides: Record<string, unknown> = {}): JWTPayload {
  return { iss: ISSUER, aud: RESOURCE, sub: 'user-1', iat: now(), exp: now() + 300, scope: 'mcp:read mcp:write', client_id: 'client-1', ...overrides };
}

function without(...names: string[]): JWTPayload {
  const payload = claims();
  for (const name of names) delete payload[name];
  return payload;
}

function sign(payload: JWTPayload = claims(), header: Record<string, unknown> = {}, key: CryptoKey | Uint8Array = es.privateKey): Promise<string> {
  return new SignJWT(payload).setProtectedHeader({ alg: 'ES256', kid: 'es1', ...header }).sign(key);
}

function jwtConfig(overrides: Partial<JwtTokenConfig> = {}): JwtTokenConfig {
  return { kind: 'jwt', issuer: ISSUER, jwksUri: `${server.base}/jwks`, algorithms: ['ES256', 'RS256'], clockSkewSeconds: 30, ...overrides };
}

function verifier(registry = new JwksRegistry(), config = jwtConfig(), resource = RESOURCE) {
  return createJwtVerifier(resource, config, registry.get(config.issuer, config.jwksUri));
}

async function expectInvalid(token: string, v = verifier()): Promise<GatewayError> {
  const err = await rejection(v.verify(token));
  expect(err.status).toBe(401);
  expect(err.code).toBe('invalid_token');
  expect(err.description).not.toContain(token.slice(0, 20));
  return err;
}

describe('JWT verifier: valid tokens', () => {
  it('returns the principal, scopes and expiry', async () => {
    const token = await sign();
    const auth = await verifier().verify(token);
    expect(auth).toMatchObject({ issuer: ISSUER, subject: 'user-1', clientId: 'client-1', scopes: ['mcp:read', 'mcp:write'], token });
    expect(auth.expiresAt).toBeGreaterThan(now());
    expect(auth.tokenHash).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('reads scp arrays and azp, and accepts an aud array containing the resource', async () => {
    const payload = claims({ scope: undefined, scp: ['a', 'b'], client_id: undefined, azp: 'spa', aud: ['other', RESOURCE] });
    const auth = await verifier().verify(await sign(JSON.parse(JSON.stringify(payload)) as JWTPayload));
    expect(auth).toMatchObject({ scopes: ['a', 'b'], clientId: 'spa' });
  });

  it('accepts RS256 and at+jwt typed tokens', async () => {
    const token = await new SignJWT(claims()).setProtectedHeader({ alg: 'RS256', kid: 'rsa1', typ: 'at+jwt' }).sign(rsa.privateKey);
    await expect(verifier().verify(token)).resolves.toMatchObject({ subject: 'user-1' });
  });

  it('accepts a token expired within the clock skew', async () => {
    await expect(verifier().verify(await sign(claims({ exp: now() - 10 })))).resolves.toBeDefined();
  });
});

describe('JWT verifier: algorithm and header attacks (SECURITY A.2)', () => {
  it('refuses alg none', async () => {
    const header = base64url.encode(JSON.stringify({ alg: 'none', typ: 'JWT' }));
    const payload = base64url.encode(JSON.stringify(claims()));
    await expectInvalid(`${header}.${payload}.`);
    expect(server.count('/jwks')).toBe(0);
  });

  it('refuses a token with its signature removed', async () => {
    const [h, p] = (await sign()).split('.');
    await expectInvalid(`${h}.${p}.`);
  });

  it('refuses HS256 signed with the public key bytes', async () => {
    const pem = new TextEncoder().encode(await exportSPKI(rsa.publicKey));
    const jwk = await exportJWK(rsa.publicKey);
    for (const secret of [pem, new TextEncoder().encode(JSON.stringify(jwk))]) {
      await expectInvalid(await new SignJWT(claims()).setProtectedHeader({ alg: 'HS256', kid: 'rsa1' }).sign(secret));
    }
    expect(server.count('/jwks')).toBe(0);
  });

  it('refuses HS* even when configured', () => {
    expect(() => verifier(new JwksRegistry(), jwtConfig({ algorithms: ['HS256' as JwtAlgorithm] }))).toThrow(TypeError);
    expect(() => createLocalJwtVerifier({ issuer: ISSUER, audience: RESOURCE, algorithms: ['none'], getKeySet: () => es.publicKey })).toThrow(TypeError);
    expect(() => verifier(new JwksRegistry(), jwtConfig({ algorithms: [] }))).toThrow(TypeError);
  });

  it('refuses an algorithm outside the pinned list', async () => {
    const v = verifier(new JwksRegistry(), jwtConfig({ algorithms: ['ES256'] }));
    const token = await new SignJWT(claims()).setProtectedHeader({ alg: 'RS256', kid: 'rsa1' }).sign(rsa.privateKey);
    expect((await expectInvalid(token, v)).description).toBe('Token algorithm not allowed');
  });

  it('refuses an embedded jwk, never trusting it', async () => {
    const jwk = await exportJWK(attacker.publicKey);
    expect((await expectInvalid(await sign(claims(), { jwk, kid: undefined }, attacker.privateKey))).description).toBe('Token header "jwk" is not accepted');
  });

  it('refuses jku, x5u and x5c headers and never fetches them', async () => {
    server.json('/evil-jwks', { keys: [await exportJWK(attacker.publicKey)] });
    for (const header of [{ jku: `${server.base}/evil-jwks` }, { x5u: `${server.base}/evil-jwks` }, { x5c: ['MIIB'] }]) {
      const err = await expectInvalid(await sign(claims(), header, attacker.privateKey));
      expect(err.description).toBe(`Token header "${Object.keys(header)[0]}" is not accepted`);
    }
    expect(server.count('/evil-jwks')).toBe(0);
  });

  it('refuses a crit header', async () => {
    const token = await new CompactSign(new TextEncoder().encode(JSON.stringify(claims())))
      .setProtectedHeader({ alg: 'ES256', kid: 'es1', crit: ['b64'], b64: true })
      .sign(es.privateKey);
    await expectInvalid(token);
  });

  it('refuses a valid-looking token signed by another key', async () => {
    expect((await expectInvalid(await sign(claims(), {}, attacker.privateKey))).description).toBe('Invalid token signature');
  });
});

describe('JWT verifier: claims (SECURITY A.4)', () => {
  it.each(['exp', 'iss', 'aud', 'sub'])('requires %s', async (name) => {
    await expectInvalid(await sign(without(name)));
  });

  it('refuses a token expired beyond the skew', async () => {
    expect((await expectInvalid(await sign(claims({ exp: now() - 60 })))).description).toBe('Token expired');
  });

  it('refuses nbf in the future', async () => {
    await expectInvalid(await sign(claims({ nbf: now() + 300 })));
  });

  it('refuses an empty or non-string sub', async () => {
    await expectInvalid(await sign(claims({ sub: '' })));
  });

  it.each([`${ISSUER}/`, 'https://IDP.example.com/tenant', 'https://idp.example.com/Tenant', 'HTTPS://idp.example.com/tenant', 'https://idp.example.com/ten', 'https://idp.example.com/tenant/x', 'https://idp.example.com'])(
    'refuses issuer variant %s',
    async (iss) => {
      await expectInvalid(await sign(claims({ iss })));
    },
  );

  it.each([
    `${RESOURCE}/`,
    'https://mcp.example.com/github',
    `${RESOURCE}2`,
    `${RESOURCE}/sub`,
    'https://MCP.example.com/github/mcp',
    'HTTPS://mcp.example.com/github/mcp',
    'https://mcp.example.com/GITHUB/mcp',
    'https://evil-mcp.example.com/github/mcp',
    'https://mcp.example.com.evil.com/github/mcp',
    'https://mcp.example.com:443/github/mcp',
    'https://mcp.example.com/other/mcp',
  ])('refuses audience variant %s (exact comparison, SECURITY B.9)', async (aud) => {
    await expectInvalid(await sign(claims({ aud })));
    await expectInvalid(await sign(claims({ aud: [aud, 'https://else'] })));
  });
});

describe('JWT verifier: size and format (SECURITY A.5)', () => {
  it('refuses a JWE without touching keys', async () => {
    const jwe = await new EncryptJWT(claims()).setProtectedHeader({ alg: 'dir', enc: 'A256GCM' }).encrypt(new Uint8Array(32));
    expect(jwe.split('.')).toHaveLength(5);
    expect((await expectInvalid(jwe)).description).toBe('Encrypted tokens are not accepted');
    expect(server.count('/jwks')).toBe(0);
  });

  it('refuses a 64 KiB token before crypto', async () => {
    const token = await sign(claims({ pad: 'x'.repeat(64 * 1024) }));
    const work = watchLoopBlocks();
    expect((await expectInvalid(token)).description).toBe('Token too large');
    // CPU time, which a loaded machine does not stretch as it does the wall clock.
    expect(work.stop().totalCpuMs).toBeLessThan(100);
    expect(server.count('/jwks')).toBe(0);
  });

  it.each(['abc', 'a.b', 'a.b.c.d', '...', 'e30.e30.'])('refuses malformed token %s', async (token) => {
    await expectInvalid(token);
  });
});

describe('JWKS source', () => {
  it('refetches at most once per cooldown under an unknown-kid storm (SECURITY A.3)', async () => {
    const v = verifier(new JwksRegistry({ cooldownMs: 300 }));
    await v.verify(await sign());
    expect(server.count('/jwks')).toBe(1);
    const storm = await Promise.all(Array.from({ length: 20 }, (_, i) => sign(claims(), { kid: `unknown-${i}` })));
    // Inside the cooldown: no refetch at all.
    for (const err of await Promise.all(storm.map((t) => rejection(v.verify(t))))) expect(err.code).toBe('invalid_token');
    expect(server.count('/jwks')).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 350));
    // Cooldown over: the whole storm (concurrent and sequential) shares one refetch.
    await Promise.all(storm.map((t) => rejection(v.verify(t))));
    for (const t of storm) await rejection(v.verify(t));
    expect(server.count('/jwks')).toBe(2);
  });

  it('picks up a rotated key after the cooldown', async () => {
    const rotated = await generateKeyPair('ES256', { extractable: true });
    server.json('/rotating', { keys: [jwks.keys[0]] });
    const v = verifier(new JwksRegistry({ cooldownMs: 0 }), jwtConfig({ jwksUri: `${server.base}/rotating` }));
    await v.verify(await sign());
    server.json('/rotating', { keys: [jwks.keys[0], { ...(await exportJWK(rotated.publicKey)), kid: 'es2', alg: 'ES256' }] });
    await expect(v.verify(await sign(claims(), { kid: 'es2' }, rotated.privateKey))).resolves.toBeDefined();
  });

  it('answers 503 when the JWKS is down, and backs off instead of fetching per request', async () => {
    server.json('/broken', { error: 'nope' }, 500);
    const v = verifier(new JwksRegistry({ retryBaseMs: 60_000 }), jwtConfig({ jwksUri: `${server.base}/broken` }));
    for (let i = 0; i < 5; i++) {
      const err = await rejection(v.verify(await sign()));
      expect(err).toMatchObject({ status: 503, code: 'temporarily_unavailable' });
    }
    expect(server.count('/broken')).toBe(1);
  });

  it('answers 503 when the JWKS host refuses connections or is too slow', async () => {
    const closed = await new KeyServer().start();
    await closed.stop();
    const refused = verifier(new JwksRegistry(), jwtConfig({ jwksUri: `${closed.base}/jwks` }));
    expect((await rejection(refused.verify(await sign()))).status).toBe(503);

    server.routes.set('/slow', () => undefined);
    const slow = verifier(new JwksRegistry({ timeoutMs: 200 }), jwtConfig({ jwksUri: `${server.base}/slow` }));
    expect((await rejection(slow.verify(await sign()))).status).toBe(503);
  });

  it('does not follow redirects, and refuses a body that is not a JWKS', async () => {
    server.routes.set('/redirect', (res) => res.writeHead(302, { location: '/jwks' }).end());
    const redirected = verifier(new JwksRegistry(), jwtConfig({ jwksUri: `${server.base}/redirect` }));
    expect((await rejection(redirected.verify(await sign()))).status).toBe(503);
    expect(server.count('/jwks')).toBe(0);

    server.json('/not-jwks', { keys: 'no' });
    const garbage = verifier(new JwksRegistry(), jwtConfig({ jwksUri: `${server.base}/not-jwks` }));
    expect((await rejection(garbage.verify(await sign()))).status).toBe(503);
  });

  it('shares one source per (issuer, jwks_uri)', () => {
    const registry = new JwksRegistry();
    expect(registry.get(ISSUER, 'https://a/jwks')).toBe(registry.get(ISSUER, 'https://a/jwks'));
    expect(registry.get(ISSUER, 'https://a/jwks')).not.toBe(registry.get(ISSUER, 'https://b/jwks'));
    expect(registry.get(ISSUER)).not.toBe(registry.get(ISSUER, 'https://a/jwks'));
  });

  it('builds RFC 8414 path-inserted and OpenID metadata URLs', () => {
    expect(metadataUrls('https://idp.example.com')).toEqual(['https://idp.example.com/.well-known/oauth-authorization-server', 'https://idp.example.com/.well-known/openid-configuration']);
    expect(metadataUrls('https://idp.example.com/realms/x/')).toEqual([
      'https://idp.example.com/.well-known/oauth-authorization-server/realms/x',
      'https://idp.example.com/realms/x/.well-known/openid-configuration',
    ]);
  });
});

describe('JWKS discovery', () => {
  it('discovers jwks_uri from RFC 8414 metadata with path insertion', async () => {
    const issuer = `${server.base}/t1`;
    server.json('/.well-known/oauth-authorization-server/t1', { issuer, jwks_uri: `${server.base}/jwks` });
    const v = verifier(new JwksRegistry(), jwtConfig({ issuer, jwksUri: undefined }));
    await expect(v.verify(await sign(claims({ iss: issuer })))).resolves.toMatchObject({ issuer });
    await v.verify(await sign(claims({ iss: issuer, jti: 'again' })));
    expect(server.count('/.well-known/oauth-authorization-server/t1')).toBe(1);
    expect(server.count('/jwks')).toBe(1);
  });

  it('falls back to the OpenID configuration', async () => {
    const issuer = `${server.base}/t2`;
    server.json('/t2/.well-known/openid-configuration', { issuer, jwks_uri: `${server.base}/jwks` });
    const v = verifier(new JwksRegistry(), jwtConfig({ issuer, jwksUri: undefined }));
    await expect(v.verify(await sign(claims({ iss: issuer })))).resolves.toBeDefined();
    expect(server.count('/.well-known/oauth-authorization-server/t2')).toBe(1);
  });

  it('refuses metadata naming another issuer, and retries discovery with backoff', async () => {
    const issuer = `${server.base}/t3`;
    server.json('/.well-known/oauth-authorization-server/t3', { issuer: `${issuer}/`, jwks_uri: `${server.base}/jwks` });
    server.json('/t3/.well-known/openid-configuration', { issuer: 'https://elsewhere', jwks_uri: `${server.base}/jwks` });
    const v = verifier(new JwksRegistry({ retryBaseMs: 200 }), jwtConfig({ issuer, jwksUri: undefined }));
    const token = await sign(claims({ iss: issuer }));
    expect((await rejection(v.verify(token))).status).toBe(503);
    expect((await rejection(v.verify(token))).status).toBe(503);
    expect(server.count('/.well-known/oauth-authorization-server/t3')).toBe(1);
    expect(server.count('/jwks')).toBe(0);
    // After the backoff, the next request discovers again and succeeds once the metadata is fixed.
    server.json('/.well-known/oauth-authorization-server/t3', { issuer, jwks_uri: `${server.base}/jwks` });
    await new Promise((resolve) => setTimeout(resolve, 250));
    await expect(v.verify(token)).resolves.toBeDefined();
  });
});

describe('local JWT verifier (built-in AS)', () => {
  it('verifies with a local key and applies the same checks', async () => {
    const v = createLocalJwtVerifier({ issuer: ISSUER, audience: RESOURCE, algorithms: ['ES256'], getKeySet: () => es.publicKey });
    await expect(v.verify(await sign())).resolves.toMatchObject({ subject: 'user-1' });
    await expectInvalid(await sign(claims({ aud: `${RESOURCE}/` })), v);
    await expectInvalid(await sign(claims({ exp: now() - 1 })), v);
    await expectInvalid(await sign(claims(), { jwk: await exportJWK(attacker.publicKey) }, attacker.privateKey), v);
  });
});

describe('createTokenVerifier with a JWT route', () => {
  const route = (token: RouteConfig['token'], resource = RESOURCE) => ({ file: 'r.yaml', path: '/github/mcp', resource, token }) as RouteConfig;

  it('serves a second verification of the same token from the cache', async () => {
    let hits = 0;
    let misses = 0;
    const v = createTokenVerifier(route(jwtConfig()), { jwksSources: new JwksRegistry(), onCacheHit: () => hits++, onCacheMiss: () => misses++ });
    const token = await sign();
    const first = await v.verify(token);
    const second = await v.verify(token);
    expect(second).toBe(first);
    expect({ hits, misses }).toEqual({ hits: 1, misses: 1 });
    expect(server.count('/jwks')).toBe(1);
  });

  it('answers a cached token synchronously (verifyCached), a new one with a promise', async () => {
    const v = createTokenVerifier(route(jwtConfig()), { jwksSources: new JwksRegistry() });
    const token = await sign();
    const pending = v.verifyCached!(token);
    expect(pending).toBeInstanceOf(Promise);
    const first = await pending;
    expect(v.verifyCached!(token)).toBe(first);
    expect(v.verifyCached!(await sign(claims({ sub: 'another' })))).toBeInstanceOf(Promise);
  });

  it('refuses at route B a token cached for route A', async () => {
    const shared = new JwksRegistry();
    const a = createTokenVerifier(route(jwtConfig()), { jwksSources: shared });
    const b = createTokenVerifier(route(jwtConfig(), 'https://mcp.example.com/other/mcp'), { jwksSources: shared });
    const token = await sign();
    await a.verify(token);
    expect((await rejection(b.verify(token))).code).toBe('invalid_token');
  });

  it('refuses to build a built-in route without the built-in AS', () => {
    expect(() => createTokenVerifier(route({ kind: 'builtin' }), { jwksSources: new JwksRegistry() })).toThrow(/built-in authorization server/);
  });
});

describe('JWT verifier: audience and issuer refusals are reported with the expected value', () => {
  it.each([
    ['aud', { aud: 'https://mcp.example.com/other/mcp' }, RESOURCE, 'https://mcp.example.com/other/mcp'],
    ['iss', { iss: `${ISSUER}/` }, ISSUER, `${ISSUER}/`],
  ] as const)('%s', async (claim, overrides, expected, received) => {
    const mismatches: unknown[] = [];
    const config = jwtConfig();
    const v = createJwtVerifier(RESOURCE, config, new JwksRegistry().get(config.issuer, config.jwksUri), (m) => mismatches.push(m));
    await expectInvalid(await sign(claims(overrides)), v);
    expect(mismatches).toEqual([{ claim, expected, received }]);
  });

  it('reports nothing for other refusals', async () => {
    const mismatches: unknown[] = [];
    const config = jwtConfig();
    const v = createJwtVerifier(RESOURCE, config, new JwksRegistry().get(config.issuer, config.jwksUri), (m) => mismatches.push(m));
    await expectInvalid(await sign(claims({ exp: now() - 3600 })), v);
    expect(mismatches).toEqual([]);
  });
});
