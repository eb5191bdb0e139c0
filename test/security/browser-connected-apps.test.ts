/**
 * [J52] [G28] [G29] [G31] [J54] The connected-apps page (/account/apps, `account.enabled`) in a real browser
 * (Debian's chromium through playwright-core), on two gateway replicas sharing one real
 * redis-server and one signing key, in front of the real server-everything:
 * - alice approves two dynamically registered apps, signs in to the page with the dev login, and
 *   sees each with its name, client id, redirect host, MCP server, scopes, approved at and last
 *   used (the screenshot of docs/authorization-server.md is taken here);
 * - she revokes one: its refresh token gets invalid_grant, its access token is refused on the
 *   replica that revoked it at once and on the other replica within 5 s (an SDK client on a
 *   kept-alive connection included); the other app keeps working on both; the revoked app has
 *   to ask for consent again;
 * - the forms refuse what the consent page refuses: no CSRF token, another browser's token,
 *   a cross-site or same-site foreign origin; the page cannot be framed; the session cookie is
 *   `__Host-`, HttpOnly, Secure, SameSite=Lax and useless in another browser;
 * - bob sees none of alice's apps and cannot revoke one by naming its client id;
 * - sign-out ends the session; the page is off (404) unless `account.enabled`; its requests count
 *   against the per-address `interaction` flood limit (429 with Retry-After).
 * Without /usr/bin/chromium these tests are skipped, with the reason in their names.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { recordingAudit, startAsGateway } from '../helpers/authorization-server.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { devAuthorizationServer, gatewayYaml } from '../helpers/gateway-config.js';
import { connectWithToken } from '../helpers/mcp-client.js';
import { closeServer, freePort, listen } from '../helpers/net.js';
import { codeRequestUrl, newVerifier } from '../helpers/oauth-requests.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
/** The picture of the page in docs/authorization-server.md (docs/images/), taken from the first test's page. */
// The screenshot is rewritten only when asked (UPDATE_SCREENSHOTS=1), so a test run leaves the
// checkout clean; otherwise it goes to the temp directory for a human to look at.
const SCREENSHOT = process.env.UPDATE_SCREENSHOTS === '1'
  ? new URL('../../docs/images/connected-apps.png', import.meta.url)
  : pathToFileURL(join(tmpdir(), 'mag-connected-apps.png'));
/** A browser test's own budget: several page loads and sign-ins, on a machine the other suites load too. */
const BROWSER_TEST_MS = 90_000;
/** The contract: a revoked grant's access tokens are refused on every replica within this. */
const REVOCATION_BOUND_MS = 5_000;

interface App {
  name: string;
  clientId: string;
  redirectUri: string;
}

interface Tokens {
  access: string;
  refresh: string;
}

let browser: Browser;
let redis: RedisServer;
let everything: UpstreamHandle;
let A: TestGateway;
let B: TestGateway;
/** A's origin: the public_url (and issuer) of both replicas; B is reached at its own port. */
let origin: string;
let resource: string;
let callbackServer: Server;
let callbackBase: string;
let attacker: Server;
let attackerPort: number;
const attackerPages = new Map<string, string>();
const audit = recordingAudit();
let acme: App;
let beta: App;

