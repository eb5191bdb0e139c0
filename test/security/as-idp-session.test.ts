/**
 * SECURITY-CASES G27, G32, G33 and F26 for the third-party login, against a real OpenID Connect
 * IdP (oidc-provider with a headless login): the gateway's consent comes before any redirect to
 * the IdP, even for a user the IdP already knows (G27); the IdP callback refuses a missing,
 * unknown, replayed, stale, repeated or foreign `state`, a browser without the binding cookie, and
 * a wrong or missing `iss` — with an error page, nothing issued, nothing for the client (G32);
 * user A's gateway token never resolves user B's IdP token, and revoking a grant deletes its IdP
 * tokens (G33); the IdP's tokens never reach the client (F26), nor the store unencrypted, nor the
 * logs.
 */
import { randomBytes } from 'node:crypto';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IdpTokenCipher } from '../../src/authorization-server/idp/idp-token-cipher.js';
import { idpTokenKey, pendingAuthorizationKey } from '../../src/store/key-names.js';
import { DEFAULT_ROUTE, parseForm, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { accessTokens, chooseIdpLogin, IDP_CALLBACK_PATH, newIdpClient, onIdpTokens, revokeAtIdp, startGatewayIdp } from '../helpers/gateway-idp.js';
import { CookieBrowser, type Seen } from '../helpers/cookie-browser.js';
import { connectWithToken } from '../helpers/mcp-client.js';
import { codeRequestUrl, newVerifier, registerPublicClient, type PublicClient } from '../helpers/oauth-requests.js';
import { freePort } from '../helpers/net.js';
import type { OidcProviderHandle } from '../helpers/oidc-provider.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const IDP_TOKEN_TTL = 2;
const IDP_CLIENT = newIdpClient();

let everything: UpstreamHandle;
let hop: RecordingHop;
let idp: OidcProviderHandle;
let gateway: AsGateway;
let origin: string;
let mcpUrl: string;
const callbackPath = IDP_CALLBACK_PATH;
/** The account the headless IdP login signs in next. */
let idpAccount = 'alice';
const idpIssued: Array<{ accessToken: string; refreshToken?: string; idToken?: string }> = [];

beforeAll(async () => {
  everything = await startEverythingServer();
  hop = await startRecordingHop(everything.url);
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  mcpUrl = `${origin}${DEFAULT_ROUTE.path}`;
  idp = await startGatewayIdp(origin, IDP_CLIENT, IDP_TOKEN_TTL);
  chooseIdpLogin(idp, () => ({ accountId: idpAccount }));
  onIdpTokens(idp, (ctx) => {
    const body = ctx.body;
    idpIssued.push({ accessToken: body.access_token, refreshToken: body.refresh_token, idToken: body.id_token });
  });
  gateway = await startAsGateway({
    upstream: hop.url,
    gateway: { listen: { host: '127.0.0.1', port }, public_url: origin, log_level: 'debug' },
    authorizationServer: { login: { kind: 'oidc', issuer: idp.issuer, client_id: IDP_CLIENT.client_id, client_secret: { env: 'IDP_SECRET' }, scopes: ['openid', 'email'] } },
    env: { IDP_SECRET: IDP_CLIENT.client_secret },
    routes: { 'everything.yaml': { ...DEFAULT_ROUTE, upstream_auth: { kind: 'idp_token' } } },
    options: { registrationRateLimit: { max: 1000, windowMs: 60_000 } },
  });
});

afterAll(async () => {
  await gateway?.stop();
  await Promise.all([hop?.close(), idp?.close()]);
  await everything?.close();
});

const registerClient = () => registerPublicClient(origin, 'idp tests', '/cb');

interface Flow {
  browser: CookieBrowser;
  client: PublicClient;
  verifier: string;
  state: string;
  /** The IdP's redirect to the gateway's callback (code, state, iss), not yet followed. */
  callback: URL;
}

const authorizeUrl = (client: PublicClient, state: string, verifier: string) => codeRequestUrl(origin, { client, verifier, state, resource: mcpUrl, scope: 'mcp:read' });

/** /authorize → the gateway's consent page → approve → the IdP → up to (not into) the gateway callback. */
async function toCallback(account: string, browser = new CookieBrowser(), client?: PublicClient): Promise<Flow> {
  idpAccount = account;
  const registered = client ?? (await registerClient());
  const verifier = newVerifier();
  const state = `client-state-${randomBytes(4).toString('hex')}`;
  let step = await browser.request(authorizeUrl(registered, state, verifier));
  if (step.status === 200) {
    const form = parseForm(step.body);
    expect(form?.fields.decision ?? form?.fields.interaction).toBeDefined();
    step = await browser.request(new URL(form!.action, origin), { method: 'POST', body: new URLSearchParams({ ...form!.fields, decision: 'approve' }) });
  }
  for (let hops = 0; hops < 15; hops++) {
    expect(step.location, `${step.status} ${step.body.slice(0, 300)}`).toBeTruthy();
    const next = new URL(step.location!, step.url);
    if (next.origin === origin && next.pathname === callbackPath) return { browser, client: registered, verifier, state, callback: next };
    step = await browser.request(next);
  }
  throw new Error('the IdP never redirected to the gateway callback');
}

/** Follows the callback: the gateway's redirect to the client (code or error). */
async function finish(flow: Flow, browser = flow.browser, callback = flow.callback): Promise<Seen> {
  return browser.request(callback);
}

async function redeem(flow: Flow, code: string): Promise<Response> {
  return fetch(`${origin}/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: flow.verifier, client_id: flow.client.id, redirect_uri: flow.client.redirectUri, resource: mcpUrl }),
  });
}

interface SignedIn {
  flow: Flow;
  accessToken: string;
  refreshToken: string;
  grantId: string;
}

async function signIn(account: string, browser?: CookieBrowser): Promise<SignedIn> {
  const flow = await toCallback(account, browser);
  const back = await finish(flow);
  expect(back.status).toBe(302);
  const code = new URL(back.location!).searchParams.get('code')!;
  const res = await redeem(flow, code);
  expect(res.status).toBe(200);
  const tokens = (await res.json()) as { access_token: string; refresh_token: string };
  return { flow, accessToken: tokens.access_token, refreshToken: tokens.refresh_token, grantId: decodeJwt(tokens.access_token).gid as string };
}

/** The bearer the upstream received with the tools/call carrying `marker`. */
async function upstreamBearer(accessToken: string, marker: string): Promise<string> {
  const client = await connectWithToken(mcpUrl, accessToken);
  try {
    await client.callTool({ name: 'echo', arguments: { message: marker } });
  } finally {
    await client.close();
  }
  const request = hop.requests.find((r) => r.body.toString('utf8').includes(marker))!;
  return request.headers.find(([n]) => n.toLowerCase() === 'authorization')![1].replace(/^Bearer /, '');
}

/** A raw MCP initialize with `accessToken`: the status and challenge, and whether the upstream saw anything. */
async function initialize(accessToken: string) {
  const before = hop.requests.length;
  const res = await fetch(mcpUrl, {
    method: 'POST',
    headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }),
  });
  await res.body?.cancel();
  return { status: res.status, challenge: res.headers.get('www-authenticate'), upstreamSaw: hop.requests.length - before };
}

const issuedSince = (mark: number) => gateway.recording.namespacesSince(mark).filter((ns) => ns === 'code' || ns === 'idp-token' || ns === 'refresh');

describe('G27: the gateway consent comes before any redirect to the IdP', () => {
  it('a new client gets the consent page even when the user already approved the gateway at the IdP', async () => {
    const browser = new CookieBrowser();
    await signIn('alice', browser);
    // The IdP now has a session and a grant for the gateway: a second trip there is silent.
    const interactions = idp.interactions.length;
    const again = await toCallback('alice', browser);
    expect(idp.interactions.length).toBe(interactions);
    expect((await finish(again)).status).toBe(302);

    // A new client, same browser: the gateway's own consent page, no redirect anywhere.
    const stranger = await registerClient();
    const page = await browser.request(authorizeUrl(stranger, 's', newVerifier()));
    expect(page.status).toBe(200);
    expect(page.location).toBeNull();
    expect(page.body).toContain('name="decision"');
    expect(page.body).toContain('idp tests');
    expect(page.body).toContain('127.0.0.1');
    expect(page.body).toContain('mcp:read');
    expect(page.body).not.toContain(idp.issuer);
  });

  it('the IdP request is made only after consent, and carries PKCE, state and nonce of its own', async () => {
    const flow = await toCallback('alice');
    const toIdp = flow.browser.seen.find((s) => s.location?.startsWith(idp.issuer))!;
    // The redirect to the IdP answered the consent POST.
    const consentIndex = flow.browser.seen.findIndex((s) => s.url === `${origin}/authorize/consent`);
    expect(flow.browser.seen.indexOf(toIdp)).toBe(consentIndex);
    const request = new URL(toIdp.location!).searchParams;
    expect(request.get('client_id')).toBe(IDP_CLIENT.client_id);
    expect(request.get('redirect_uri')).toBe(`${origin}${callbackPath}`);
    expect(request.get('code_challenge_method')).toBe('S256');
    expect(request.get('nonce')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // The IdP state is the gateway's own (256 bits), not the client's.
    expect(request.get('state')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(request.get('state')).not.toBe(flow.state);
    expect(flow.callback.searchParams.get('iss')).toBe(idp.issuer);
  });
});

describe('G32: the IdP callback refuses what is not the answer to this browser’s request', () => {
  interface Case {
    name: string;
    status: 400 | 403;
    /** Changes the callback URL the attacker (or the broken IdP) sends. */
    tamper?: (callback: URL) => void;
    /** Which browser follows it: the one that consented (default), a fresh one, or another one with its own binding cookie. */
    browser?: 'fresh' | 'other';
    /** Done to the gateway's state before the callback arrives. */
    before?: (flow: Flow) => Promise<void>;
    /** What the untouched callback gets afterwards in the right browser: proves the refusal did not (or did) consume it. */
    thenOriginal: 302 | 400;
  }
  const state = (flow: Flow) => flow.callback.searchParams.get('state')!;
  const cases: Case[] = [
    { name: 'missing state', status: 400, tamper: (cb) => cb.searchParams.delete('state'), thenOriginal: 302 },
    { name: 'unknown state', status: 400, tamper: (cb) => cb.searchParams.set('state', randomBytes(32).toString('base64url')), thenOriginal: 302 },
    { name: 'state given twice', status: 400, tamper: (cb) => cb.searchParams.append('state', cb.searchParams.get('state')!), thenOriginal: 302 },
    { name: 'the client’s own state instead of the gateway’s', status: 400, tamper: (cb) => cb.searchParams.set('state', 'client-state'), thenOriginal: 302 },
    {
      name: 'stale state (older than 10 minutes)',
      status: 400,
      before: async (flow) => {
        const key = pendingAuthorizationKey(state(flow));
        const record = JSON.parse((await gateway.recording.get(key))!) as { createdAt: number };
        await gateway.recording.set(key, JSON.stringify({ ...record, createdAt: Date.now() - 10 * 60_000 - 1000 }), 60_000);
      },
      thenOriginal: 400,
    },
    { name: 'a browser without the binding cookie', status: 403, browser: 'fresh', thenOriginal: 302 },
    { name: 'another browser (its own binding cookie)', status: 403, browser: 'other', thenOriginal: 302 },
    { name: 'replayed state (the callback already completed)', status: 400, before: async (flow) => void expect((await finish(flow)).status).toBe(302), thenOriginal: 400 },
    { name: 'a wrong iss (mix-up)', status: 400, tamper: (cb) => cb.searchParams.set('iss', 'https://evil.example'), thenOriginal: 400 },
    { name: 'no iss from an IdP that advertises it (RFC 9207)', status: 400, tamper: (cb) => cb.searchParams.delete('iss'), thenOriginal: 400 },
  ];

  it.each(cases)('$name → $status, an error page, nothing issued, nothing for the client', async (c) => {
    const flow = await toCallback('alice');
    await c.before?.(flow);
    const callback = new URL(flow.callback);
    c.tamper?.(callback);
    let browser = flow.browser;
    if (c.browser === 'fresh') browser = new CookieBrowser();
    if (c.browser === 'other') {
      browser = new CookieBrowser();
      // It has been to /authorize itself, so it holds a valid binding cookie of its own.
      await browser.request(authorizeUrl(await registerClient(), 'x', newVerifier()));
    }
    const mark = gateway.recording.writes.length;
    const idpTokensBefore = idpIssued.length;
    const refused = await finish(flow, browser, callback);
    expect(refused.status).toBe(c.status);
    expect(refused.location).toBeNull();
    expect(refused.headers.get('content-type')).toContain('text/html');
    expect(refused.body).not.toContain(flow.client.redirectUri);
    expect(issuedSince(mark)).toEqual([]);
    // The IdP's code was not redeemed either.
    expect(idpIssued.length).toBe(idpTokensBefore);

    const original = await finish(flow);
    expect(original.status).toBe(c.thenOriginal);
    if (c.thenOriginal === 302) expect(new URL(original.location!).searchParams.get('code')).toBeTruthy();
  });
});

describe('G33 and F26: the IdP tokens stay bound to their grant and away from the client', () => {
  let alice: SignedIn;
  let bob: SignedIn;

  beforeAll(async () => {
    alice = await signIn('alice');
    bob = await signIn('bob');
  });

  it('each gateway token resolves its own user’s IdP token', async () => {
    const [a, b] = await Promise.all([upstreamBearer(alice.accessToken, 'g33-alice'), upstreamBearer(bob.accessToken, 'g33-bob')]);
    expect(a).not.toBe(b);
    const [atA, atB] = await Promise.all([accessTokens(idp).find(a), accessTokens(idp).find(b)]);
    expect(atA?.accountId).toBe('alice');
    expect(atB?.accountId).toBe('bob');
  });

  it('user B’s encrypted IdP tokens copied under user A’s grant do not decrypt: 401, never B’s token upstream', async () => {
    const aliceKey = idpTokenKey(alice.grantId);
    const aliceSealed = (await gateway.recording.get(aliceKey))!;
    const bobSealed = (await gateway.recording.get(idpTokenKey(bob.grantId)))!;
    expect(aliceSealed).toMatch(/^v1\./);
    await gateway.recording.set(aliceKey, bobSealed, 60_000);
    try {
      const swapped = await initialize(alice.accessToken);
      expect(swapped.status).toBe(401);
      expect(swapped.challenge).toMatch(/^Bearer .*error="invalid_token"/);
      expect(swapped.upstreamSaw).toBe(0);
    } finally {
      await gateway.recording.set(aliceKey, aliceSealed, 60_000);
    }
    // Restored: the same token works again, so the swap was the only reason for the 401.
    expect((await initialize(alice.accessToken)).status).toBe(200);
  });

  it('the encryption binds a record to its grant and key: another grant id, another key or a flipped bit opens nothing', () => {
    const cipher = new IdpTokenCipher(randomBytes(32));
    const sealed = cipher.seal('grant-a', 'idp-access-token-value');
    expect(sealed).not.toContain('idp-access-token-value');
    expect(cipher.open('grant-a', sealed)).toBe('idp-access-token-value');
    expect(cipher.open('grant-b', sealed)).toBeUndefined();
    expect(new IdpTokenCipher(randomBytes(32)).open('grant-a', sealed)).toBeUndefined();
    const [version, iv, body, tag] = sealed.split('.') as [string, string, string, string];
    const flipped = Buffer.from(body, 'base64url');
    flipped[0]! ^= 1;
    expect(cipher.open('grant-a', [version, iv, flipped.toString('base64url'), tag].join('.'))).toBeUndefined();
    // Two seals of the same record differ (fresh IV).
    expect(cipher.seal('grant-a', 'x')).not.toBe(cipher.seal('grant-a', 'x'));
  });

  it('a gateway token whose grant id claim was changed to user B’s is refused before any lookup (signature)', async () => {
    const [header, , signature] = alice.accessToken.split('.');
    const forged = [header, Buffer.from(JSON.stringify({ ...decodeJwt(alice.accessToken), gid: bob.grantId })).toString('base64url'), signature].join('.');
    const res = await initialize(forged);
    expect(res.status).toBe(401);
    expect(res.upstreamSaw).toBe(0);
  });

  it('revoking the grant (/revoke with its refresh token) deletes its IdP tokens; its live access token gets 401', async () => {
    const carol = await signIn('carol');
    expect((await initialize(carol.accessToken)).status).toBe(200);
    expect(await gateway.recording.get(idpTokenKey(carol.grantId))).toBeDefined();
    const revoked = await fetch(`${origin}/revoke`, { method: 'POST', body: new URLSearchParams({ token: carol.refreshToken, client_id: carol.flow.client.id }) });
    expect(revoked.status).toBe(200);
    expect(await gateway.recording.get(idpTokenKey(carol.grantId))).toBeUndefined();
    const after = await initialize(carol.accessToken);
    expect(after.status).toBe(401);
    expect(after.challenge).toContain('resource_metadata=');
    expect(after.upstreamSaw).toBe(0);
  });

  it('a replayed code revokes the grant and deletes its IdP tokens', async () => {
    const flow = await toCallback('dave');
    const code = new URL((await finish(flow)).location!).searchParams.get('code')!;
    const first = await redeem(flow, code);
    const { access_token } = (await first.json()) as { access_token: string };
    const grantId = decodeJwt(access_token).gid as string;
    expect(await gateway.recording.get(idpTokenKey(grantId))).toBeDefined();
    expect((await redeem(flow, code)).status).toBe(400);
    expect(await gateway.recording.get(idpTokenKey(grantId))).toBeUndefined();
    expect((await initialize(access_token)).status).toBe(401);
  });

  it('when the IdP refuses the refresh (its session ended), the grant is revoked and the client must sign in again', async () => {
    const erin = await signIn('erin');
    const idpRefresh = idpIssued.at(-1)!.refreshToken!;
    expect(await revokeAtIdp(idp, IDP_CLIENT, idpRefresh)).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, IDP_TOKEN_TTL * 1000 + 200));
    const call = await initialize(erin.accessToken);
    expect(call.status).toBe(401);
    expect(call.upstreamSaw).toBe(0);
    expect(await gateway.recording.get(idpTokenKey(erin.grantId))).toBeUndefined();
    const refresh = await fetch(`${origin}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: erin.refreshToken, client_id: erin.flow.client.id }) });
    expect(refresh.status).toBe(400);
    expect(await refresh.json()).toMatchObject({ error: 'invalid_grant' });
    const metrics = await (await fetch(`${origin}/metrics`)).text();
    expect(metrics).toMatch(/^mag_grants_revoked_total\{reason="idp_session_ended"\} 1$/m);
  });

  it('F26/I44/I45: no IdP token in anything the client got, in the store unencrypted, or in the logs', async () => {
    const idpSecrets = idpIssued.flatMap((t) => [t.accessToken, t.refreshToken, t.idToken]).filter((s): s is string => typeof s === 'string');
    expect(idpSecrets.length).toBeGreaterThan(6);
    // Everything a browser got from the gateway (pages, redirects to the client) and every token response.
    const fromGateway = [alice, bob].flatMap((s) => s.flow.browser.seen.filter((r) => r.url.startsWith(origin)).map((r) => `${r.location} ${JSON.stringify([...r.headers])} ${r.body}`));
    const tokenResponses = [alice, bob].map((s) => `${s.accessToken} ${s.refreshToken}`);
    const dump = gateway.recording.dump();
    const logs = gateway.logs.join('\n');
    expect(logs).toContain('"level":20'); // debug logging was on
    for (const secret of idpSecrets) {
      for (const text of [...fromGateway, ...tokenResponses]) expect(text).not.toContain(secret);
      expect(dump).not.toContain(secret);
      expect(logs).not.toContain(secret);
    }
  });
});
