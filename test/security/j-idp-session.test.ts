/**
 * SECURITY-CASES J60 and J61, against a real OpenID Connect IdP (oidc-provider with back-channel
 * logout on, the gateway registered as its client with `backchannel_logout_uri`):
 * - J60: a grant obtained through the IdP ends when the IdP session does. A back-channel logout
 *   sent by the IdP itself revokes every grant of that `sid` (access tokens refused at once,
 *   refresh tokens dead), and only those; logout tokens that are not valid per OIDC Back-Channel
 *   Logout 1.0 §2.6 (a corpus of forgeries and near-misses, signed with the IdP's real key where
 *   the point is a claim) are 400 and revoke nothing; a replayed one is 400. The gateway's own
 *   refresh asks the IdP: an IdP that refuses the refresh revokes the grant. An IdP token without
 *   `expires_in` is not fresh forever, and a refresh answer without it does not make every request
 *   refresh again.
 * - J61: after full OIDC logins, nothing the store was given holds the IdP request's `state`,
 *   nonce or PKCE verifier.
 */
import { randomBytes } from 'node:crypto';
import { decodeJwt, generateKeyPair, importJWK, SignJWT, type JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdpTokenCipher } from '../../src/authorization-server/idp/idp-token-cipher.js';
import { loadSigningKeys } from '../../src/authorization-server/keys/signing-keys.js';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { idpTokenKey } from '../../src/store/key-names.js';
import { DEFAULT_ROUTE, parseForm, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { chooseIdpLogin, IDP_BACKCHANNEL_LOGOUT_PATH, IDP_CALLBACK_PATH, newIdpClient, onIdpTokens, revokeAtIdp, startGatewayIdp } from '../helpers/gateway-idp.js';
import { CookieBrowser } from '../helpers/cookie-browser.js';
import { freePort } from '../helpers/net.js';
import { codeRequestUrl, newVerifier, registerPublicClient } from '../helpers/oauth-requests.js';
import type { OidcProviderHandle } from '../helpers/oidc-provider.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';
import { sleepUntil } from '../helpers/wait.js';

/** oidc-provider is a Koa application; its typings leave `use` out. */
interface KoaApp {
  use(middleware: (ctx: { path: string; body: unknown }, next: () => Promise<void>) => Promise<void>): void;
}

const IDP_TOKEN_TTL = 2;
const IDP_CLIENT = newIdpClient();
const BACKCHANNEL_EVENT = 'http://schemas.openid.net/event/backchannel-logout';
const IDP_ROUTE = { path: '/idp/mcp', scopes_supported: ['mcp:read'], required_scopes: ['mcp:read'], upstream_auth: { kind: 'idp_token' } };

let everything: UpstreamHandle;
let hop: RecordingHop;
let idp: OidcProviderHandle;
let gateway: AsGateway;
let origin: string;
let cipher: IdpTokenCipher;
let idpAccount = 'alice';
/** Whether the IdP's token endpoint answers without `expires_in` (an IdP that omits it). */
let stripExpiresIn = false;
const idpIssued: Array<{ grantType: unknown; accessToken: string; idToken?: string; codeVerifier?: unknown }> = [];

beforeAll(async () => {
  everything = await startEverythingServer();
  hop = await startRecordingHop(everything.url);
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  idp = await startGatewayIdp(origin, IDP_CLIENT, IDP_TOKEN_TTL, { backchannelLogout: true });
  chooseIdpLogin(idp, () => ({ accountId: idpAccount }));
  onIdpTokens(idp, (ctx) => {
    const params = ctx.oidc.params ?? {};
    idpIssued.push({ grantType: params.grant_type, accessToken: ctx.body.access_token, idToken: ctx.body.id_token, codeVerifier: params.code_verifier });
  });
  // An IdP that gives no lifetime: oidc-provider is Koa, so its answer can be changed on the way out.
  (idp.provider as unknown as KoaApp).use(async (ctx, next) => {
    await next();
    if (stripExpiresIn && ctx.path === '/token' && ctx.body && typeof ctx.body === 'object') delete (ctx.body as { expires_in?: number }).expires_in;
  });
  const signingKey = JSON.stringify(await generateSigningKey());
  cipher = new IdpTokenCipher((await loadSigningKeys({ configured: signingKey, publicUrl: origin })).cookieSecret);
  gateway = await startAsGateway({
    upstream: hop.url,
    gateway: { listen: { host: '127.0.0.1', port }, public_url: origin },
    authorizationServer: {
      signing_key: { env: 'SIGNING_KEY' },
      login: { kind: 'oidc', issuer: idp.issuer, client_id: IDP_CLIENT.client_id, client_secret: { env: 'IDP_SECRET' }, scopes: ['openid', 'email'] },
    },
    env: { IDP_SECRET: IDP_CLIENT.client_secret, SIGNING_KEY: signingKey },
    routes: { 'everything.yaml': DEFAULT_ROUTE, 'idp.yaml': IDP_ROUTE },
    options: { registrationRateLimit: { max: 1000, windowMs: 60_000 } },
  });
});

afterAll(async () => {
  await gateway?.stop();
  await Promise.all([hop?.close(), idp?.close()]);
  await everything?.close();
});

interface SignedIn {
  clientId: string;
  accessToken: string;
  refreshToken: string;
  grantId: string;
  /** The IdP session (`sid` of the ID token the gateway received). */
  sid: string;
  /** The IdP request the gateway made: its state and nonce as sent, its PKCE verifier as redeemed. */
  idpRequest: { state: string; nonce: string; codeVerifier: string };
}

/** A full login through the IdP for a new client, ending with the gateway's tokens for `resource`. */
async function signIn(account: string, browser = new CookieBrowser(), path = DEFAULT_ROUTE.path): Promise<SignedIn> {
  idpAccount = account;
  const resource = `${origin}${path}`;
  const client = await registerPublicClient(origin, 'j60', '/cb');
  const { id: clientId, redirectUri } = client;
  const verifier = newVerifier();
  const authorize = codeRequestUrl(origin, { client, verifier, state: 'client-state', resource, scope: 'mcp:read' });
  let step = await browser.request(authorize);
  let url = authorize;
  if (step.status === 200) {
    const form = parseForm(step.body)!;
    url = new URL(form.action, origin);
    step = await browser.request(url, { method: 'POST', body: new URLSearchParams({ ...form.fields, decision: 'approve' }) });
  }
  const seen = idpIssued.length;
  for (let hops = 0; hops < 15 && step.location && !step.location.startsWith(redirectUri); hops++) {
    url = new URL(step.location, url);
    step = await browser.request(url);
  }
  expect(step.location, step.body.slice(0, 200)).toMatch(new RegExp(`^${redirectUri}\\?code=`));
  const toIdp = browser.locations.findLast((l) => l.href.startsWith(`${idp.issuer}/auth`) && l.searchParams.has('nonce'))!;
  const toCallback = browser.locations.findLast((l) => l.pathname === IDP_CALLBACK_PATH)!;
  const idpTokens = idpIssued.slice(seen).find((t) => t.grantType === 'authorization_code')!;
  const code = new URL(step.location!).searchParams.get('code')!;
  const res = await fetch(`${origin}/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: clientId, redirect_uri: redirectUri, resource }),
  });
  expect(res.status).toBe(200);
  const tokens = (await res.json()) as { access_token: string; refresh_token: string };
  return {
    clientId,
    accessToken: tokens.access_token,
    refreshToken: tokens.refresh_token,
    grantId: decodeJwt(tokens.access_token).gid as string,
    sid: decodeJwt(idpTokens.idToken!).sid as string,
    idpRequest: { state: toCallback.searchParams.get('state')!, nonce: toIdp.searchParams.get('nonce')!, codeVerifier: String(idpTokens.codeVerifier) },
  };
}

/** The status of an MCP initialize with `accessToken`. */
async function mcpStatus(accessToken: string, path = DEFAULT_ROUTE.path): Promise<number> {
  const res = await fetch(`${origin}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
  });
  await res.body?.cancel();
  return res.status;
}

