/**
 * SECURITY-CASES group D (registration, cases 14–18) against the built-in AS: every rejection is
 * asserted by status and error code, and where the case says ∅store, by the store having gained no
 * write. Redirect-URI variants live in corpora/redirect-uris.json.
 */
import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, fetch as undiciFetch } from 'undici';
import { clientKey } from '../../src/store/key-names.js';
import { closeServer, freePort, listen } from '../helpers/net.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { RFC7636_CHALLENGE } from '../helpers/oauth-requests.js';
import { headlessUser, startAsGateway, type AsGateway, type HeadlessUserLog } from '../helpers/authorization-server.js';
import { redirectCorpus } from './corpora/redirect-uris.js';

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

describe('[D14] redirect URIs (corpora/redirect-uris.json)', () => {
  it.each(redirectCorpus.registration.refused.map((c) => [JSON.stringify(c.uri), c.why, c.uri] as const))(
    'refuses %s (%s) with 400 invalid_redirect_uri and stores nothing',
    async (_label, _why, uri) => {
      await expectRefused({ ...base, redirect_uris: ['https://ok.example/cb', uri] }, 400, 'invalid_redirect_uri');
    },
  );

  it('refuses a missing redirect_uris for the authorization_code grant, and a non-array', async () => {
    await expectRefused({ ...base }, 400, 'invalid_redirect_uri');
    await expectRefused({ ...base, redirect_uris: 'https://app.example/cb' }, 400, 'invalid_redirect_uri');
  });

  const accepted = redirectCorpus.registration.accepted.map((c): [string, Record<string, unknown>] => [c.uri, c.native ? { application_type: 'native' } : {}]);
  it.each(accepted)('accepts %s', async (uri, extra) => {
    const res = await register({ ...base, ...extra, redirect_uris: [uri] });
    expect(res.status, res.text).toBe(201);
    expect(res.json.redirect_uris).toEqual([uri]);
  });
});

describe('[D15] ids and secrets', () => {
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

  it('ignores every server-issued field a client tries to set', async () => {
    const res = await register({
      ...base,
      redirect_uris: ['https://app.example/cb'],
      token_endpoint_auth_method: 'client_secret_post',
      client_id_issued_at: 1,
      client_secret_expires_at: 4102444800,
      registration_access_token: 'chosen-rat',
      registration_client_uri: 'https://evil.example/manage',
    });
    expect(res.status).toBe(201);
    expect(res.json.client_id_issued_at).toBeGreaterThan(1_600_000_000);
    expect(res.json.client_secret_expires_at).toBe(0);
    expect(res.json).not.toHaveProperty('registration_access_token');
    expect(res.json).not.toHaveProperty('registration_client_uri');
    expect(res.text).not.toContain('chosen-rat');
    expect(res.text).not.toContain('evil.example');
  });

  it('fifty registrations: fifty distinct ids and secrets, none derived from the request', async () => {
    const results = await Promise.all(
      Array.from({ length: 50 }, () => register({ ...base, token_endpoint_auth_method: 'client_secret_basic', redirect_uris: ['https://app.example/cb'] })),
    );
    for (const r of results) expect(r.status).toBe(201);
    expect(new Set(results.map((r) => r.json.client_id)).size).toBe(50);
    expect(new Set(results.map((r) => r.json.client_secret)).size).toBe(50);
    // No shared prefix beyond chance: ids are not counters or timestamps.
    const ids = results.map((r) => String(r.json.client_id));
    expect(new Set(ids.map((id) => id.slice(0, 4))).size).toBeGreaterThan(40);
  });

  it('a public client gets no secret at all', async () => {
    const res = await register({ ...base, redirect_uris: ['https://app.example/cb'] });
    expect(res.status).toBe(201);
    expect(res.json).not.toHaveProperty('client_secret');
    expect(res.json.token_endpoint_auth_method).toBe('none');
  });
});

describe('[D16] grants a public client may not have', () => {
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
    ['password beside code', { grant_types: ['authorization_code', 'password'] }],
    ['an upper-case grant name', { grant_types: ['IMPLICIT'] }],
    ['client_credentials beside code (public)', { grant_types: ['authorization_code', 'client_credentials'] }],
    ['the JWT bearer grant', { grant_types: ['urn:ietf:params:oauth:grant-type:jwt-bearer'] }],
    ['the token-exchange grant', { grant_types: ['urn:ietf:params:oauth:grant-type:token-exchange'] }],
    ['empty grant_types', { grant_types: [] }],
    ['a null grant', { grant_types: [null] }],
    ['eleven grants', { grant_types: Array.from({ length: 11 }, () => 'authorization_code') }],
    ['response_type id_token', { response_types: ['id_token'] }],
    ['response_type "code token" as one value', { response_types: ['code token'] }],
    ['code grant without the code response type', { response_types: [] }],
    ['client_secret_jwt', { token_endpoint_auth_method: 'client_secret_jwt' }],
    ['tls_client_auth', { token_endpoint_auth_method: 'tls_client_auth' }],
    ['an auth method that is not a string', { token_endpoint_auth_method: ['none'] }],
    ['a scope with a quote', { scope: 'mcp:read "x' }],
    ['a scope with a backslash', { scope: 'mcp:read a\\b' }],
    ['a scope with a newline', { scope: 'mcp:read\nmcp:write' }],
  ];
  it.each(cases)('%s → 400 invalid_client_metadata, nothing stored', async (_name, extra) => {
    await expectRefused({ ...base, redirect_uris: ['https://app.example/cb'], ...extra }, 400, 'invalid_client_metadata');
  });

  it('a confidential client may not have client_credentials either: machine tokens are for configured clients ([J46])', async () => {
    await expectRefused({ client_name: 'svc', token_endpoint_auth_method: 'client_secret_basic', grant_types: ['client_credentials'] }, 400, 'invalid_client_metadata');
  });
});

