/**
 * SECURITY-CASES group F (/token, cases 23–26) against the built-in AS, plus /revoke, pre-registered clients,
 * client_credentials and the gateway's own check that only `at+jwt` tokens pass as access tokens.
 */
import { randomBytes } from 'node:crypto';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clientKey } from '../../src/store/key-names.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/security-fixtures.js';
import { headlessUser, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { newVerifier, s256 } from '../helpers/oauth-requests.js';

const SIGNED_RESOURCE = 'https://signed.example.test/mcp';
let gateway: AsGateway;
let upstream: RecordingUpstream;
let resource: string;
let signedResource: string;

interface Client {
  id: string;
  secret?: string;
  redirectUri: string;
}

beforeAll(async () => {
  upstream = await startRecordingUpstream();
  gateway = await startAsGateway({
    upstream: `${upstream.origin}/mcp`,
    routes: {
      'everything.yaml': { path: '/everything/mcp', scopes_supported: ['mcp:read', 'mcp:write'], required_scopes: ['mcp:read'] },
      // The upstream credential's audience is this route's own resource: only its `typ` tells it from an access token.
      'signed.yaml': { path: '/signed/mcp', resource: SIGNED_RESOURCE, scopes_supported: ['mcp:read'], upstream_auth: { kind: 'signed', audience: SIGNED_RESOURCE } },
    },
    authorizationServer: {
      clients: [
        { client_id: 'svc', client_secret: { env: 'SVC_SECRET' }, grant_types: ['client_credentials'], scopes: ['mcp:read'] },
        { client_id: 'web-app', client_secret: { env: 'WEB_SECRET' }, client_name: 'Web App', redirect_uris: ['https://web.example/cb'] },
      ],
    },
    env: { SVC_SECRET: 'svc-secret-value-0123456789', WEB_SECRET: 'web-secret-value-0123456789' },
    options: { registrationRateLimit: { max: 1000, windowMs: 60_000 } },
  });
  resource = `${gateway.issuer}/everything/mcp`;
  signedResource = SIGNED_RESOURCE;
});
afterAll(async () => {
  await gateway?.stop();
  await upstream?.close();
});

/** mag_grants_revoked_total for one reason, from the gateway's /metrics. */
async function grantsRevoked(reason: string): Promise<number> {
  const text = await (await fetch(`${gateway.issuer}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`mag_grants_revoked_total{reason="${reason}"} `));
  return line ? Number(line.split(' ').pop()) : 0;
}

async function register(metadata: Record<string, unknown> = {}): Promise<Client> {
  const redirectUri = `http://127.0.0.1:${await freePort()}/callback`;
  const res = await fetch(`${gateway.issuer}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'token tests', redirect_uris: [redirectUri], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], ...metadata }),
  });
  const body = (await res.json()) as { client_id: string; client_secret?: string };
  expect(res.status).toBe(201);
  return { id: body.client_id, secret: body.client_secret, redirectUri };
}

async function obtainCode(client: Client, opts: { verifier?: string; resource?: string; scope?: string } = {}) {
  const verifier = opts.verifier ?? newVerifier();
  const url = new URL(`${gateway.issuer}/authorize`);
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: client.id,
    redirect_uri: client.redirectUri,
    code_challenge: s256(verifier),
    code_challenge_method: 'S256',
    state: 'st',
    resource: opts.resource ?? resource,
    ...(opts.scope && { scope: opts.scope }),
  }).toString();
  const callback = await followAuthorization(url, client.redirectUri, { onPage: headlessUser('grace') });
  const code = callback.searchParams.get('code');
  expect(code, callback.href).toBeTruthy();
  return { code: code!, verifier };
}

async function token(params: Record<string, string | undefined>, opts: { basic?: [string, string]; contentType?: string } = {}) {
  const body = new URLSearchParams(Object.entries(params).filter((e): e is [string, string] => e[1] !== undefined));
  const headers: Record<string, string> = { 'content-type': opts.contentType ?? 'application/x-www-form-urlencoded' };
  if (opts.basic) headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(opts.basic[0])}:${encodeURIComponent(opts.basic[1])}`).toString('base64')}`;
  const res = await fetch(`${gateway.issuer}/token`, { method: 'POST', headers, body: body.toString() });
  const json = (await res.json()) as Record<string, unknown>;
  // Every token response, success or error, is uncacheable.
  expect(res.headers.get('cache-control')).toBe('no-store');
  expect(res.headers.get('pragma')).toBe('no-cache');
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  return { status: res.status, headers: res.headers, json };
}

const redeem = (client: Client, code: string, verifier: string, extra: Record<string, string | undefined> = {}) =>
  token({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri, client_id: client.id, ...extra });

describe('[F23] a code is used once', () => {
  it('a second redemption is invalid_grant, and revokes what the first one issued', async () => {
    const client = await register();
    const { code, verifier } = await obtainCode(client);
    const first = await redeem(client, code, verifier);
    expect(first.status).toBe(200);
    expect(first.json.refresh_token).toBeTruthy();
    const second = await redeem(client, code, verifier);
    expect(second.status).toBe(400);
    expect(second.json.error).toBe('invalid_grant');
    const refresh = await token({ grant_type: 'refresh_token', refresh_token: String(first.json.refresh_token), client_id: client.id });
    expect(refresh.status).toBe(400);
    expect(refresh.json.error).toBe('invalid_grant');
  });

  it('twenty concurrent redemptions: exactly one succeeds', async () => {
    const client = await register();
    const { code, verifier } = await obtainCode(client);
    const results = await Promise.all(Array.from({ length: 20 }, () => redeem(client, code, verifier)));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    const losers = results.filter((r) => r.status !== 200);
    expect(losers).toHaveLength(19);
    for (const r of losers) expect(r.json.error).toBe('invalid_grant');
  });
});

describe('[F23] replays after the fact', () => {
  it('a replay after the first refresh rotation still revokes the whole family, current member included', async () => {
    const client = await register();
    const { code, verifier } = await obtainCode(client);
    const first = await redeem(client, code, verifier);
    const rotated = await token({ grant_type: 'refresh_token', refresh_token: String(first.json.refresh_token), client_id: client.id });
    expect(rotated.status).toBe(200);
    const revokedBefore = await grantsRevoked('code_replay');
    expect((await redeem(client, code, verifier)).json.error).toBe('invalid_grant');
    expect(await grantsRevoked('code_replay')).toBe(revokedBefore + 1);
    const current = await token({ grant_type: 'refresh_token', refresh_token: String(rotated.json.refresh_token), client_id: client.id });
    expect(current.status).toBe(400);
    expect(current.json.error).toBe('invalid_grant');
  });

  it('twenty concurrent redemptions with a mix of right and wrong verifiers: at most one succeeds, and only with the right one', async () => {
    const client = await register();
    const { code, verifier } = await obtainCode(client);
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => redeem(client, code, i % 2 === 0 ? verifier : newVerifier()).then((r) => ({ ...r, right: i % 2 === 0 }))),
    );
    const winners = results.filter((r) => r.status === 200);
    expect(winners).toHaveLength(1);
    expect(winners[0]!.right).toBe(true);
  });

  it('a code redeemed by its client cannot be redeemed by another client either (and does not leak whose it was)', async () => {
    const owner = await register();
    const other = await register();
    const { code, verifier } = await obtainCode(owner);
    expect((await redeem(owner, code, verifier)).status).toBe(200);
    const res = await token({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: owner.redirectUri, client_id: other.id });
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('invalid_grant');
    expect(JSON.stringify(res.json)).not.toContain(owner.id);
  });
});

describe('[F24] what a code is bound to', () => {
  it.each([
    ['a wrong code_verifier', (v: string) => ({ code_verifier: newVerifier(), _v: v })],
    ['no code_verifier', () => ({ code_verifier: undefined })],
    ['a malformed code_verifier', () => ({ code_verifier: 'short' })],
    ['the challenge itself as verifier', (v: string) => ({ code_verifier: s256(v) })],
    ['another redirect_uri', () => ({ redirect_uri: 'http://127.0.0.1:1/other' })],
    ['no redirect_uri though one was sent', () => ({ redirect_uri: undefined })],
    ['an unknown code', () => ({ code: randomBytes(32).toString('base64url') })],
    ['a verifier one character short', (v: string) => ({ code_verifier: v.slice(0, -1) })],
    ['a verifier with a character appended', (v: string) => ({ code_verifier: `${v}A` })],
    ['a verifier with padding', (v: string) => ({ code_verifier: `${v}=` })],
    ['a verifier with a trailing space', (v: string) => ({ code_verifier: `${v} ` })],
    ['a verifier in upper case', (v: string) => ({ code_verifier: v.toUpperCase() === v ? v.toLowerCase() : v.toUpperCase() })],
    ['a 129-character verifier', () => ({ code_verifier: 'a'.repeat(129) })],
    ['a 42-character verifier', () => ({ code_verifier: 'a'.repeat(42) })],
    ['an empty verifier', () => ({ code_verifier: '' })],
    ['a redirect_uri with a trailing slash', () => ({ redirect_uri: 'REDIRECT/' })],
    ['the redirect_uri on another loopback port', () => ({ redirect_uri: 'OTHER-PORT' })],
    ['an empty redirect_uri', () => ({ redirect_uri: '' })],
  ])('%s → invalid_grant, and the code still works for its client', async (_name, change) => {
    const client = await register();
    const { code, verifier } = await obtainCode(client);
    const { _v, ...over } = { _v: undefined, ...change(verifier) } as Record<string, string | undefined>;
    void _v;
    if (over.redirect_uri === 'REDIRECT/') over.redirect_uri = `${client.redirectUri}/`;
    if (over.redirect_uri === 'OTHER-PORT') over.redirect_uri = client.redirectUri.replace(/:(\d+)\//, (_m, p: string) => `:${Number(p) === 65535 ? 1 : Number(p) + 1}/`);
    const bad = await redeem(client, code, verifier, over);
    expect(bad.status).toBe(400);
    expect(bad.json.error).toBe('invalid_grant');
    expect((await redeem(client, code, verifier)).status).toBe(200);
  });

  it("another client's code → invalid_grant", async () => {
    const owner = await register();
    const thief = await register();
    const { code, verifier } = await obtainCode(owner);
    const stolen = await token({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: owner.redirectUri, client_id: thief.id });
    expect(stolen.status).toBe(400);
    expect(stolen.json.error).toBe('invalid_grant');
    expect((await redeem(owner, code, verifier)).status).toBe(200);
  });

  it.each([
    ['a code with a trailing space', (c: string) => `${c} `],
    ['a code with its case flipped', (c: string) => c.replace(/[A-Za-z]/g, (ch) => (ch === ch.toUpperCase() ? ch.toLowerCase() : ch.toUpperCase()))],
    ['a code with its first character percent-encoded', (c: string) => `%${c.charCodeAt(0).toString(16).toUpperCase()}${c.slice(1)}`],
    ['a code with one character changed', (c: string) => `${c.slice(0, -1)}${c.endsWith('A') ? 'B' : 'A'}`],
  ])('%s → invalid_grant, and the code still works', async (_name, mangle) => {
    const client = await register();
    const { code, verifier } = await obtainCode(client);
    const bad = await redeem(client, code, verifier, { code: mangle(code) });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toBe('invalid_grant');
    expect((await redeem(client, code, verifier)).status).toBe(200);
  });

  it('a repeated parameter → invalid_request, and the code survives', async () => {
    const client = await register();
    const { code, verifier } = await obtainCode(client);
    const body = `grant_type=authorization_code&code=${code}&code=${code}&code_verifier=${verifier}&redirect_uri=${encodeURIComponent(client.redirectUri)}&client_id=${client.id}`;
    const res = await fetch(`${gateway.issuer}/token`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect((await redeem(client, code, verifier)).status).toBe(200);
  });

  it('a public client that names no client_id → 401 invalid_client', async () => {
    const client = await register();
    const { code, verifier } = await obtainCode(client);
    const res = await token({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri });
    expect(res.status).toBe(401);
    expect(res.json.error).toBe('invalid_client');
  });

  it('a resource other than the code’s → invalid_target', async () => {
    const client = await register();
    const { code, verifier } = await obtainCode(client);
    const res = await redeem(client, code, verifier, { resource: signedResource });
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('invalid_target');
  });

  it('codes live at most 60 s', async () => {
    const client = await register();
    const mark = gateway.recording.writes.length;
    await obtainCode(client);
    const codeWrites = gateway.recording.writes.slice(mark).filter((w) => w.key.startsWith('code:'));
    expect(codeWrites).toHaveLength(1);
    expect(codeWrites[0]!.ttlMs).toBeLessThanOrEqual(60_000);
  });

  it('an expired code → invalid_grant', async () => {
    const short = await startAsGateway({ upstream: 'http://127.0.0.1:9/mcp', options: { codeTtlMs: 300 } });
    try {
      const redirectUri = `http://127.0.0.1:${await freePort()}/cb`;
      const reg = await fetch(`${short.issuer}/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ redirect_uris: [redirectUri], token_endpoint_auth_method: 'none' }),
      });
      const { client_id } = (await reg.json()) as { client_id: string };
      const verifier = newVerifier();
      const url = new URL(`${short.issuer}/authorize`);
      url.search = new URLSearchParams({ response_type: 'code', client_id, redirect_uri: redirectUri, code_challenge: s256(verifier), code_challenge_method: 'S256' }).toString();
      const code = (await followAuthorization(url, redirectUri, { onPage: headlessUser('late') })).searchParams.get('code')!;
      await new Promise((resolve) => setTimeout(resolve, 500));
      const res = await fetch(`${short.issuer}/token`, {
        method: 'POST',
        body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: redirectUri, client_id }),
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe('invalid_grant');
    } finally {
      await short.stop();
    }
  });
});

describe('[F25] refresh token rotation and reuse detection', () => {
  async function tokensFor(client: Client) {
    const { code, verifier } = await obtainCode(client);
    const res = await redeem(client, code, verifier);
    expect(res.status).toBe(200);
    return res.json as { access_token: string; refresh_token: string };
  }
  const refresh = (client: Client, refreshToken: string, extra: Record<string, string> = {}) =>
    token({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.id, ...extra });

  it('rotates on every use; a replayed rotated token revokes the whole family', async () => {
    const client = await register();
    const t0 = await tokensFor(client);
    const r1 = await refresh(client, t0.refresh_token);
    expect(r1.status).toBe(200);
    const t1 = r1.json as { access_token: string; refresh_token: string };
    expect(t1.refresh_token).not.toBe(t0.refresh_token);
    expect(decodeJwt(t1.access_token)).toMatchObject({ aud: resource, sub: 'grace', client_id: client.id });
    const r2 = await refresh(client, t1.refresh_token);
    expect(r2.status).toBe(200);
    const t2 = r2.json as { refresh_token: string };

    const revokedBefore = await grantsRevoked('refresh_token_reuse');
    const replay = await refresh(client, t0.refresh_token);
    expect(replay.status).toBe(400);
    expect(replay.json.error).toBe('invalid_grant');
    expect(await grantsRevoked('refresh_token_reuse')).toBe(revokedBefore + 1);
    // Two rotations old is past any retry's grace: even the newest member is dead now.
    const current = await refresh(client, t2.refresh_token);
    expect(current.status).toBe(400);
    expect(current.json.error).toBe('invalid_grant');
  });

  it('two concurrent uses of one refresh token by its client are both answered (a retry within the grace, K75), but only one answer stays usable: the other token, presented, revokes the family', async () => {
    const client = await register();
    const t0 = await tokensFor(client);
    const results = await Promise.all([refresh(client, t0.refresh_token), refresh(client, t0.refresh_token)]);
    expect(results.map((r) => r.status)).toEqual([200, 200]);
    const later = [];
    for (const r of results) later.push((await refresh(client, String(r.json.refresh_token))).status);
    expect(later.filter((status) => status === 200).length).toBeLessThanOrEqual(1);
    expect(later).toContain(400);
    // Whichever was presented second, the family is revoked now.
    for (const r of results) expect((await refresh(client, String(r.json.refresh_token))).status).toBe(400);
  });

  it("another client's refresh token → invalid_grant; a wider scope → invalid_scope; another resource → invalid_target (the token survives these)", async () => {
    const owner = await register();
    const other = await register();
    const t0 = await tokensFor(owner);
    expect((await refresh(other, t0.refresh_token)).json.error).toBe('invalid_grant');
    expect((await refresh(owner, t0.refresh_token, { scope: 'mcp:read mcp:write' })).json.error).toBe('invalid_scope');
    expect((await refresh(owner, t0.refresh_token, { resource: signedResource })).json.error).toBe('invalid_target');
    const narrowed = await refresh(owner, t0.refresh_token, { scope: 'mcp:read', resource });
    expect(narrowed.status).toBe(200);
  });

  it.each([
    ['the refresh token with a trailing space', (t: string) => `${t} `],
    ['the refresh token truncated', (t: string) => t.slice(0, -2)],
    ['the access token as a refresh token', (_t: string, access: string) => access],
    ['an empty refresh token', () => ''],
  ])('%s → invalid_grant (or invalid_request), and the real token is not revoked by it', async (_name, mangle) => {
    const client = await register();
    const t0 = await tokensFor(client);
    const bad = await refresh(client, mangle(t0.refresh_token, t0.access_token));
    expect(bad.status).toBe(400);
    expect(['invalid_grant', 'invalid_request']).toContain(bad.json.error);
    expect((await refresh(client, t0.refresh_token)).status).toBe(200);
  });

  it('a refresh token is not an access token: presented at the MCP route it is 401 and nothing is forwarded', async () => {
    const client = await register();
    const t0 = await tokensFor(client);
    const before = upstream.requests.length;
    const res = await fetch(`${gateway.issuer}/everything/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t0.refresh_token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(res.status).toBe(401);
    expect(upstream.requests.length).toBe(before);
  });

  it('a revoked family stays revoked: every member, then a fresh authorization works again', async () => {
    const client = await register();
    const t0 = await tokensFor(client);
    const t1 = (await refresh(client, t0.refresh_token)).json as { refresh_token: string };
    const t2 = (await refresh(client, t1.refresh_token)).json as { refresh_token: string };
    // t0 is two rotations old, past any retry: reuse, the family revoked.
    expect((await refresh(client, t0.refresh_token)).status).toBe(400);
    for (const member of [t0.refresh_token, t1.refresh_token, t2.refresh_token]) expect((await refresh(client, member)).json.error).toBe('invalid_grant');
    const fresh = await tokensFor(client);
    expect((await refresh(client, fresh.refresh_token)).status).toBe(200);
  });

  it('a client registered without the refresh_token grant gets no refresh token', async () => {
    const client = await register({ grant_types: ['authorization_code'] });
    const { code, verifier } = await obtainCode(client, { scope: 'mcp:read offline_access' });
    const res = await redeem(client, code, verifier);
    expect(res.status).toBe(200);
    expect(res.json).not.toHaveProperty('refresh_token');
    expect(res.json.scope).toBe('mcp:read');
  });

  it('the store never holds a raw code, refresh token or client secret', async () => {
    const client = await register({ token_endpoint_auth_method: 'client_secret_post' });
    const { code, verifier } = await obtainCode(client);
    const res = await redeem(client, code, verifier, { client_secret: client.secret! });
    expect(res.status).toBe(200);
    const dump = gateway.recording.dump();
    for (const secret of [code, verifier, String(res.json.refresh_token), client.secret!]) expect(dump).not.toContain(secret);
  });
});

