// The browser behind an interaction: a random id in a signed `__Host-` cookie
// (Secure, HttpOnly, SameSite=Lax, Path=/), CSRF tokens derived from it and
// the interaction (so a token from another browser or another interaction is
// worthless), and the Fetch-metadata / Origin check for form posts.
import { createHmac } from 'node:crypto';
import type { Context } from 'hono';
import { getSignedCookie, setSignedCookie } from 'hono/cookie';
import { constantTimeEqual, randomToken } from '../helpers/secrets.js';

const BROWSER_COOKIE = '__Host-mag-csrf';
const BROWSER_COOKIE_MAX_AGE_S = 30 * 24 * 3600;

export class BrowserBinding {
  constructor(private readonly secret: Uint8Array) {}

  /** The browser's id, or undefined when it has none or a tampered one. */
  async browserId(c: Context): Promise<string | undefined> {
    const value = await getSignedCookie(c, this.secret, BROWSER_COOKIE);
    return typeof value === 'string' && /^[A-Za-z0-9_-]{43}$/.test(value) ? value : undefined;
  }

  /** The browser's id, issuing a cookie to a browser that has none. */
  async ensureBrowserId(c: Context): Promise<string> {
    const existing = await this.browserId(c);
    if (existing) return existing;
    const id = randomToken(32);
    await setSignedCookie(c, BROWSER_COOKIE, id, this.secret, {
      path: '/',
      secure: true,
      httpOnly: true,
      sameSite: 'Lax',
      maxAge: BROWSER_COOKIE_MAX_AGE_S,
    });
    return id;
  }

  csrfToken(browserId: string, interactionId: string): string {
    return createHmac('sha256', this.secret).update(`csrf\0${browserId}\0${interactionId}`).digest('base64url');
  }

  checkCsrf(browserId: string | undefined, interactionId: string, token: string | undefined): boolean {
    if (!browserId || !token) return false;
    return constantTimeEqual(this.csrfToken(browserId, interactionId), token);
  }
}

/**
 * A form post from another site (Fetch metadata, then Origin). Requests
 * without either header (non-browser user agents) pass here and still need
 * the CSRF token.
 */
export function isCrossSitePost(c: Context, selfOrigin: string): boolean {
  const site = c.req.header('sec-fetch-site');
  // When the browser sends Fetch metadata it decides: under our pages' `Referrer-Policy: no-referrer`
  // browsers send `Origin: null` even for a same-origin form post.
  if (site !== undefined) return site !== 'same-origin' && site !== 'none';
  const origin = c.req.header('origin');
  return origin !== undefined && origin !== selfOrigin;
}