describe('[D17] hostile display data', () => {
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
        code_challenge: RFC7636_CHALLENGE,
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

describe('[D17] hostile URL fields are refused, never fetched', () => {
  it.each([
    ['logo_uri', 'javascript:alert(1)'],
    ['logo_uri', 'data:image/svg+xml,<svg onload=alert(1)>'],
    ['client_uri', 'javascript:alert(1)'],
    ['policy_uri', 'file:///etc/passwd'],
    ['tos_uri', 'vbscript:msgbox(1)'],
    ['client_uri', 'https://app.example/ x'],
    ['logo_uri', 42],
  ])('%s %j → 400 invalid_client_metadata, nothing stored', async (field, value) => {
    await expectRefused({ ...base, redirect_uris: ['https://app.example/cb'], [field]: value }, 400, 'invalid_client_metadata');
  });

  it.each([
    ['a name over 1000 characters', { client_name: 'x'.repeat(1001) }],
    ['a name that is not a string', { client_name: { first: 'x' } }],
    ['a software_id that is not a string', { software_id: 7 }],
  ])('%s → 400 invalid_client_metadata', async (_name, extra) => {
    await expectRefused({ ...base, redirect_uris: ['https://app.example/cb'], ...extra }, 400, 'invalid_client_metadata');
  });
});

describe('[D18] sizes, prototype keys, floods, expiry', () => {
  it('refuses a streamed (chunked) body over 64 KiB with 413 while reading it, and stores nothing', async () => {
    const mark = gateway.recording.writes.length;
    const chunk = new TextEncoder().encode(`{"client_name":"${'y'.repeat(16 * 1024)}`);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent++ < 8) controller.enqueue(chunk);
        else controller.close();
      },
    });
    // Its own connection: the server closes it after answering mid-body.
    const dispatcher = new Agent();
    try {
      const res = await undiciFetch(`${gateway.issuer}/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': freshIp() },
        body,
        duplex: 'half',
        dispatcher,
      });
      expect(res.status).toBe(413);
      expect(((await res.json()) as { error: string }).error).toBe('payload_too_large');
    } finally {
      await dispatcher.destroy();
    }
    expect(gateway.recording.writes.slice(mark)).toEqual([]);
  });

  it('stores none of the unknown fields: a 50 KB extension costs the store nothing', async () => {
    const mark = gateway.recording.writes.length;
    const res = await register({ ...base, redirect_uris: ['https://app.example/cb'], x_padding: 'p'.repeat(50_000), nested: { deep: [[[['z'.repeat(1000)]]]] } });
    expect(res.status).toBe(201);
    const written = gateway.recording.writes.slice(mark).find((w) => w.key === clientKey(String(res.json.client_id)));
    expect(written).toBeDefined();
    expect(written!.value.length).toBeLessThan(2_000);
    expect(written!.value).not.toContain('ppppp');
  });

  it.each([
    ['an escaped __proto__ key', '{"\\u005f_proto__":{"admin":true},"redirect_uris":["https://app.example/cb"]}'],
    ['a nested __proto__', '{"redirect_uris":["https://app.example/cb"],"a":{"b":{"__proto__":{"polluted":1}}}}'],
    ['__proto__ inside an array', '{"redirect_uris":["https://app.example/cb"],"a":[{"__proto__":1}]}'],
    ['a constructor key', '{"redirect_uris":["https://app.example/cb"],"constructor":1}'],
  ])('refuses %s', async (_name, raw) => {
    await expectRefused(undefined, 400, 'invalid_client_metadata', { raw });
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it.each([
    ['no content type', '{"redirect_uris":["https://app.example/cb"]}', 'text/plain'],
    ['JSON with a BOM', '\uFEFF{"redirect_uris":["https://app.example/cb"]}', 'application/json'],
    ['a JSON string', '"https://app.example/cb"', 'application/json'],
    ['JSON null', 'null', 'application/json'],
    ['an empty body', '', 'application/json'],
  ])('refuses %s with 400 invalid_client_metadata', async (_name, raw, contentType) => {
    await expectRefused(undefined, 400, 'invalid_client_metadata', { raw, contentType });
  });

  it('a concurrent flood from one IP cannot go far past the limit', async () => {
    const ip = '203.0.113.78';
    const body = { ...base, redirect_uris: ['https://app.example/cb'] };
    const results = await Promise.all(Array.from({ length: 40 }, () => register(body, { ip })));
    const created = results.filter((r) => r.status === 201).length;
    expect(results.every((r) => r.status === 201 || r.status === 429)).toBe(true);
    expect(created).toBeLessThanOrEqual(5);
    expect((await register(body, { ip })).status).toBe(429);
  });

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