describe('[F26] client authentication', () => {
  const expectInvalidClient = (res: Awaited<ReturnType<typeof token>>) => {
    expect(res.status).toBe(401);
    expect(res.json.error).toBe('invalid_client');
    expect(res.headers.get('www-authenticate')).toMatch(/^Basic realm="/);
  };

  it('a wrong, missing or misplaced secret is 401 invalid_client with a Basic challenge', async () => {
    const client = await register({ token_endpoint_auth_method: 'client_secret_basic' });
    const { code, verifier } = await obtainCode(client);
    const params = { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri };
    expectInvalidClient(await token(params, { basic: [client.id, `${client.secret!}x`] }));
    expectInvalidClient(await token(params, { basic: [client.id, client.secret!.slice(0, -1)] }));
    expectInvalidClient(await token({ ...params, client_id: client.id }));
    expectInvalidClient(await token({ ...params, client_id: client.id, client_secret: 'wrong' }));
    expectInvalidClient(await token(params, { basic: ['no-such-client', 'x'] }));
    expectInvalidClient(await token(params));
    // Basic and post at once: one method per request.
    const both = await token({ ...params, client_secret: client.secret! }, { basic: [client.id, client.secret!] });
    expect(both.status).toBe(400);
    expect(both.json.error).toBe('invalid_request');
    // The code survived all of that: the right secret (Basic, or post) redeems it.
    expect((await token(params, { basic: [client.id, client.secret!] })).status).toBe(200);
  });

  it.each([
    ['Basic with invalid base64', 'Basic !!!not-base64!!!'],
    ['Basic without a colon', `Basic ${Buffer.from('no-colon').toString('base64')}`],
    ['Basic with an empty id', `Basic ${Buffer.from(':secret').toString('base64')}`],
    ['a Bearer header instead of Basic', 'Bearer some-token'],
    ['Basic with nothing after it', 'Basic '],
    ['two schemes in one header', `Basic ${Buffer.from('a:b').toString('base64')}, Basic ${Buffer.from('c:d').toString('base64')}`],
  ])('%s → 400 invalid_request or 401 invalid_client, never a token', async (_name, authorization) => {
    const client = await register({ token_endpoint_auth_method: 'client_secret_basic' });
    const { code, verifier } = await obtainCode(client);
    const res = await fetch(`${gateway.issuer}/token`, {
      method: 'POST',
      headers: { authorization, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri }).toString(),
    });
    const json = (await res.json()) as Record<string, unknown>;
    expect([400, 401]).toContain(res.status);
    expect(['invalid_request', 'invalid_client']).toContain(json.error);
    expect(json).not.toHaveProperty('access_token');
    expect(res.headers.get('cache-control')).toBe('no-store');
  });

  it("another client's secret → invalid_client; another client's own credentials → invalid_grant", async () => {
    const a = await register({ token_endpoint_auth_method: 'client_secret_basic' });
    const b = await register({ token_endpoint_auth_method: 'client_secret_basic' });
    const { code, verifier } = await obtainCode(a);
    const params = { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: a.redirectUri };
    expectInvalidClient(await token(params, { basic: [a.id, b.secret!] }));
    // b authenticates as itself, but the code is a's.
    expect((await token(params, { basic: [b.id, b.secret!] })).json.error).toBe('invalid_grant');
    expect((await token(params, { basic: [a.id, a.secret!] })).status).toBe(200);
  });

  it('the client secret is compared without an early exit: secrets differing in the first or the last byte take the same path', async () => {
    // Functional half of the constant-time rule (timing itself is asserted by code review: secretMatches hashes then timingSafeEqual).
    const client = await register({ token_endpoint_auth_method: 'client_secret_post' });
    const { code, verifier } = await obtainCode(client);
    const params = { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri, client_id: client.id };
    const first = `${client.secret![0] === 'A' ? 'B' : 'A'}${client.secret!.slice(1)}`;
    const last = `${client.secret!.slice(0, -1)}${client.secret!.endsWith('A') ? 'B' : 'A'}`;
    for (const wrong of [first, last, client.secret!.toUpperCase(), `${client.secret!}\u0000`]) {
      const res = await token({ ...params, client_secret: wrong });
      expect(res.status).toBe(401);
      expect(res.json.error_description).toBe((await token({ ...params, client_secret: 'x' })).json.error_description);
    }
    expect((await token({ ...params, client_secret: client.secret! })).status).toBe(200);
  });

  it('a public client that sends a secret is refused', async () => {
    const client = await register();
    const { code, verifier } = await obtainCode(client);
    expectInvalidClient(await redeem(client, code, verifier, { client_secret: 'anything' }));
  });

  it.each([
    ['no grant_type', { client_id: 'svc' }, 'invalid_request', 400],
    ['the password grant', { grant_type: 'password', username: 'u', password: 'p' }, 'unsupported_grant_type', 400],
    ['the implicit grant', { grant_type: 'implicit' }, 'unsupported_grant_type', 400],
  ])('%s → %s', async (_name, params, error, status) => {
    const res = await token(params, { basic: ['svc', 'svc-secret-value-0123456789'] });
    expect(res.status).toBe(status);
    expect(res.json.error).toBe(error);
  });

  it('a JSON body is refused (the token endpoint takes forms only)', async () => {
    const res = await token({ grant_type: 'client_credentials' }, { contentType: 'application/json', basic: ['svc', 'svc-secret-value-0123456789'] });
    expect(res.status).toBe(400);
    expect(res.json.error).toBe('invalid_request');
  });
});