beforeAll(async () => {
  if (!available) return;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  [redis, everything] = await Promise.all([startRedisServer(), startEverythingServer()]);
  const env = { ACCOUNT_TEST_SIGNING_KEY: JSON.stringify(await generateSigningKey()) };
  const [portA, portB] = [await freePort(), await freePort()];
  origin = `http://127.0.0.1:${portA}`;
  resource = `${origin}/everything/mcp`;
  const keyPrefix = `account-${randomBytes(4).toString('hex')}:`;
  const files = (port: number) => ({
    'gateway.yaml': gatewayYaml({
      listen: { host: '127.0.0.1', port },
      public_url: origin,
      log_level: 'warn',
      store: { kind: 'redis', url: redis.url, key_prefix: keyPrefix },
      authorization_server: devAuthorizationServer({ signing_key: { env: 'ACCOUNT_TEST_SIGNING_KEY' } }),
      account: { enabled: true },
    }),
    'everything.yaml': { path: '/everything/mcp', upstream: everything.url, scopes_supported: ['mcp:read', 'mcp:write'], required_scopes: ['mcp:read'] },
  });
  A = await startTestGateway(files(portA), env, { audit });
  B = await startTestGateway({ ...files(portB) }, env);

  callbackServer = createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end('<p>Signed in. You can close this window.</p>'));
  callbackBase = `http://127.0.0.1:${await listen(callbackServer)}`;
  attacker = createServer((req, res) => {
    const html = attackerPages.get(new URL(req.url ?? '/', 'http://x').pathname);
    if (!html) return res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
  });
  attackerPort = await listen(attacker);
  acme = await register('Acme Assistant', '/acme/callback');
  beta = await register('Beta Notes', '/beta/callback');
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await A?.stop();
  await B?.stop();
  await everything?.close();
  await redis?.stop();
  if (callbackServer) await closeServer(callbackServer);
  if (attacker) await closeServer(attacker);
});

async function register(name: string, path: string): Promise<App> {
  const redirectUri = `${callbackBase}${path}`;
  const res = await fetch(`${origin}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: name, redirect_uris: [redirectUri], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] }),
  });
  expect(res.status).toBe(201);
  return { name, clientId: ((await res.json()) as { client_id: string }).client_id, redirectUri };
}

async function newPage(): Promise<{ context: BrowserContext; page: Page; console: string[] }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  // Generous: on a machine the other suites load, a page load can take seconds (the assertions do not depend on it).
  page.setDefaultTimeout(20_000);
  const console: string[] = [];
  page.on('console', (m) => console.push(m.text()));
  return { context, page, console };
}

/** The dev login form (an authorization's or the account page's): sign in as `user`. */
async function devSignIn(page: Page, user: string): Promise<void> {
  await page.locator('input[name="username"]').fill(user);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** In the browser: approve `app` (consent page, then the dev login unless `signedInAs` is skipped) and redeem the code. */
async function approve(page: Page, app: App, user: string): Promise<Tokens> {
  const verifier = newVerifier();
  await page.goto(codeRequestUrl(origin, { client: { id: app.clientId, redirectUri: app.redirectUri }, verifier, state: 's', resource, scope: 'mcp:read mcp:write' }).href);
  await page.getByRole('button', { name: 'Approve' }).click();
  // The code is in the URL as soon as the redirect is committed; the callback page's load is not needed.
  await Promise.all([page.waitForURL((url) => url.href.startsWith(app.redirectUri), { waitUntil: 'commit' }), devSignIn(page, user)]);
  const code = new URL(page.url()).searchParams.get('code')!;
  const res = await fetch(`${origin}/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: app.redirectUri, client_id: app.clientId }),
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { access_token: string; refresh_token: string };
  return { access: body.access_token, refresh: body.refresh_token };
}

/** In the browser: open /account/apps and sign in there as `user`; the page is the list afterwards. */
async function signInToAccount(page: Page, user: string): Promise<void> {
  await page.goto(`${origin}/account/apps`);
  await Promise.all([page.waitForURL(`${origin}/account/apps`), devSignIn(page, user)]);
  await page.getByRole('heading', { name: 'Connected apps' }).waitFor();
}

