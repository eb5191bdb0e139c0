/**
 * SECURITY-CASES group G (consent, the confused-deputy defence) without a browser: the consent
 * page's headers and content, CSRF and cross-site refusals (∅store), what a remembered consent
 * covers, the consent cookies' attributes and tamper resistance, and the post-consent login step
 * refusing stale, replayed or foreign forms. Rendering, framing and cross-site posts in a real
 * browser: browser-consent.test.ts. The third-party IdP's callback (G32, G33): as-idp-*.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/net.js';
import { parseForm, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { newVerifier, s256 } from '../helpers/oauth-requests.js';

let gateway: AsGateway;
let resource: string;

beforeAll(async () => {
  gateway = await startAsGateway({ upstream: 'http://127.0.0.1:9/mcp', options: { registrationRateLimit: { max: 1000, windowMs: 60_000 } } });
  resource = `${gateway.issuer}/everything/mcp`;
});
afterAll(async () => {
  await gateway?.stop();
});

/** A user agent with its own cookie jar (one per simulated browser). */
class Browser {
  readonly cookies = new Map<string, string>();
  readonly setCookieLines: string[] = [];

  async request(url: string | URL, init: { method?: string; body?: URLSearchParams; headers?: Record<string, string> } = {}) {
    const res = await fetch(url, {
      method: init.method ?? 'GET',
      body: init.body,
      redirect: 'manual',
      headers: { ...init.headers, cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ') },
    });
    for (const line of res.headers.getSetCookie()) {
      this.setCookieLines.push(line);
      const [pair = ''] = line.split(';');
      const eq = pair.indexOf('=');
      this.cookies.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    return { status: res.status, headers: res.headers, body: await res.text() };
  }
}

interface Client {
  id: string;
  redirectUris: string[];
}

async function register(name = 'consent tests', redirectUris?: string[]): Promise<Client> {
  const uris = redirectUris ?? [`http://127.0.0.1:${await freePort()}/callback`];
  const res = await fetch(`${gateway.issuer}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: name, redirect_uris: uris, token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] }),
  });
  expect(res.status).toBe(201);
  return { id: ((await res.json()) as { client_id: string }).client_id, redirectUris: uris };
}

function authorizeUrl(client: Client, over: Record<string, string> = {}): URL {
  const url = new URL(`${gateway.issuer}/authorize`);
  url.search = new URLSearchParams({
    response_type: 'code',
    client_id: client.id,
    redirect_uri: client.redirectUris[0]!,
    code_challenge: s256(newVerifier()),
    code_challenge_method: 'S256',
    state: 'st',
    resource,
    scope: 'mcp:read',
    ...over,
  }).toString();
  return url;
}

const isConsentPage = (body: string) => body.includes('name="decision"');
const isLoginPage = (body: string) => body.includes('name="username"');

/** Opens the consent page and returns its form. */
async function openConsent(browser: Browser, client: Client, over: Record<string, string> = {}) {
  const page = await browser.request(authorizeUrl(client, over));
  expect(page.status).toBe(200);
  expect(isConsentPage(page.body)).toBe(true);
  return { page, form: parseForm(page.body)! };
}

const post = (browser: Browser, action: string, fields: Record<string, string>, headers: Record<string, string> = {}) =>
  browser.request(new URL(action, gateway.issuer), { method: 'POST', body: new URLSearchParams(fields), headers });

/** Approves and signs in; returns the final redirect (with the code). */
async function approveAndLogin(browser: Browser, client: Client, over: Record<string, string> = {}) {
  const { form } = await openConsent(browser, client, over);
  const login = await post(browser, form.action, { ...form.fields, decision: 'approve' });
  expect(isLoginPage(login.body)).toBe(true);
  const loginForm = parseForm(login.body)!;
  const done = await post(browser, loginForm.action, { ...loginForm.fields, username: 'heidi' });
  expect(done.status).toBe(303);
  return new URL(done.headers.get('location')!);
}

describe('[G27] [G28] the consent page', () => {
  it('names the client, the redirect host, the scopes and the MCP server, and cannot be framed or cached', async () => {
    const client = await register('Acme Assistant', [`http://127.0.0.1:${await freePort()}/cb`]);
    const { page } = await openConsent(new Browser(), client, { scope: 'mcp:read mcp:write' });
    expect(page.body).toContain('Acme Assistant');
    expect(page.body).toContain(new URL(client.redirectUris[0]!).host);
    expect(page.body).toContain('mcp:read');
    expect(page.body).toContain('mcp:write');
    expect(page.body).toContain(resource);
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(page.headers.get('cache-control')).toBe('no-store');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.body).not.toMatch(/<script/i);
  });

