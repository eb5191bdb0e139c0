/**
 * The connected-apps page (/account/apps) signed in through a third-party OpenID Connect IdP
 * (`login: { kind: oidc }`, the real oidc-provider with its headless login), the way the dev login
 * is in test/security/browser-connected-apps.test.ts: alice approves an app through the IdP (code
 * flow against the gateway's AS), then opens the page in a fresh browser, is sent through the IdP
 * login and the gateway's callback, lands on the page, sees the app (name, client id, scopes),
 * revokes it with the page's CSRF token in a same-origin post, and the app's refresh token then
 * gets invalid_grant. A cookie browser plays the user (no page engine is needed: every step is a
 * redirect or one form).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { DEFAULT_ROUTE, headlessUser, parseForm, recordingAudit, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { CookieBrowser, type Seen } from '../helpers/cookie-browser.js';
import { chooseIdpLogin, IDP_CALLBACK_PATH, newIdpClient, startGatewayIdp } from '../helpers/gateway-idp.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { codeRequestUrl, newVerifier, registerPublicClient, type PublicClient } from '../helpers/oauth-requests.js';
import type { OidcProviderHandle } from '../helpers/oidc-provider.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';

const IDP_CLIENT = newIdpClient();
const APP_NAME = 'Acme OIDC Assistant';

let everything: UpstreamHandle;
let idp: OidcProviderHandle;
let gateway: AsGateway;
let origin: string;
/** When set, the IdP's headless login answers access_denied instead of signing alice in. */
let idpDenies = false;
const audit = recordingAudit();

beforeAll(async () => {
  everything = await startEverythingServer();
  // The gateway's callback must be registered at the IdP before the gateway exists: pick its port first.
  const port = await freePort();
  origin = `http://127.0.0.1:${port}`;
  idp = await startGatewayIdp(origin, IDP_CLIENT, 300);
  chooseIdpLogin(idp, () => (idpDenies ? { error: 'access_denied', error_description: 'the user said no' } : { accountId: 'alice' }));
  gateway = await startAsGateway({
    upstream: everything.url,
    gateway: { listen: { host: '127.0.0.1', port }, public_url: origin, account: { enabled: true } },
    authorizationServer: {
      signing_key: { env: 'SIGNING_KEY' },
      login: { kind: 'oidc', issuer: idp.issuer, client_id: IDP_CLIENT.client_id, client_secret: { env: 'IDP_CLIENT_SECRET' }, scopes: ['openid', 'offline_access'] },
    },
    env: { IDP_CLIENT_SECRET: IDP_CLIENT.client_secret, SIGNING_KEY: JSON.stringify(await generateSigningKey()) },
    audit,
  });
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await idp?.close();
  await everything?.close();
});

/** The user approves `client` (gateway consent, then the IdP signs alice in); the code redeemed. */
async function approve(client: PublicClient): Promise<{ access: string; refresh: string }> {
  const verifier = newVerifier();
  const authorize = codeRequestUrl(origin, { client, verifier, state: 'st', resource: `${origin}${DEFAULT_ROUTE.path}`, scope: 'mcp:read mcp:write' });
  const back = await followAuthorization(authorize, client.redirectUri, { onPage: headlessUser('alice') });
  const code = back.searchParams.get('code');
  expect(code, back.href).toBeTruthy();
  const res = await fetch(`${origin}/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'authorization_code', code: code!, code_verifier: verifier, redirect_uri: client.redirectUri, client_id: client.id }),
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { access_token: string; refresh_token: string };
  return { access: body.access_token, refresh: body.refresh_token };
}

/** GETs `url` in `browser` and follows its redirects (across hosts, cookies kept per host) to the first page. */
async function open(browser: CookieBrowser, url: string): Promise<Seen> {
  let next = new URL(url);
  for (let step = 0; step < 20; step++) {
    const seen = await browser.request(next);
    if (seen.status < 300 || seen.status >= 400 || !seen.location) return seen;
    next = new URL(seen.location, seen.url);
  }
  throw new Error(`too many redirects from ${url}`);
}

function refresh(client: PublicClient, refreshToken: string): Promise<Response> {
  return fetch(`${origin}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.id }) });
}