const refresh = (s: SignedIn) =>
  fetch(`${origin}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: s.refreshToken, client_id: s.clientId }) });

async function postLogout(body: URLSearchParams | string, contentType = 'application/x-www-form-urlencoded') {
  const res = await fetch(`${origin}${IDP_BACKCHANNEL_LOGOUT_PATH}`, { method: 'POST', headers: { 'content-type': contentType }, body });
  return { status: res.status, cacheControl: res.headers.get('cache-control'), text: await res.text() };
}

/** A logout token signed with `key` (default: the IdP's own signing key) over `claims` merged onto valid ones. */
async function logoutToken(claims: JWTPayload, opts: { omit?: string[]; key?: 'idp' | 'other'; header?: Record<string, unknown> } = {}): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const payload: JWTPayload = { iss: idp.issuer, aud: IDP_CLIENT.client_id, iat: now, exp: now + 120, jti: randomBytes(12).toString('base64url'), events: { [BACKCHANNEL_EVENT]: {} }, ...claims };
  for (const name of opts.omit ?? []) delete payload[name];
  const jwk = idp.signingJwk;
  let key;
  if (opts.key === 'other') {
    key = (await generateKeyPair(jwk.alg!, { extractable: true })).privateKey;
  } else {
    key = await importJWK(jwk, jwk.alg);
  }
  return new SignJWT(payload).setProtectedHeader({ alg: jwk.alg!, kid: jwk.kid, typ: 'logout+jwt', ...opts.header }).sign(key);
}

describe('[J60] back-channel logout ends the grants of that IdP session', () => {
  it('[J60] the IdP’s own logout token for alice’s session → 200; both her grants of that session refused at once, refresh dead; bob untouched', async () => {
    const browser = new CookieBrowser();
    const first = await signIn('alice', browser);
    const second = await signIn('alice', browser);
    const bob = await signIn('bob');
    expect(first.sid).toBeTruthy();
    expect(second.sid).toBe(first.sid);
    expect(bob.sid).not.toBe(first.sid);
    for (const s of [first, second, bob]) expect(await mcpStatus(s.accessToken)).toBe(200);

    // The IdP itself signs and POSTs the logout token (oidc-provider's back-channel logout).
    const { Client } = idp.provider as unknown as { Client: { find(id: string): Promise<{ backchannelLogout(sub: string, sid: string): Promise<void> }> } };
    await (await Client.find(IDP_CLIENT.client_id)).backchannelLogout('alice', first.sid);

    for (const s of [first, second]) {
      expect(await mcpStatus(s.accessToken)).toBe(401);
      const refused = await refresh(s);
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({ error: 'invalid_grant' });
      expect(await gateway.recording.get(idpTokenKey(s.grantId))).toBeUndefined();
    }
    expect(await mcpStatus(bob.accessToken)).toBe(200);
    expect((await refresh(bob)).status).toBe(200);
  });

  it('[J60] a logout token naming only sub ends every grant of that IdP user, and not another’s', async () => {
    const a = await signIn('carol');
    const b = await signIn('carol');
    const other = await signIn('dave');
    const res = await postLogout(new URLSearchParams({ logout_token: await logoutToken({ sub: 'carol' }) }));
    expect(res.status).toBe(200);
    expect(res.cacheControl).toBe('no-store');
    expect(await mcpStatus(a.accessToken)).toBe(401);
    expect(await mcpStatus(b.accessToken)).toBe(401);
    expect(await mcpStatus(other.accessToken)).toBe(200);
  });

  interface BadLogout {
    name: string;
    body: () => Promise<URLSearchParams | string>;
    contentType?: string;
  }
  const token = (claims: JWTPayload, opts?: Parameters<typeof logoutToken>[1]) => async () => new URLSearchParams({ logout_token: await logoutToken(claims, opts) });
  const now = () => Math.floor(Date.now() / 1000);
  /** Every variant names the victim's session, so a wrong acceptance would show as a 401 below. */
  const corpus = (victim: () => SignedIn): BadLogout[] => {
    const sid = () => ({ sid: victim().sid, sub: 'erin' });
    return [
      { name: 'no events claim', body: async () => token(sid(), { omit: ['events'] })() },
      { name: 'events without the back-channel member', body: async () => token({ ...sid(), events: { 'http://schemas.openid.net/event/other': {} } })() },
      { name: 'the back-channel member not an object', body: async () => token({ ...sid(), events: { [BACKCHANNEL_EVENT]: 'yes' } })() },
      { name: 'events an array', body: async () => token({ ...sid(), events: [BACKCHANNEL_EVENT] })() },
      { name: 'a nonce (an ID token, not a logout token)', body: async () => token({ ...sid(), nonce: 'n' })() },
      { name: 'neither sid nor sub', body: async () => token({}, { omit: ['sid', 'sub'] })() },
      { name: 'empty sid and no sub', body: async () => token({ sid: '' }, { omit: ['sub'] })() },
      { name: 'another issuer', body: async () => token({ ...sid(), iss: 'https://evil.example' })() },
      { name: 'issuer with a trailing slash', body: async () => token({ ...sid(), iss: `${idp.issuer}/` })() },
      { name: 'another audience', body: async () => token({ ...sid(), aud: 'someone-else' })() },
      { name: 'an audience list without the gateway', body: async () => token({ ...sid(), aud: ['a', 'b'] })() },
      { name: 'no iat', body: async () => token(sid(), { omit: ['iat'] })() },
      { name: 'iat 10 minutes old', body: async () => token({ ...sid(), iat: now() - 600, exp: now() + 60 })() },
      { name: 'iat 10 minutes ahead', body: async () => token({ ...sid(), iat: now() + 600, exp: now() + 900 })() },
      { name: 'expired', body: async () => token({ ...sid(), iat: now() - 120, exp: now() - 60 })() },
      { name: 'no jti', body: async () => token(sid(), { omit: ['jti'] })() },
      { name: 'signed by another key under the IdP’s kid', body: async () => token(sid(), { key: 'other' })() },
      { name: 'an unknown kid', body: async () => token(sid(), { key: 'other', header: { kid: 'not-the-idp' } })() },
      {
        name: 'alg none',
        body: async () => {
          const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
          return new URLSearchParams({ logout_token: `${enc({ alg: 'none', typ: 'logout+jwt' })}.${enc({ iss: idp.issuer, aud: IDP_CLIENT.client_id, iat: now(), jti: 'x', events: { [BACKCHANNEL_EVENT]: {} }, ...sid() })}.` });
        },
      },
      {
        name: 'HS256 keyed with the IdP’s public key',
        body: async () => {
          const { d: _d, ...publicJwk } = idp.signingJwk;
          const secret = new TextEncoder().encode(JSON.stringify(publicJwk));
          const t = await new SignJWT({ iss: idp.issuer, aud: IDP_CLIENT.client_id, iat: now(), jti: 'x', events: { [BACKCHANNEL_EVENT]: {} }, ...sid() }).setProtectedHeader({ alg: 'HS256', kid: idp.signingJwk.kid }).sign(secret);
          return new URLSearchParams({ logout_token: t });
        },
      },
      {
        name: 'a valid token with its payload changed',
        body: async () => {
          const [h, , s] = (await logoutToken({ sid: 'some-other-session' })).split('.');
          const forged = Buffer.from(JSON.stringify({ iss: idp.issuer, aud: IDP_CLIENT.client_id, iat: now(), jti: 'y', events: { [BACKCHANNEL_EVENT]: {} }, ...sid() })).toString('base64url');
          return new URLSearchParams({ logout_token: `${h}.${forged}.${s}` });
        },
      },
      {
        name: 'the IdP’s ID token of the victim’s own login',
        body: async () => new URLSearchParams({ logout_token: idpIssued.find((t) => t.idToken && decodeJwt(t.idToken).sid === victim().sid)!.idToken! }),
      },
      { name: 'not a JWT', body: async () => new URLSearchParams({ logout_token: 'not-a-jwt' }) },
      { name: 'no logout_token', body: async () => new URLSearchParams({}) },
      { name: 'an empty logout_token', body: async () => new URLSearchParams({ logout_token: '' }) },
      {
        name: 'logout_token given twice',
        body: async () => {
          const t = await logoutToken(sid());
          return `logout_token=${t}&logout_token=${t}`;
        },
      },
      { name: 'a JSON body', body: async () => JSON.stringify({ logout_token: await logoutToken(sid()) }), contentType: 'application/json' },
    ];
  };

  it('[J60] logout tokens that are not valid (§2.6 corpus) → 400 invalid_request JSON, nothing revoked', async () => {
    const victim = await signIn('erin');
    const cases = corpus(() => victim);
    expect(cases.length).toBeGreaterThan(25);
    for (const c of cases) {
      const res = await postLogout(await c.body(), c.contentType);
      expect(res.status, c.name).toBe(400);
      expect(JSON.parse(res.text), c.name).toMatchObject({ error: 'invalid_request', error_description: expect.any(String) });
      expect(res.cacheControl, c.name).toBe('no-store');
      expect(await mcpStatus(victim.accessToken), c.name).toBe(200);
    }
    // The control: the same claims, validly signed, do end it (so the corpus could have).
    expect((await postLogout(new URLSearchParams({ logout_token: await logoutToken({ sid: victim.sid, sub: 'erin' }) }))).status).toBe(200);
    expect(await mcpStatus(victim.accessToken)).toBe(401);
  });

  it('[J60] a replayed logout token (same jti) → 400 the second time', async () => {
    const victim = await signIn('frank');
    const replayed = await logoutToken({ sid: 'no-such-session' });
    expect((await postLogout(new URLSearchParams({ logout_token: replayed }))).status).toBe(200);
    const again = await postLogout(new URLSearchParams({ logout_token: replayed }));
    expect(again.status).toBe(400);
    expect(JSON.parse(again.text)).toMatchObject({ error: 'invalid_request' });
    expect(await mcpStatus(victim.accessToken)).toBe(200);
  });
});

describe('[J60] the gateway’s refresh and the IdP’s tokens', () => {
  it('[J60] a refresh while the IdP token is fresh goes on without the IdP; once it is due, an IdP that refuses the refresh revokes the grant', async () => {
    const grace = await signIn('grace');
    const before = idpIssued.length;
    const fresh = await refresh(grace);
    expect(fresh.status).toBe(200);
    expect(idpIssued.length).toBe(before); // the IdP was not asked
    const next = { ...grace, refreshToken: ((await fresh.json()) as { refresh_token: string }).refresh_token };

    // The user's session at the IdP ends: the gateway's IdP refresh token is revoked there.
    const idpRefresh = await findIdpRefreshToken(grace.grantId);
    expect(await revokeAtIdp(idp, IDP_CLIENT, idpRefresh)).toBe(200);
    await untilDue(grace.grantId);
    const refused = await refresh(next);
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ error: 'invalid_grant' });
    expect(await mcpStatus(next.accessToken)).toBe(401);
    expect(await mcpStatus(grace.accessToken)).toBe(401);
  });

  it('[J60] once due, an IdP that accepts the refresh keeps the grant going (one IdP refresh)', async () => {
    const henry = await signIn('henry');
    await untilDue(henry.grantId);
    const before = idpIssued.filter((t) => t.grantType === 'refresh_token').length;
    const ok = await refresh(henry);
    expect(ok.status).toBe(200);
    expect(idpIssued.filter((t) => t.grantType === 'refresh_token').length).toBe(before + 1);
  });

  it('[J60] an IdP token without expires_in is not fresh forever: due within a minute', async () => {
    stripExpiresIn = true;
    try {
      const ida = await signIn('ida');
      const record = await idpRecord(ida.grantId);
      expect(record.refreshAt).toEqual(expect.any(Number));
      expect(record.refreshAt! - Date.now()).toBeLessThanOrEqual(60_000);
      expect(record.refreshAt! - Date.now()).toBeGreaterThan(30_000);
    } finally {
      stripExpiresIn = false;
    }
  });

  it('[J60] a refresh answer without expires_in does not make every request refresh again', async () => {
    const jack = await signIn('jack', undefined, IDP_ROUTE.path);
    expect(await mcpStatus(jack.accessToken, IDP_ROUTE.path)).toBe(200);
    await untilDue(jack.grantId);
    stripExpiresIn = true;
    try {
      const refreshes = () => idpIssued.filter((t) => t.grantType === 'refresh_token').length;
      const before = refreshes();
      for (let i = 0; i < 4; i++) expect(await mcpStatus(jack.accessToken, IDP_ROUTE.path)).toBe(200);
      expect(refreshes()).toBe(before + 1);
      expect((await idpRecord(jack.grantId)).refreshAt! - Date.now()).toBeGreaterThan(30_000);
    } finally {
      stripExpiresIn = false;
    }
  });
});

describe('[J61] the IdP login’s state, nonce and PKCE verifier are not in the store', () => {
  it('[J61] after several full OIDC logins, nothing written to the store holds any of them', async () => {
    const logins = [await signIn('kate'), await signIn('kate'), await signIn('liam', new CookieBrowser(), IDP_ROUTE.path)];
    const dump = gateway.recording.dump();
    for (const { idpRequest } of logins) {
      expect(idpRequest.state).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(idpRequest.nonce).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(idpRequest.codeVerifier).toMatch(/^[A-Za-z0-9_-]{43}$/);
      for (const secret of Object.values(idpRequest)) expect(dump).not.toContain(secret);
    }
    // Every login had its own.
    expect(new Set(logins.map((l) => l.idpRequest.codeVerifier)).size).toBe(logins.length);
    expect(new Set(logins.map((l) => l.idpRequest.nonce)).size).toBe(logins.length);
  });
});

async function idpRecord(grantId: string): Promise<{ refreshAt?: number; refreshToken?: string }> {
  const sealed = await gateway.recording.get(idpTokenKey(grantId));
  return JSON.parse(cipher.open(grantId, sealed!)!) as { refreshAt?: number; refreshToken?: string };
}

/** Until the gateway's IdP token for the grant is due for refresh (its stored refreshAt, under IDP_TOKEN_TTL s away), and a little more. */
async function untilDue(grantId: string): Promise<void> {
  const { refreshAt } = await idpRecord(grantId);
  expect(refreshAt! - Date.now()).toBeLessThanOrEqual(IDP_TOKEN_TTL * 1000);
  await sleepUntil(refreshAt! + 100);
}

async function findIdpRefreshToken(grantId: string): Promise<string> {
  const record = await idpRecord(grantId);
  expect(record.refreshToken).toBeTruthy();
  return record.refreshToken!;
}