  it('a new client gets the consent page even from a browser that approved another client', async () => {
    const browser = new Browser();
    const a = await register('Client A');
    await approveAndLogin(browser, a);
    // A again: remembered, straight to the login.
    expect(isLoginPage((await browser.request(authorizeUrl(a))).body)).toBe(true);
    const b = await register('Client B');
    const page = await browser.request(authorizeUrl(b));
    expect(isConsentPage(page.body)).toBe(true);
    expect(page.body).toContain('Client B');
  });
});

describe('[G28] no page of the authorization server can be framed', () => {
  const expectUnframeable = (res: { status: number; headers: Headers }, what: string) => {
    expect(res.headers.get('x-frame-options'), what).toBe('DENY');
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp, what).toContain("frame-ancestors 'none'");
    expect(csp, what).toMatch(/default-src 'none'/);
    expect(res.headers.get('cache-control'), what).toBe('no-store');
    expect(res.headers.get('content-type'), what).toMatch(/^text\/html/);
  };

  it('the consent page, the login page, and every error page', async () => {
    const browser = new Browser();
    const client = await register();
    const { page, form } = await openConsent(browser, client);
    expectUnframeable(page, 'consent page');
    const login = await post(browser, form.action, { ...form.fields, decision: 'approve' });
    expectUnframeable(login, 'login page');
    expectUnframeable(await browser.request(new URL('/authorize?client_id=nobody', gateway.issuer)), 'unknown client page');
    expectUnframeable(await browser.request(new URL('/authorize/consent', gateway.issuer)), 'consent by GET');
    expectUnframeable(await post(new Browser(), form.action, { ...form.fields, decision: 'approve' }), 'forged consent');
    expectUnframeable(await browser.request(new URL('/authorize/login/dev', gateway.issuer)), 'login by GET');
    expectUnframeable(await post(browser, '/authorize', { x: '1' }, { 'content-type': 'text/plain' }), 'authorize by a non-form POST');
  });
});

