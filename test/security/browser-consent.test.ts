/**
 * [G27] [G28] [G29] The consent page in a real browser (Debian's chromium through playwright-core):
 * - it cannot be framed: a page on another loopback origin embeds it and the browser blocks the
 *   frame (while the same page frames an ordinary gateway URL, the control);
 * - CSRF is enforced: a form auto-submitted from another origin — same-site (another port) or
 *   cross-site (localhost) — with a forged token, or even with the victim's own valid form fields,
 *   gets 403 and nothing is stored;
 * - a real user reads the page (client, redirect host, scopes, MCP server), clicks Approve, signs in
 *   on the dev login page, and the client gets its code (redeemed at /token).
 * Without /usr/bin/chromium these tests are skipped, with the reason in their names.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:http';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, listen } from '../helpers/net.js';
import { parseForm, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { codeRequestUrl, newVerifier } from '../helpers/oauth-requests.js';

/** Debian's chromium (CHROMIUM_PATH overrides, e.g. to check the skip message). */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const available = existsSync(CHROMIUM);
/** One screenshot of the consent page, for a human to look at (the test asserts text, not pixels). */
const SCREENSHOT = join(tmpdir(), 'mag-consent-page.png');

let browser: Browser;
let gateway: AsGateway;
let attacker: Server;
/** What the attacker's origin serves next (path → HTML). */
const attackerPages = new Map<string, string>();
let attackerPort: number;
let callbackServer: Server;
let callbacks: URL[] = [];
let redirectUri: string;
let clientId: string;

beforeAll(async () => {
  if (!available) return;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  gateway = await startAsGateway({ upstream: 'http://127.0.0.1:9/mcp', options: { registrationRateLimit: { max: 1000, windowMs: 60_000 } } });
  attacker = createServer((req, res) => {
    const html = attackerPages.get(new URL(req.url ?? '/', 'http://x').pathname);
    if (!html) return res.writeHead(404).end();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(html);
  });
  attackerPort = await listen(attacker);
  callbackServer = createServer((req, res) => {
    const url = new URL(req.url ?? '/', redirectUri);
    // Only the redirect itself (the browser also asks this origin for /favicon.ico).
    if (url.pathname === '/callback') callbacks.push(url);
    res.writeHead(200, { 'content-type': 'text/html' }).end('<p>Signed in. You can close this window.</p>');
  });
  const callbackPort = await listen(callbackServer);
  redirectUri = `http://127.0.0.1:${callbackPort}/callback`;
  const reg = await fetch(`${gateway.issuer}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'Acme Assistant', redirect_uris: [redirectUri], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] }),
  });
  clientId = ((await reg.json()) as { client_id: string }).client_id;
});
afterAll(async () => {
  await browser?.close();
  await gateway?.stop();
  if (attacker) await closeServer(attacker);
  if (callbackServer) await closeServer(callbackServer);
});

function authorizeUrl(verifier: string, state = 'browser-state'): string {
  const client = { id: clientId, redirectUri };
  return codeRequestUrl(gateway.issuer, { client, verifier, state, resource: `${gateway.issuer}/everything/mcp`, scope: 'mcp:read mcp:write' }).href;
}

/** A fresh browser profile (cookies of its own) with its console kept. */
async function newPage(): Promise<{ context: BrowserContext; page: Page; console: string[] }> {
  const context = await browser.newContext();
  const page = await context.newPage();
  page.setDefaultTimeout(5_000);
  const console: string[] = [];
  page.on('console', (m) => console.push(m.text()));
  return { context, page, console };
}

const describeBrowser = available ? describe : describe.skip;
const why = available ? '' : ` — SKIPPED: ${CHROMIUM} is missing (apt-get install -y chromium)`;

describeBrowser(`[G28] the consent page cannot be framed${why}`, () => {
  it('a page on another loopback origin embeds it: the browser blocks the frame; an ordinary gateway URL frames fine', async () => {
    const { context, page, console } = await newPage();
    try {
      attackerPages.set('/frame.html', `<!doctype html><title>Win a prize</title>
        <iframe id="consent" name="consent" src="${authorizeUrl(newVerifier())}" width="600" height="400"></iframe>
        <iframe id="control" name="control" src="${gateway.issuer}/healthz" width="300" height="100"></iframe>`);
      const consentResponse = page.waitForResponse((r) => r.url().startsWith(`${gateway.issuer}/authorize`));
      await page.goto(`http://localhost:${attackerPort}/frame.html`);
      const response = await consentResponse;
      expect(response.status()).toBe(200);
      expect(response.headers()['x-frame-options']).toBe('DENY');
      expect(response.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
      await page.waitForLoadState('load');

      const control = page.frame({ name: 'control' })!;
      await expect.poll(async () => control.locator('body').innerText().catch(() => '')).toContain('"status":"ok"');

      const framed = page.frame({ name: 'consent' })!;
      // Blocked: the frame shows the browser's error page, never the consent form.
      await expect.poll(() => framed.url()).not.toContain('/authorize');
      expect(await framed.locator('button[value="approve"]').count()).toBe(0);
      expect(await framed.locator('body').innerText({ timeout: 1_000 }).catch(() => '')).not.toContain('Acme Assistant');
      expect(console.join('\n')).toMatch(/frame-ancestors|X-Frame-Options/i);
    } finally {
      await context.close();
    }
  });
});

