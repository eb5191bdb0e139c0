/**
 * One authorization through the gateway's AS and a third-party IdP, walked by a cookie browser:
 * the client's /authorize, the gateway's consent page (approved), the IdP (headless: it redirects
 * straight back), the gateway's callback, and then either the redirect to the client (its code or
 * error) or a page the walk stops at (an error page). Every hop is kept in `browser`.
 */
import { expect } from 'vitest';
import { parseForm } from './authorization-server.js';
import { CookieBrowser, type Seen } from './cookie-browser.js';
import { codeRequestUrl, newVerifier, type PublicClient } from './oauth-requests.js';

export interface WalkedSignIn {
  browser: CookieBrowser;
  verifier: string;
  /** The redirect to the client's redirect URI, when the walk reached it. */
  back?: URL;
  /** The page the walk stopped at, when it did not. */
  page?: Seen;
}

/** `rewrite` may change a hop before it is requested (e.g. the `state` on the way back from the IdP). */
export async function walkSignIn(origin: string, client: PublicClient, resource: string, opts: { scope?: string; rewrite?: (url: URL) => URL } = {}): Promise<WalkedSignIn> {
  const browser = new CookieBrowser();
  const verifier = newVerifier();
  const target = new URL(client.redirectUri);
  let next: { url: URL; body?: URLSearchParams } = { url: codeRequestUrl(origin, { client, verifier, state: 'client-state', resource, scope: opts.scope ?? 'mcp:read' }) };
  for (let step = 0; step < 20; step++) {
    const seen = await browser.request(next.url, next.body ? { method: 'POST', body: next.body } : {});
    if (seen.status >= 300 && seen.status < 400 && seen.location) {
      const url = new URL(seen.location, seen.url);
      if (url.origin === target.origin && url.pathname === target.pathname) return { browser, verifier, back: url };
      next = { url: opts.rewrite ? opts.rewrite(url) : url };
      continue;
    }
    const form = seen.status === 200 ? parseForm(seen.body) : undefined;
    // The consent form (its decision is a button); a third-party login shows no login form of the gateway's.
    if (!form || 'username' in form.fields) return { browser, verifier, page: seen };
    next = { url: new URL(form.action, seen.url), body: new URLSearchParams({ ...form.fields, decision: 'approve' }) };
  }
  throw new Error('the sign-in did not end within 20 steps');
}

/** Redeems the code of a walk that reached the client; the token response. */
export async function redeemCode(origin: string, client: PublicClient, walked: WalkedSignIn): Promise<{ access_token: string; refresh_token?: string }> {
  const code = walked.back?.searchParams.get('code');
  expect(code, walked.back?.href ?? walked.page?.body.slice(0, 500)).toBeTruthy();
  const res = await fetch(`${origin}/token`, {
    method: 'POST',
    body: new URLSearchParams({ grant_type: 'authorization_code', code: code!, code_verifier: walked.verifier, redirect_uri: client.redirectUri, client_id: client.id }),
  });
  expect(res.status).toBe(200);
  return (await res.json()) as { access_token: string; refresh_token?: string };
}