describe('[F26] client_credentials and pre-registered clients', () => {
  it('a configured confidential client gets an access token for the resource, limited to its scopes', async () => {
    const ok = await token({ grant_type: 'client_credentials', resource, scope: 'mcp:read' }, { basic: ['svc', 'svc-secret-value-0123456789'] });
    expect(ok.status).toBe(200);
    expect(ok.json).not.toHaveProperty('refresh_token');
    expect(decodeJwt(String(ok.json.access_token))).toMatchObject({ sub: 'svc', client_id: 'svc', aud: resource, scope: 'mcp:read' });
    const post = await token({ grant_type: 'client_credentials', resource, client_id: 'svc', client_secret: 'svc-secret-value-0123456789' });
    expect(post.status).toBe(200);
    const wider = await token({ grant_type: 'client_credentials', resource, scope: 'mcp:write' }, { basic: ['svc', 'svc-secret-value-0123456789'] });
    expect(wider.json.error).toBe('invalid_scope');
    const severalRoutes = await token({ grant_type: 'client_credentials' }, { basic: ['svc', 'svc-secret-value-0123456789'] });
    expect(severalRoutes.json.error).toBe('invalid_target');
  });

  it('a public client, or a confidential one without the grant, may not use client_credentials', async () => {
    const pub = await register();
    expect((await token({ grant_type: 'client_credentials', resource, client_id: pub.id })).json.error).toBe('unauthorized_client');
    const conf = await register({ token_endpoint_auth_method: 'client_secret_basic' });
    expect((await token({ grant_type: 'client_credentials', resource }, { basic: [conf.id, conf.secret!] })).json.error).toBe('unauthorized_client');
  });

  it('a pre-registered client is shown as such on the consent page, and its redirect_uri is enforced', async () => {
    const url = new URL(`${gateway.issuer}/authorize`);
    url.search = new URLSearchParams({ response_type: 'code', client_id: 'web-app', redirect_uri: 'https://web.example/cb', code_challenge: s256(newVerifier()), code_challenge_method: 'S256', resource }).toString();
    const page = await fetch(url, { redirect: 'manual' });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain('Web App');
    expect(html).toContain('registered by the administrator');
    url.searchParams.set('redirect_uri', 'https://web.example/other');
    expect((await fetch(url, { redirect: 'manual' })).status).toBe(400);
  });
});