describe('[G29] approvals that do not count → 403, nothing stored', () => {
  type Form = { action: string; fields: Record<string, string> };
  async function expectForbidden(send: (browser: Browser, form: Form, other: Form) => Promise<{ status: number; headers: Headers }>) {
    const browser = new Browser();
    const { form } = await openConsent(browser, await register());
    // Another browser's own, valid consent form (for the "other session" case).
    const { form: other } = await openConsent(new Browser(), await register());
    const mark = gateway.recording.writes.length;
    const res = await send(browser, form, other);
    expect(res.status).toBe(403);
    expect(res.headers.get('location')).toBeNull();
    expect(gateway.recording.writes.slice(mark)).toEqual([]);
    // And the honest approval still works afterwards (nothing was consumed).
    const ok = await post(browser, form.action, { ...form.fields, decision: 'approve' });
    expect(ok.status).toBe(200);
    expect(isLoginPage(ok.body)).toBe(true);
  }

  it('without the CSRF token', () => expectForbidden((b, f) => post(b, f.action, { interaction: f.fields.interaction!, decision: 'approve' })));
  it('with an empty CSRF token', () => expectForbidden((b, f) => post(b, f.action, { ...f.fields, csrf: '', decision: 'approve' })));
  it('with a forged CSRF token', () => expectForbidden((b, f) => post(b, f.action, { ...f.fields, csrf: randomBytes(32).toString('base64url'), decision: 'approve' })));
  it("with another browser's token (and that browser's cookie for its own form)", () =>
    // The victim's interaction with the attacker's valid token for the attacker's own session.
    expectForbidden((b, f, other) => post(b, f.action, { ...f.fields, csrf: other.fields.csrf!, decision: 'approve' })));
  it('without the browser cookie', () => expectForbidden((_b, f) => post(new Browser(), f.action, { ...f.fields, decision: 'approve' })));
  it('by GET', () =>
    expectForbidden((b, f) => {
      const url = new URL(f.action, gateway.issuer);
      url.search = new URLSearchParams({ ...f.fields, decision: 'approve' }).toString();
      return b.request(url);
    }));
  it.each([
    ['Sec-Fetch-Site: cross-site', { 'sec-fetch-site': 'cross-site' }],
    ['Sec-Fetch-Site: same-site', { 'sec-fetch-site': 'same-site' }],
    ['Origin: another site', { origin: 'https://evil.example' }],
    ['Origin: null', { origin: 'null' }],
  ])('cross-site (%s)', (_name, headers) => expectForbidden((b, f) => post(b, f.action, { ...f.fields, decision: 'approve' }, headers)));

  it.each([
    ['Origin: the gateway on another port', () => ({ origin: gateway.issuer.replace(/:(\d+)$/, (_m, p: string) => `:${Number(p) + 1}`) })],
    ['Origin: the gateway over https', () => ({ origin: gateway.issuer.replace('http:', 'https:') })],
    ['Origin: the gateway with a trailing slash', () => ({ origin: `${gateway.issuer}/` })],
    ['Origin: the gateway as localhost', () => ({ origin: gateway.issuer.replace('127.0.0.1', 'localhost') })],
    ['Origin: a suffix lookalike', () => ({ origin: `${gateway.issuer}.evil.example` })],
    ['Sec-Fetch-Site: cross-site with a same-origin Origin', () => ({ 'sec-fetch-site': 'cross-site', origin: gateway.issuer })],
  ])('cross-origin (%s)', (_name, headers) => expectForbidden((b, f) => post(b, f.action, { ...f.fields, decision: 'approve' }, headers())));

  it("with this browser's CSRF token for another of its interactions", async () => {
    const browser = new Browser();
    const { form: first } = await openConsent(browser, await register());
    const { form: second } = await openConsent(browser, await register());
    const mark = gateway.recording.writes.length;
    const res = await post(browser, first.action, { ...first.fields, csrf: second.fields.csrf!, decision: 'approve' });
    expect(res.status).toBe(403);
    expect(gateway.recording.writes.slice(mark)).toEqual([]);
    expect(isLoginPage((await post(browser, first.action, { ...first.fields, decision: 'approve' })).body)).toBe(true);
  });

  it('with the CSRF token in another case', () =>
    expectForbidden((b, f) => post(b, f.action, { ...f.fields, csrf: f.fields.csrf!.replace(/[A-Za-z]/g, (ch) => (ch === ch.toUpperCase() ? ch.toLowerCase() : ch.toUpperCase())), decision: 'approve' })));

  it('with two CSRF tokens, the right one second', () =>
    expectForbidden((b, f) => {
      const body = new URLSearchParams({ interaction: f.fields.interaction!, csrf: 'forged' });
      body.append('csrf', f.fields.csrf!);
      body.append('decision', 'approve');
      return b.request(new URL(f.action, gateway.issuer), { method: 'POST', body });
    }));

  it('a decision other than approve or deny approves nothing (400), and the form still works', async () => {
    const browser = new Browser();
    const { form } = await openConsent(browser, await register());
    for (const decision of ['APPROVE', 'approve ', 'yes', '']) {
      const mark = gateway.recording.writes.length;
      const res = await post(browser, form.action, { ...form.fields, decision });
      expect(res.status).toBe(400);
      expect(isLoginPage(res.body)).toBe(false);
      expect(gateway.recording.writes.slice(mark)).toEqual([]);
    }
    expect(isLoginPage((await post(browser, form.action, { ...form.fields, decision: 'approve' })).body)).toBe(true);
  });

  it('a same-origin browser post passes', async () => {
    const browser = new Browser();
    const { form } = await openConsent(browser, await register());
    const res = await post(browser, form.action, { ...form.fields, decision: 'approve' }, { origin: gateway.issuer, 'sec-fetch-site': 'same-origin' });
    expect(res.status).toBe(200);
    expect(isLoginPage(res.body)).toBe(true);
  });

  it('a same-origin browser post with Origin: null passes (browsers send it under Referrer-Policy: no-referrer)', async () => {
    const browser = new Browser();
    const { form } = await openConsent(browser, await register());
    const res = await post(browser, form.action, { ...form.fields, decision: 'approve' }, { origin: 'null', 'sec-fetch-site': 'same-origin' });
    expect(res.status).toBe(200);
    expect(isLoginPage(res.body)).toBe(true);
  });

  it('an answered consent cannot be answered again', async () => {
    const browser = new Browser();
    const { form } = await openConsent(browser, await register());
    expect((await post(browser, form.action, { ...form.fields, decision: 'approve' })).status).toBe(200);
    const again = await post(browser, form.action, { ...form.fields, decision: 'approve' });
    expect(again.status).toBe(400);
    expect(isLoginPage(again.body)).toBe(false);
  });
});