describeBrowser(`[G29] CSRF and cross-site form posts are refused${why}`, () => {
  /** The victim opens the consent page; returns its form (the attacker's best case: it knows the fields). */
  async function victimConsent(page: Page) {
    await page.goto(authorizeUrl(newVerifier()));
    await page.locator('button[value="approve"]').waitFor({ state: 'visible' });
    return parseForm(await page.content())!;
  }

  const autoSubmit = (action: string, fields: Record<string, string>) => `<!doctype html><body onload="document.forms[0].submit()">
    <form method="post" action="${action}">${Object.entries(fields).map(([n, v]) => `<input type="hidden" name="${n}" value="${v}">`).join('')}</form>`;

  it.each([
    ['cross-site (localhost), a forged CSRF token', 'localhost', (f: Record<string, string>) => ({ ...f, csrf: randomBytes(32).toString('base64url') })],
    ['cross-site (localhost), the victim’s own valid fields', 'localhost', (f: Record<string, string>) => f],
    ['same-site (another port of 127.0.0.1), a forged CSRF token', '127.0.0.1', (f: Record<string, string>) => ({ ...f, csrf: 'forged' })],
    ['same-site (another port of 127.0.0.1), the victim’s own valid fields', '127.0.0.1', (f: Record<string, string>) => f],
    ['cross-site, no CSRF token at all', 'localhost', (f: Record<string, string>) => ({ interaction: f.interaction! })],
  ])('an auto-submitted form from another origin (%s) → 403, nothing stored, no redirect', async (_name, host, fields) => {
    const { context, page } = await newPage();
    try {
      const form = await victimConsent(page);
      const action = new URL(form.action, gateway.issuer).href;
      attackerPages.set('/csrf.html', autoSubmit(action, { ...fields(form.fields), decision: 'approve' }));
      const mark = gateway.recording.writes.length;
      const before = callbacks.length;
      const posted = page.waitForResponse((r) => r.url() === action && r.request().method() === 'POST');
      await page.goto(`http://${host}:${attackerPort}/csrf.html`);
      const response = await posted;
      expect(response.status()).toBe(403);
      expect(response.headers().location).toBeUndefined();
      await page.waitForLoadState('load');
      expect(await page.locator('body').innerText()).toContain('Not allowed');
      expect(gateway.recording.writes.slice(mark)).toEqual([]);
      expect(callbacks.length).toBe(before);

      // The victim's own click still works: nothing was consumed.
      const again = await victimConsent(page);
      expect(again.fields.interaction).not.toBe(form.fields.interaction);
      await page.locator('button[value="approve"]').click();
      await page.locator('input[name="username"]').waitFor({ state: 'visible' });
    } finally {
      await context.close();
    }
  });
});

describeBrowser(`[G27] a real user approves and signs in; the client gets its code${why}`, () => {
  it('the page names the client, the redirect host, the scopes and the MCP server; Approve → dev login → code → tokens', async () => {
    const { context, page } = await newPage();
    try {
      callbacks = [];
      const verifier = newVerifier();
      await page.goto(authorizeUrl(verifier, 'real-user-state'));
      const text = await page.locator('main').innerText();
      expect(text).toContain('Allow Acme Assistant to use this MCP server?');
      expect(text).toContain(new URL(redirectUri).host);
      expect(text).toContain('mcp:read');
      expect(text).toContain('mcp:write');
      expect(text).toContain(`${gateway.issuer}/everything/mcp`);
      expect(text).toContain('its name is not verified');
      await page.screenshot({ path: SCREENSHOT, fullPage: true });

      await page.getByRole('button', { name: 'Approve' }).click();
      await page.locator('input[name="username"]').fill('real-user');
      await Promise.all([page.waitForURL((url) => url.href.startsWith(redirectUri)), page.getByRole('button', { name: 'Sign in' }).click()]);

      expect(callbacks).toHaveLength(1);
      const callback = callbacks[0]!;
      expect(callback.searchParams.get('state')).toBe('real-user-state');
      expect(callback.searchParams.get('iss')).toBe(gateway.issuer);
      const code = callback.searchParams.get('code')!;
      expect(code).toMatch(/^[A-Za-z0-9_-]{43,}$/);
      const token = await fetch(`${gateway.issuer}/token`, {
        method: 'POST',
        body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: redirectUri, client_id: clientId }),
      });
      expect(token.status).toBe(200);
      expect(((await token.json()) as { scope: string }).scope).toBe('mcp:read mcp:write');
    } finally {
      await context.close();
    }
  });
});

if (!available) {
  describe('browser checks', () => {
    it.skip(`SKIPPED: ${CHROMIUM} is missing — install Debian's chromium (apt-get install -y chromium) to run the consent page in a real browser`, () => undefined);
  });
}
