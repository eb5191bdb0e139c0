/**
 * SECURITY-CASES group D (registration) against the built-in AS: every rejection is asserted by
 * status and error code, and where the case says ∅store, by the store having gained no write.
 */
import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientKey } from '../../src/store/keys.js';
import { closeServer, freePort, listen } from '../helpers/net.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { headlessUser, startAsGateway, type AsGateway, type HeadlessUserLog } from '../helpers/authorization-server.js';

let gateway: AsGateway;
let ipCounter = 0;
/** Each request from its own client IP (trust_proxy), so only the flood test meets the rate limit. */
const freshIp = () => `198.51.100.${++ipCounter}`;

beforeAll(async () => {
  gateway = await startAsGateway({
    upstream: 'http://127.0.0.1:9/mcp',
    gateway: { trust_proxy: true },
    options: { registrationRateLimit: { max: 5, windowMs: 60_000 } },
  });
});
afterAll(async () => {
  await gateway?.stop();
});

async function register(body: unknown, opts: { ip?: string; contentType?: string; raw?: string } = {}) {
  const res = await fetch(`${gateway.issuer}/register`, {
    method: 'POST',
    headers: { 'content-type': opts.contentType ?? 'application/json', 'x-forwarded-for': opts.ip ?? freshIp() },
    body: opts.raw ?? JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, text, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

const base = { client_name: 'test', token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] };

async function expectRefused(body: unknown, status: number, error: string, opts?: Parameters<typeof register>[1]) {
  const mark = gateway.recording.writes.length;
  const res = await register(body, opts);
  expect(res.status, res.text).toBe(status);
  expect(res.json.error).toBe(error);
  expect(typeof res.json.error_description).toBe('string');
  expect(gateway.recording.writes.slice(mark), 'the store gained nothing').toEqual([]);
  return res;
}

describe('D14: redirect URIs', () => {
  const refused = [
    'javascript:alert(1)',
    'JavaScript:alert(1)',
    'data:text/html,<script>alert(1)</script>',
    'vbscript:msgbox(1)',
    'file:///etc/passwd',
    'about:blank',
    '\u0001https://app.example/cb',
    ' https://app.example/cb',
    'https://app.example/cb ',
    'https://app.example/c b',
    'https://app.example/cb\n',
    'https://app.example/cb#fragment',
    'https://app.example/cb#',
    'https://*.example.com/cb',
    'https://app.example/*',
    '/relative/callback',
    'callback',
    '//app.example/cb',
    'http://evil.example/cb',
    'http://127.0.0.1.nip.io/cb',
    'http://localhost.evil.example/cb',
    'http://10.0.0.1/cb',
    'https://user:password@app.example/cb',
    'https://app.example\\@evil.example/cb',
    'https://app.example/cb?code=injected',
    'https://app.example/\u202Ebc',
    'com.example.app:/oauth', // a private-use scheme for a web application
    '',
  ];
  it.each(refused)('refuses %j with 400 invalid_redirect_uri and stores nothing', async (uri) => {
    await expectRefused({ ...base, redirect_uris: ['https://ok.example/cb', uri] }, 400, 'invalid_redirect_uri');
  });

  it('refuses a missing redirect_uris for the authorization_code grant, and a non-array', async () => {
    await expectRefused({ ...base }, 400, 'invalid_redirect_uri');
    await expectRefused({ ...base, redirect_uris: 'https://app.example/cb' }, 400, 'invalid_redirect_uri');
  });

  const accepted: Array<[string, Record<string, unknown>]> = [
    ['https://app.example/cb', {}],
    ['https://app.example/cb?tenant=1', {}],
    ['http://127.0.0.1:3000/callback', {}],
    ['http://[::1]/callback', {}],
    ['http://localhost:8080/callback', {}],
    ['com.example.app:/oauth2redirect', { application_type: 'native' }],
  ];
  it.each(accepted)('accepts %s', async (uri, extra) => {
    const res = await register({ ...base, ...extra, redirect_uris: [uri] });
    expect(res.status, res.text).toBe(201);
    expect(res.json.redirect_uris).toEqual([uri]);
  });
});

describe('D15: ids and secrets', () => {
  it('ignores a client-chosen client_id and client_secret; ids are random, ≥128 bits; the secret is stored only hashed', async () => {
    const chosen = { client_id: 'i-chose-this', client_secret: 'my-own-secret' };
    const a = await register({ ...chosen, client_name: 'confidential', redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'client_secret_basic' });
    const b = await register({ ...chosen, client_name: 'confidential', redirect_uris: ['https://app.example/cb'], token_endpoint_auth_method: 'client_secret_post' });
    for (const res of [a, b]) {
      expect(res.status).toBe(201);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.json.client_id).not.toBe(chosen.client_id);
      expect(res.json.client_id).toMatch(/^[A-Za-z0-9_-]{22,}$/); // ≥ 128 bits of base64url
      expect(res.json.client_secret).not.toBe(chosen.client_secret);
      expect(String(res.json.client_secret).length).toBeGreaterThanOrEqual(43); // 256 bits
      expect(res.json.client_secret_expires_at).toBe(0);
      const stored = (await gateway.store.get(clientKey(String(res.json.client_id))))!;
      expect(stored).toBeDefined();
      expect(stored).not.toContain(String(res.json.client_secret));
      expect(stored).not.toContain(chosen.client_secret);
      expect(JSON.parse(stored)).toHaveProperty('secretHash');
    }
    expect(a.json.client_id).not.toBe(b.json.client_id);
    expect(a.json.client_secret).not.toBe(b.json.client_secret);
  });

  it('never shows a secret again (no registration read endpoint)', async () => {
    const res = await register({ ...base, token_endpoint_auth_method: 'client_secret_basic', redirect_uris: ['https://app.example/cb'] });
    for (const path of [`/register/${String(res.json.client_id)}`, `/register?client_id=${String(res.json.client_id)}`]) {
      const read = await fetch(`${gateway.issuer}${path}`);
      expect(read.status).toBe(404);
      expect(await read.text()).not.toContain(String(res.json.client_secret));
    }
  });

  it('a public client gets no secret at all', async () => {
    const res = await register({ ...base, redirect_uris: ['https://app.example/cb'] });
    expect(res.status).toBe(201);
    expect(res.json).not.toHaveProperty('client_secret');
    expect(res.json.token_endpoint_auth_method).toBe('none');
  });
});

describe('D16: grants a public client may not have', () => {
  const cases: Array<[string, Record<string, unknown>]> = [
    ['implicit (public)', { grant_types: ['implicit'], response_types: ['token'] }],
    ['implicit beside code (public)', { grant_types: ['authorization_code', 'implicit'] }],
    ['password (public)', { grant_types: ['password'] }],
    ['client_credentials (public)', { grant_types: ['client_credentials'] }],
    ['implicit (confidential)', { grant_types: ['implicit'], token_endpoint_auth_method: 'client_secret_basic' }],
    ['password (confidential)', { grant_types: ['password'], token_endpoint_auth_method: 'client_secret_post' }],
    ['an unknown grant', { grant_types: ['urn:ietf:params:oauth:grant-type:device_code'] }],
    ['response_type token', { response_types: ['code', 'token'] }],
    ['an unknown token_endpoint_auth_method', { token_endpoint_auth_method: 'private_key_jwt' }],
    ['an unknown application_type', { application_type: 'desktop' }],
    ['grant_types that is not an array', { grant_types: 'authorization_code' }],
  ];
  it.each(cases)('%s → 400 invalid_client_metadata, nothing stored', async (_name, extra) => {
    await expectRefused({ ...base, redirect_uris: ['https://app.example/cb'], ...extra }, 400, 'invalid_client_metadata');
  });

  it('a confidential client may have client_credentials', async () => {
    const res = await register({ client_name: 'svc', token_endpoint_auth_method: 'client_secret_basic', grant_types: ['client_credentials'] });
    expect(res.status, res.text).toBe(201);
    expect(res.json.grant_types).toEqual(['client_credentials']);
  });
});

describe('D17: hostile display data', () => {
  it('stores client_name as given, escapes it on the consent page, neutralises RTL tricks, and never fetches logo_uri', async () => {
    let logoFetches = 0;
    const logoServer = createServer((_req, res) => {
      logoFetches++;
      res.end('png');
    });
    const logoPort = await listen(logoServer);
    try {
      const name = '<script>alert(1)</script><img src=x onerror=alert(2)>\u202Eexe.pdf';
      const redirectUri = `http://127.0.0.1:${await freePort()}/cb`;
      const res = await register({ ...base, client_name: name, logo_uri: `http://127.0.0.1:${logoPort}/logo.png`, redirect_uris: [redirectUri] });
      expect(res.status).toBe(201);
      expect(res.json.client_name).toBe(name);
      const clientId = String(res.json.client_id);
      expect(JSON.parse((await gateway.store.get(clientKey(clientId)))!).clientName).toBe(name);

      const log: HeadlessUserLog = { consentPages: [], loginPages: [] };
      const url = new URL(`${gateway.issuer}/authorize`);
      url.search = new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: redirectUri,
        code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM',
        code_challenge_method: 'S256',
        state: 's',
      }).toString();
      await followAuthorization(url, redirectUri, { onPage: headlessUser('dave', { log }) });
      const [page] = log.consentPages;
      expect(page).toBeDefined();
      expect(page).not.toContain('<script>alert(1)</script>');
      expect(page).not.toContain('<img src=x');
      expect(page).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
      expect(page).not.toContain('\u202E');
      expect(page).not.toContain(`127.0.0.1:${logoPort}`);
      expect(logoFetches).toBe(0);
    } finally {
      await closeServer(logoServer);
    }
  });
});