describe('[G30] what a remembered consent covers', () => {
  it('not another client, not wider scopes, not another redirect URI, not another resource', async () => {
    const port = await freePort();
    const client = await register('Scoped', [`http://127.0.0.1:${port}/one`, `http://127.0.0.1:${port}/two`]);
    const browser = new Browser();
    await approveAndLogin(browser, client, { scope: 'mcp:read' });

    const covered = await browser.request(authorizeUrl(client, { scope: 'mcp:read' }));
    expect(isLoginPage(covered.body)).toBe(true);
    // Loopback: another port is the same registered URI, so the same consent.
    const otherPort = await browser.request(authorizeUrl(client, { scope: 'mcp:read', redirect_uri: `http://127.0.0.1:${port + 1}/one` }));
    expect(isLoginPage(otherPort.body)).toBe(true);

    const wider = await browser.request(authorizeUrl(client, { scope: 'mcp:read mcp:write' }));
    expect(isConsentPage(wider.body)).toBe(true);
    const otherRedirect = await browser.request(authorizeUrl(client, { scope: 'mcp:read', redirect_uri: client.redirectUris[1]! }));
    expect(isConsentPage(otherRedirect.body)).toBe(true);
    const otherClient = await register('Other', client.redirectUris);
    expect(isConsentPage((await browser.request(authorizeUrl(otherClient, { scope: 'mcp:read' }))).body)).toBe(true);
    const narrower = await browser.request(authorizeUrl(client, { scope: 'mcp:read' }));
    expect(isLoginPage(narrower.body)).toBe(true);
  });

  it('prompt=consent asks again even when covered', async () => {
    const client = await register();
    const browser = new Browser();
    await approveAndLogin(browser, client);
    expect(isLoginPage((await browser.request(authorizeUrl(client))).body)).toBe(true);
    expect(isConsentPage((await browser.request(authorizeUrl(client, { prompt: 'consent' }))).body)).toBe(true);
  });

  it('a consent given in one browser does not cover another browser, even with the cookie copied', async () => {
    const client = await register();
    const first = new Browser();
    await approveAndLogin(first, client);
    const second = new Browser();
    second.cookies.set('__Host-mag-consent', first.cookies.get('__Host-mag-consent')!);
    expect(isConsentPage((await second.request(authorizeUrl(client))).body)).toBe(true);
  });
});