/** One MCP request with `token` to a replica: its status (200 accepted, 401 refused). */
async function mcpStatus(replica: TestGateway, token: string): Promise<number> {
  const res = await fetch(`${replica.url}/everything/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'probe', version: '1' } } }),
  });
  await res.body?.cancel();
  return res.status;
}

async function refresh(replica: TestGateway, app: App, refreshToken: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${replica.url}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: app.clientId }) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** How long until `replica` refuses `token` (polled every 50 ms), or Infinity past `limitMs`. */
async function timeUntilRefused(replica: TestGateway, token: string, since: number, limitMs: number): Promise<number> {
  while (Date.now() - since < limitMs) {
    if ((await mcpStatus(replica, token)) === 401) return Date.now() - since;
    await new Promise((r) => setTimeout(r, 50));
  }
  return Number.POSITIVE_INFINITY;
}

/** The section of the page that lists `app`. */
const appSection = (page: Page, app: App) => page.locator('section.app', { hasText: app.name });

const describeBrowser = available ? describe : describe.skip;
const why = available ? '' : ` — SKIPPED: ${CHROMIUM} is missing (apt-get install -y chromium)`;

describeBrowser(`the connected-apps page on two replicas${why}`, () => {
  it('[J52] lists both apps with their fields; revoking one ends its tokens everywhere within 5 s (kept-alive connections too); the other keeps working; consent is asked again', async () => {
    const { context, page } = await newPage();
    try {
      const acmeTokens = await approve(page, acme, 'alice');
      const betaTokens = await approve(page, beta, 'alice');
      // Both work on both replicas before anything is revoked.
      for (const replica of [A, B]) for (const t of [acmeTokens, betaTokens]) expect(await mcpStatus(replica, t.access)).toBe(200);
      const keptAlive = await connectWithToken(`${B.url}/everything/mcp`, acmeTokens.access);

      await signInToAccount(page, 'alice');
      const text = await page.locator('main').innerText();
      expect(text).toContain('Signed in as alice');
      for (const app of [acme, beta]) {
        const section = await appSection(page, app).innerText();
        expect(section).toContain(app.name);
        expect(section).toContain(app.clientId);
        expect(section).toContain(new URL(app.redirectUri).host);
        expect(section).toContain(resource);
        expect(section).toMatch(/mcp:read\s+mcp:write/);
        expect(section).toMatch(/Approved\s+\d{4}-\d\d-\d\d \d\d:\d\d UTC/);
        // The code redemption issued a refresh token: that is a use.
        expect(section).toMatch(/Last used\s+\d{4}-\d\d-\d\d \d\d:\d\d UTC/);
        expect(section).toContain('its name is not verified');
      }
      await mkdir(new URL('.', SCREENSHOT), { recursive: true });
      await page.screenshot({ path: SCREENSHOT.pathname, fullPage: true });

      await Promise.all([page.waitForURL(`${origin}/account/apps`), appSection(page, acme).getByRole('button', { name: 'Revoke access' }).click()]);
      const revokedAt = Date.now();
      const [onA, onB] = await Promise.all([timeUntilRefused(A, acmeTokens.access, revokedAt, REVOCATION_BOUND_MS), timeUntilRefused(B, acmeTokens.access, revokedAt, REVOCATION_BOUND_MS)]);
      console.info(`connected apps: a revoked app's access token refused after ${onA} ms on the replica that revoked it, ${onB} ms on the other`);
      expect(onA).toBeLessThan(REVOCATION_BOUND_MS);
      expect(onB).toBeLessThan(REVOCATION_BOUND_MS);
      await expect(keptAlive.listTools()).rejects.toThrow(/401|invalid_token|Unauthorized/i);
      await keptAlive.close().catch(() => undefined);
      expect(await refresh(B, acme, acmeTokens.refresh)).toMatchObject({ status: 400, body: { error: 'invalid_grant' } });

      // The page no longer lists it; the other app keeps working on both replicas, and refreshes.
      expect(await appSection(page, acme).count()).toBe(0);
      expect(await appSection(page, beta).count()).toBe(1);
      for (const replica of [A, B]) expect(await mcpStatus(replica, betaTokens.access)).toBe(200);
      const refreshed = await refresh(B, beta, betaTokens.refresh);
      expect(refreshed.status).toBe(200);
      expect(await mcpStatus(A, refreshed.body.access_token as string)).toBe(200);

      // Audited and counted where it was revoked.
      expect(audit.events).toContainEqual(expect.objectContaining({ event: 'connected_app_revoked', sub: 'alice', client_id: acme.clientId, grants: 1 }));
      expect(audit.events).toContainEqual(expect.objectContaining({ event: 'grant_revoked', reason: 'revoked_by_user', sub: 'alice', client_id: acme.clientId }));
      expect(await (await fetch(`${A.url}/metrics`)).text()).toMatch(/mag_grants_revoked_total\{reason="revoked_by_user"\} 1/);

      // The revoked app asks again: this browser's consent cookie lets the login start, then alice's own consent is gone.
      await page.goto(codeRequestUrl(origin, { client: { id: acme.clientId, redirectUri: acme.redirectUri }, verifier: newVerifier(), state: 's', resource, scope: 'mcp:read mcp:write' }).href);
      await devSignIn(page, 'alice');
      await page.getByRole('button', { name: 'Approve' }).waitFor();
      expect(await page.locator('main').innerText()).toContain('Allow Acme Assistant to use this MCP server?');
      // While the other app goes straight through (alice's consent to it is remembered).
      await page.goto(codeRequestUrl(origin, { client: { id: beta.clientId, redirectUri: beta.redirectUri }, verifier: newVerifier(), state: 's', resource, scope: 'mcp:read mcp:write' }).href);
      await Promise.all([page.waitForURL((url) => url.href.startsWith(beta.redirectUri), { waitUntil: 'commit' }), devSignIn(page, 'alice')]);
    } finally {
      await context.close();
    }
  }, BROWSER_TEST_MS);
});