describe('[F25] /revoke (RFC 7009)', () => {
  it('revoking a refresh token revokes its grant at once; unknown tokens get 200 too', async () => {
    const client = await register();
    const { code, verifier } = await obtainCode(client);
    const issued = (await redeem(client, code, verifier)).json as { access_token: string; refresh_token: string };
    const revoke = (tokenValue: string, clientId = client.id) =>
      fetch(`${gateway.issuer}/revoke`, { method: 'POST', body: new URLSearchParams({ token: tokenValue, client_id: clientId, token_type_hint: 'refresh_token' }) });
    // Another client cannot revoke it (and learns nothing: 200).
    const other = await register();
    expect((await revoke(issued.refresh_token, other.id)).status).toBe(200);
    expect((await token({ grant_type: 'refresh_token', refresh_token: issued.refresh_token, client_id: client.id })).status).toBe(200);
  });

  it('the owner revokes: the refresh token stops working', async () => {
    const client = await register();
    const { code, verifier } = await obtainCode(client);
    const issued = (await redeem(client, code, verifier)).json as { access_token: string; refresh_token: string };
    const res = await fetch(`${gateway.issuer}/revoke`, { method: 'POST', body: new URLSearchParams({ token: issued.refresh_token, client_id: client.id }) });
    expect(res.status).toBe(200);
    expect((await token({ grant_type: 'refresh_token', refresh_token: issued.refresh_token, client_id: client.id })).json.error).toBe('invalid_grant');
    for (const t of [issued.access_token, 'garbage']) {
      expect((await fetch(`${gateway.issuer}/revoke`, { method: 'POST', body: new URLSearchParams({ token: t, client_id: client.id }) })).status).toBe(200);
    }
  });
});