describe('[G31] consent cookies', () => {
  it('are __Host- cookies: Secure, HttpOnly, SameSite=Lax, Path=/, no Domain', async () => {
    const browser = new Browser();
    await approveAndLogin(browser, await register());
    const lines = browser.setCookieLines.filter((l) => l.startsWith('__Host-'));
    expect(lines.map((l) => l.split('=')[0]).sort()).toEqual(['__Host-mag-consent', '__Host-mag-csrf']);
    for (const line of lines) {
      const attributes = line.split(';').slice(1).map((a) => a.trim().toLowerCase());
      expect(attributes).toContain('secure');
      expect(attributes).toContain('httponly');
      expect(attributes).toContain('samesite=lax');
      expect(attributes).toContain('path=/');
      expect(attributes.some((a) => a.startsWith('domain='))).toBe(false);
    }
  });

  it('a tampered consent cookie is ignored (consent is asked again)', async () => {
    const client = await register();
    const browser = new Browser();
    await approveAndLogin(browser, client);
    const value = decodeURIComponent(browser.cookies.get('__Host-mag-consent')!);
    const dot = value.lastIndexOf('.');
    const payload = JSON.parse(Buffer.from(value.slice(0, dot), 'base64url').toString()) as Array<{ s: string[] }>;
    payload[0]!.s.push('mcp:admin');
    const forged = `${Buffer.from(JSON.stringify(payload)).toString('base64url')}${value.slice(dot)}`;
    browser.cookies.set('__Host-mag-consent', encodeURIComponent(forged));
    expect(isConsentPage((await browser.request(authorizeUrl(client, { scope: 'mcp:admin' }))).body)).toBe(true);
    expect(isConsentPage((await browser.request(authorizeUrl(client))).body)).toBe(true);
  });

  it.each([
    ['its signature truncated', (v: string) => v.slice(0, -4)],
    ['its signature removed', (v: string) => v.slice(0, v.lastIndexOf('.'))],
    ['the browser cookie put in its place', (_v: string, csrf: string) => csrf],
    ['an empty value', () => ''],
  ])('a consent cookie with %s is ignored', async (_name, tamper) => {
    const client = await register();
    const browser = new Browser();
    await approveAndLogin(browser, client);
    const consent = decodeURIComponent(browser.cookies.get('__Host-mag-consent')!);
    browser.cookies.set('__Host-mag-consent', encodeURIComponent(tamper(consent, decodeURIComponent(browser.cookies.get('__Host-mag-csrf')!))));
    expect(isConsentPage((await browser.request(authorizeUrl(client))).body)).toBe(true);
  });

  it('the same consent value under a cookie name without the __Host- prefix is ignored', async () => {
    const client = await register();
    const first = new Browser();
    await approveAndLogin(first, client);
    const second = new Browser();
    second.cookies.set('__Host-mag-csrf', first.cookies.get('__Host-mag-csrf')!);
    second.cookies.set('mag-consent', first.cookies.get('__Host-mag-consent')!);
    expect(isConsentPage((await second.request(authorizeUrl(client))).body)).toBe(true);
  });

  it('a tampered browser cookie gets a fresh one, and the old forms stop working', async () => {
    const browser = new Browser();
    const { form } = await openConsent(browser, await register());
    const original = browser.cookies.get('__Host-mag-csrf')!;
    browser.cookies.set('__Host-mag-csrf', `x${original.slice(1)}`);
    const res = await post(browser, form.action, { ...form.fields, decision: 'approve' });
    expect(res.status).toBe(403);
  });
});

describe('[G32] (dev login) the step after consent refuses stale, replayed or foreign forms; no code reaches the client', () => {
  async function loginForm() {
    const browser = new Browser();
    const { form } = await openConsent(browser, await register());
    const login = await post(browser, form.action, { ...form.fields, decision: 'approve' });
    return { browser, form: parseForm(login.body)! };
  }

  it.each([
    ['a missing interaction', (f: Record<string, string>) => ({ ...f, interaction: '' }), 403],
    ['an unknown interaction', (f: Record<string, string>) => ({ ...f, interaction: randomBytes(32).toString('base64url') }), 403],
    ['a missing CSRF token', (f: Record<string, string>) => ({ interaction: f.interaction!, username: 'x' }), 403],
  ])('%s → %i', async (_name, change, status) => {
    const { browser, form } = await loginForm();
    const mark = gateway.recording.writes.length;
    const res = await post(browser, form.action, change({ ...form.fields, username: 'mallory' }));
    expect(res.status).toBe(status);
    expect(res.headers.get('location')).toBeNull();
    expect(gateway.recording.namespacesSince(mark)).not.toContain('code');
  });

  it('another browser (no binding cookie) → 403', async () => {
    const { form } = await loginForm();
    const res = await post(new Browser(), form.action, { ...form.fields, username: 'mallory' });
    expect(res.status).toBe(403);
  });

  it('cross-site → 403', async () => {
    const { browser, form } = await loginForm();
    const res = await post(browser, form.action, { ...form.fields, username: 'mallory' }, { 'sec-fetch-site': 'cross-site' });
    expect(res.status).toBe(403);
  });

  it('a replayed login form → 400, one code only', async () => {
    const { browser, form } = await loginForm();
    const first = await post(browser, form.action, { ...form.fields, username: 'ivan' });
    expect(first.status).toBe(303);
    const mark = gateway.recording.writes.length;
    const second = await post(browser, form.action, { ...form.fields, username: 'ivan' });
    expect(second.status).toBe(400);
    expect(second.headers.get('location')).toBeNull();
    expect(gateway.recording.namespacesSince(mark)).not.toContain('code');
  });

  it('the consent form cannot be posted to the login step (stage mismatch)', async () => {
    const browser = new Browser();
    const { form } = await openConsent(browser, await register());
    const res = await post(browser, '/authorize/login/dev', { ...form.fields, username: 'mallory' });
    expect(res.status).toBe(400);
  });
});