describeBrowser(`the page's forms and cookie have the consent page's protections${why}`, () => {
  /** alice, signed in to the page in a browser of her own, with one app (Beta Notes) approved there. */
  let alice: { context: BrowserContext; page: Page; tokens: Tokens };

  beforeAll(async () => {
    const { context, page } = await newPage();
    alice = { context, page, tokens: await approve(page, beta, 'alice') };
    await signInToAccount(page, 'alice');
  }, BROWSER_TEST_MS);
  afterAll(() => alice?.context.close());

  /** Beta Notes is still alice's: listed on her page, its token accepted. */
  async function expectBetaIntact(): Promise<void> {
    await alice.page.goto(`${origin}/account/apps`);
    expect(await appSection(alice.page, beta).count()).toBe(1);
    expect(await mcpStatus(A, alice.tokens.access)).toBe(200);
  }

  /** The revoke form of Beta Notes on alice's page: its action and fields. */
  async function betaForm(): Promise<Record<string, string>> {
    await alice.page.goto(`${origin}/account/apps`);
    const form = appSection(alice.page, beta).locator('form');
    return {
      client_id: (await form.locator('input[name="client_id"]').getAttribute('value'))!,
      csrf: (await form.locator('input[name="csrf"]').getAttribute('value'))!,
    };
  }

  const autoSubmit = (action: string, fields: Record<string, string>) => `<!doctype html><body onload="document.forms[0].submit()">
    <form method="post" action="${action}">${Object.entries(fields).map(([n, v]) => `<input type="hidden" name="${n}" value="${v}">`).join('')}</form>`;

  it('[G28] cannot be framed: a page on another origin embeds it and the browser blocks the frame', async () => {
    const { context, page, console } = await newPage();
    try {
      attackerPages.set('/frame.html', `<!doctype html><iframe name="apps" src="${origin}/account/apps" width="600" height="400"></iframe>`);
      const framed = page.waitForResponse((r) => r.url() === `${origin}/account/apps`);
      await page.goto(`http://localhost:${attackerPort}/frame.html`);
      const response = await framed;
      expect(response.headers()['x-frame-options']).toBe('DENY');
      expect(response.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
      await page.waitForLoadState('load');
      await expect.poll(() => page.frame({ name: 'apps' })!.url()).not.toContain('/account/');
      expect(console.join('\n')).toMatch(/frame-ancestors|X-Frame-Options/i);
    } finally {
      await context.close();
    }
  }, BROWSER_TEST_MS);

  it.each([
    ['cross-site (localhost), her own valid fields', 'localhost', (f: Record<string, string>) => f],
    ['cross-site (localhost), no CSRF token at all', 'localhost', (f: Record<string, string>) => ({ client_id: f.client_id! })],
    ['same-site (another port of 127.0.0.1), her own valid fields', '127.0.0.1', (f: Record<string, string>) => f],
    ['same-site (another port of 127.0.0.1), a forged CSRF token', '127.0.0.1', (f: Record<string, string>) => ({ ...f, csrf: randomBytes(32).toString('base64url') })],
  ])('[G29] a revoke auto-submitted from another origin (%s) → 403, nothing revoked', async (_name, host, fields) => {
    const action = `${origin}/account/apps/revoke`;
    attackerPages.set('/csrf.html', autoSubmit(action, fields(await betaForm())));
    const posted = alice.page.waitForResponse((r) => r.url() === action && r.request().method() === 'POST');
    await alice.page.goto(`http://${host}:${attackerPort}/csrf.html`);
    const response = await posted;
    expect(response.status()).toBe(403);
    expect(response.headers().location).toBeUndefined();
    await alice.page.waitForLoadState('load');
    expect(await alice.page.locator('body').innerText()).toContain('Not allowed');
    await expectBetaIntact();
  }, BROWSER_TEST_MS);

  it.each([
    ['no CSRF token', async () => ''],
    ['the CSRF token of another browser where alice is signed in too', async () => {
      const other = await newPage();
      try {
        await signInToAccount(other.page, 'alice');
        return (await other.page.locator('input[name="csrf"]').first().getAttribute('value'))!;
      } finally {
        await other.context.close();
      }
    }],
  ])('[G29] a revoke from the page itself with %s → 403, nothing revoked', async (_name, token) => {
    const csrf = await token();
    await betaForm();
    const form = appSection(alice.page, beta).locator('form');
    await form.locator('input[name="csrf"]').evaluate((input, value) => ((input as unknown as { value: string }).value = value), csrf);
    const posted = alice.page.waitForResponse((r) => r.url() === `${origin}/account/apps/revoke`);
    await form.getByRole('button', { name: 'Revoke access' }).click();
    expect((await posted).status()).toBe(403);
    expect(await alice.page.locator('body').innerText()).toContain('This form is not valid in this browser');
    await expectBetaIntact();
  }, BROWSER_TEST_MS);

  it('[G31] the session cookie is __Host-, HttpOnly, Secure, SameSite=Lax, and worth nothing in another browser', async () => {
    const cookies = await alice.context.cookies(origin);
    const session = cookies.find((c) => c.name === '__Host-mag-account')!;
    expect(session).toMatchObject({ path: '/', httpOnly: true, secure: true, sameSite: 'Lax' });
    expect(session.domain).toBe('127.0.0.1');
    // Copied alone into another browser (which has a browser cookie of its own, or none): the sign-in form, not her apps.
    const thief = await newPage();
    try {
      await thief.context.addCookies([session]);
      await thief.page.goto(`${origin}/account/apps`);
      await thief.page.locator('input[name="username"]').waitFor();
      expect(await thief.page.locator('main').innerText()).not.toContain(beta.name);
    } finally {
      await thief.context.close();
    }
  }, BROWSER_TEST_MS);
});

describeBrowser(`each user sees and revokes only their own apps${why}`, () => {
  it('bob sees the empty state, and naming alice\'s client id in his own valid form revokes nothing (404)', async () => {
    const alice = await newPage();
    const bob = await newPage();
    try {
      const aliceTokens = await approve(alice.page, beta, 'alice');
      await signInToAccount(bob.page, 'bob');
      expect(await bob.page.locator('main').innerText()).toContain('You have not approved any application yet');
      expect(await bob.page.locator('section.app').count()).toBe(0);
      // bob's own session and CSRF token, alice's client id: looked up among bob's apps only.
      const csrf = (await bob.page.locator('input[name="csrf"]').getAttribute('value'))!;
      const posted = bob.page.waitForResponse((r) => r.url() === `${origin}/account/apps/revoke`);
      // A form of bob's page, posted from it (same origin), with a client id he does not have.
      const fields = { client_id: beta.clientId, csrf };
      await bob.page.evaluate(`(() => {
        const form = document.createElement('form');
        form.method = 'post';
        form.action = ${JSON.stringify(`${origin}/account/apps/revoke`)};
        for (const [name, value] of Object.entries(${JSON.stringify(fields)})) {
          const input = document.createElement('input');
          input.type = 'hidden'; input.name = name; input.value = value;
          form.append(input);
        }
        document.body.append(form);
        form.submit();
      })()`);
      expect((await posted).status()).toBe(404);
      expect(await mcpStatus(B, aliceTokens.access)).toBe(200);
      expect((await refresh(A, beta, aliceTokens.refresh)).status).toBe(200);
      await signInToAccount(alice.page, 'alice');
      expect(await appSection(alice.page, beta).count()).toBe(1);
    } finally {
      await alice.context.close();
      await bob.context.close();
    }
  }, BROWSER_TEST_MS);

  it('sign-out ends the session: the old cookie signs nobody in', async () => {
    const { context, page } = await newPage();
    try {
      await signInToAccount(page, 'carol');
      const session = (await context.cookies(origin)).find((c) => c.name === '__Host-mag-account')!;
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByRole('heading', { name: 'Signed out' }).waitFor();
      expect((await context.cookies(origin)).some((c) => c.name === '__Host-mag-account')).toBe(false);
      await context.addCookies([session]);
      await page.goto(`${origin}/account/apps`);
      await page.locator('input[name="username"]').waitFor();
    } finally {
      await context.close();
    }
  }, BROWSER_TEST_MS);
});

describe('the page is off unless account.enabled', () => {
  it('404 at /account/apps on a gateway with the built-in AS and no account section, and for its forms', async () => {
    const gateway = await startAsGateway({ upstream: 'http://127.0.0.1:9/mcp' });
    try {
      for (const [method, path] of [['GET', '/account/apps'], ['POST', '/account/apps/revoke'], ['POST', '/account/sign-out']] as const) {
        const res = await fetch(`${gateway.issuer}${path}`, { method });
        expect(res.status, `${method} ${path}`).toBe(404);
        expect(await res.json()).toMatchObject({ error: 'not_found' });
      }
    } finally {
      await gateway.stop();
    }
  });
});

describe('[J54] the page is flood limited like the consent and login posts', () => {
  it('past rate_limits.interaction from one address: 429 with Retry-After, no sign-in started', async () => {
    const gateway = await startAsGateway({
      upstream: 'http://127.0.0.1:9/mcp',
      authorizationServer: { rate_limits: { interaction: { requests: 3, window: '1m' } } },
      gateway: { account: { enabled: true } },
    });
    try {
      for (let i = 0; i < 3; i++) expect((await fetch(`${gateway.issuer}/account/apps`)).status).toBe(200);
      const mark = gateway.recording.writes.length;
      for (const [method, path] of [['GET', '/account/apps'], ['POST', '/account/apps/revoke'], ['POST', '/account/sign-out']] as const) {
        const res = await fetch(`${gateway.issuer}${path}`, { method });
        expect(res.status, `${method} ${path}`).toBe(429);
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
        expect(await res.json()).toMatchObject({ error: expect.any(String) });
      }
      expect(gateway.recording.writes.slice(mark)).toEqual([]);
    } finally {
      await gateway.stop();
    }
  });
});