describe('D18: sizes, prototype keys, floods, expiry', () => {
  it('refuses a body over 64 KiB with 413 and stores nothing', async () => {
    await expectRefused({ ...base, redirect_uris: ['https://app.example/cb'], client_name: 'x'.repeat(70 * 1024) }, 413, 'payload_too_large');
  });

  it('refuses more than 20 redirect URIs, and thousands of them', async () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => `https://app.example/cb${i}`);
    await expectRefused({ ...base, redirect_uris: many(21) }, 400, 'invalid_redirect_uri');
    const thousands = Array.from({ length: 2000 }, (_, i) => `https://a.ex/${i}`); // under 64 KiB
    await expectRefused({ ...base, redirect_uris: thousands }, 400, 'invalid_redirect_uri');
    await expectRefused({ ...base, redirect_uris: many(5000) }, 413, 'payload_too_large');
  });

  it.each(['{"__proto__":{"admin":true},"redirect_uris":["https://app.example/cb"]}', '{"redirect_uris":["https://app.example/cb"],"jwks":{"constructor":{"prototype":{"x":1}}}}', '{"prototype":1}'])(
    'refuses prototype keys: %s',
    async (raw) => {
      await expectRefused(undefined, 400, 'invalid_client_metadata', { raw });
    },
  );

  it.each([
    ['not JSON', '{oops', 'application/json'],
    ['a JSON array', '[]', 'application/json'],
    ['a form', 'redirect_uris=https://app.example/cb', 'application/x-www-form-urlencoded'],
  ])('refuses %s with 400 invalid_client_metadata', async (_name, raw, contentType) => {
    await expectRefused(undefined, 400, 'invalid_client_metadata', { raw, contentType });
  });

  it('rate-limits registrations per client IP (429 with Retry-After), writing nothing once limited', async () => {
    const ip = '203.0.113.77';
    const body = { ...base, redirect_uris: ['https://app.example/cb'] };
    for (let i = 0; i < 5; i++) expect((await register(body, { ip })).status).toBe(201);
    const limited = await expectRefused(body, 429, 'too_many_requests', { ip });
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    // Another IP is not affected.
    expect((await register(body)).status).toBe(201);
  });

  it('registrations expire when unused: every write of a client has a TTL of at least 30 days and no more than the configured bound', async () => {
    const mark = gateway.recording.writes.length;
    const res = await register({ ...base, redirect_uris: ['https://app.example/cb'] });
    const write = gateway.recording.writes.slice(mark).find((w) => w.key === clientKey(String(res.json.client_id)));
    expect(write?.ttlMs).toBe(30 * 24 * 3600_000);
  });
});