describe('[D18] dynamic registrations live on while used', () => {
  it('a use after the touch interval rewrites the registration with a fresh lifetime', async () => {
    const client = await register();
    const stored = JSON.parse((await gateway.store.get(clientKey(client.id)))!) as Record<string, unknown>;
    await gateway.store.set(clientKey(client.id), JSON.stringify({ ...stored, lastUsedAt: 0 }), 60_000);
    const mark = gateway.recording.writes.length;
    const { code, verifier } = await obtainCode(client);
    expect((await redeem(client, code, verifier)).status).toBe(200);
    const rewrites = gateway.recording.writes.slice(mark).filter((w) => w.key === clientKey(client.id));
    expect(rewrites.length).toBeGreaterThanOrEqual(1);
    expect(rewrites[0]!.ttlMs).toBe(30 * 24 * 3600_000);
  });
});

describe('[B9] only access tokens (typ at+jwt) pass the built-in verifier', () => {
  it('a `signed` upstream credential (same key, typ JWT) presented to the gateway is 401', async () => {
    const ok = await token({ grant_type: 'client_credentials', resource: signedResource, scope: 'mcp:read' }, { basic: ['svc', 'svc-secret-value-0123456789'] });
    // svc may only have mcp:read; the signed route supports it.
    expect(ok.status).toBe(200);
    const before = upstream.requests.length;
    const call = await fetch(`${gateway.issuer}/signed/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${String(ok.json.access_token)}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(call.status).toBe(200);
    const credential = upstream.headerValues('authorization').at(-1)!.replace(/^Bearer /, '');
    expect(upstream.requests.length).toBe(before + 1);
    expect(decodeJwt(credential)).toMatchObject({ iss: gateway.issuer, sub: 'svc', aud: SIGNED_RESOURCE });
    const replayed = await fetch(`${gateway.issuer}/signed/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${credential}`, 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    expect(replayed.status).toBe(401);
    expect(upstream.requests.length).toBe(before + 1);
  });

  it('a token for one route is refused at another', async () => {
    const forEverything = await token({ grant_type: 'client_credentials', resource, scope: 'mcp:read' }, { basic: ['svc', 'svc-secret-value-0123456789'] });
    const res = await fetch(`${gateway.issuer}/signed/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${String(forEverything.json.access_token)}`, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(401);
  });
});