describe('connected-apps page with login through a third-party OpenID Connect IdP', () => {
  it('signs the user in at the IdP, lists the app she approved, and revoking it ends its refresh token', async () => {
    const app = await registerPublicClient(origin, APP_NAME);
    const tokens = await approve(app);
    const refreshed = await refresh(app, tokens.refresh);
    expect(refreshed.status).toBe(200);
    // The refresh rotated the token: the new one is the app's live refresh token.
    const live = ((await refreshed.json()) as { refresh_token: string }).refresh_token;

    const browser = new CookieBrowser();
    const interactionsBefore = idp.interactions.length;
    const page = await open(browser, `${origin}/account/apps`);
    // The way in: the page → the IdP → its login → the gateway's callback → the page.
    const hops = browser.locations;
    expect(hops.some((u) => u.origin === idp.issuer)).toBe(true);
    expect(hops.some((u) => u.origin === origin && u.pathname === IDP_CALLBACK_PATH)).toBe(true);
    expect(hops.at(-1)?.href).toBe(`${origin}/account/apps`);
    // The IdP's headless login ran for this sign-in (its login and consent prompts are one interaction each).
    expect(idp.interactions.length).toBeGreaterThan(interactionsBefore);
    expect(idp.interactions.at(-1)!.params).toMatchObject({ client_id: IDP_CLIENT.client_id, redirect_uri: `${origin}${IDP_CALLBACK_PATH}` });
    expect(audit.events).toContainEqual(expect.objectContaining({ event: 'account_sign_in', sub: 'alice' }));

    expect(page.status, page.body.slice(0, 500)).toBe(200);
    expect(page.url).toBe(`${origin}/account/apps`);
    expect(page.body).toContain('Connected apps');
    expect(page.body).toContain('Signed in as <bdi>alice</bdi>');
    expect(page.body).toContain(APP_NAME);
    expect(page.body).toContain(app.id);
    for (const scope of ['mcp:read', 'mcp:write']) expect(page.body).toContain(`<code>${scope} </code>`);

    const form = parseForm(page.body);
    expect(form).toMatchObject({ action: '/account/apps/revoke', fields: { client_id: app.id } });
    expect(form!.fields.csrf).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    const revoked = await browser.request(new URL(form!.action, origin), {
      method: 'POST',
      body: new URLSearchParams(form!.fields),
      headers: { 'sec-fetch-site': 'same-origin', origin },
    });
    expect(revoked.status, revoked.body.slice(0, 500)).toBe(303);
    expect(new URL(revoked.location!, origin).href).toBe(`${origin}/account/apps`);
    expect(audit.events).toContainEqual(expect.objectContaining({ event: 'connected_app_revoked', sub: 'alice', client_id: app.id }));

    const after = await browser.request(`${origin}/account/apps`);
    expect(after.status).toBe(200);
    expect(after.body).toContain('Signed in as <bdi>alice</bdi>');
    expect(after.body).not.toContain(app.id);

    const refused = await refresh(app, live);
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ error: 'invalid_grant' });
  }, 60_000);

  it('an IdP that does not sign the user in: an error page on this origin, no session, the page asks again', async () => {
    const browser = new CookieBrowser();
    idpDenies = true;
    let page: Seen;
    try {
      page = await open(browser, `${origin}/account/apps`);
    } finally {
      idpDenies = false;
    }
    expect(browser.locations.some((u) => u.origin === origin && u.pathname === IDP_CALLBACK_PATH)).toBe(true);
    expect(page.url.startsWith(`${origin}${IDP_CALLBACK_PATH}`)).toBe(true);
    expect(page.status).toBe(400);
    expect(page.body).toContain('Sign-in failed');
    expect(page.body).not.toContain('said no');
    expect(browser.jars.get(new URL(origin).host)?.has('__Host-mag-account')).toBe(false);
    // Nothing was signed in: the page sends this browser to the IdP again.
    const again = await browser.request(`${origin}/account/apps`);
    expect(again.status).toBe(302);
    expect(new URL(again.location!).origin).toBe(idp.issuer);
  }, 60_000);
});
