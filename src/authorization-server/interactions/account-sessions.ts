// A signed-in session of the connected-apps page: a random id in a
// `__Host-` cookie (Secure, HttpOnly, SameSite=Lax, Path=/), kept in the store
// only as its key's hash, bound to the browser cookie of browser-binding.ts
// (a session cookie copied into another browser is refused), and over after
// ACCOUNT_SESSION_TTL_MS from sign-in whatever happens (no sliding renewal).
// Its forms carry a CSRF token derived from the browser and the session.
import type { Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { accountSessionKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import { hashSecret, randomToken } from '../helpers/secrets.js';
import type { BrowserBinding } from './browser-binding.js';

const ACCOUNT_COOKIE = '__Host-mag-account';
/** Long enough to look through and revoke a few apps; a user signs in again after it. */
export const ACCOUNT_SESSION_TTL_MS = 15 * 60_000;

interface StoredSession {
  subject: string;
  /** sha256 of the browser cookie it was started in. */
  browser: string;
  createdAt: number;
}

export interface AccountSession {
  id: string;
  subject: string;
}

export class AccountSessions {
  constructor(
    private readonly store: Store,
    private readonly browser: BrowserBinding,
    private readonly ttlMs = ACCOUNT_SESSION_TTL_MS,
  ) {}

  async start(c: Context, subject: string, browserId: string): Promise<void> {
    const id = randomToken(32);
    const stored: StoredSession = { subject, browser: hashSecret(browserId), createdAt: Date.now() };
    await this.store.set(accountSessionKey(id), JSON.stringify(stored), this.ttlMs);
    setCookie(c, ACCOUNT_COOKIE, id, { path: '/', secure: true, httpOnly: true, sameSite: 'Lax', maxAge: Math.floor(this.ttlMs / 1000) });
  }

  /** The session of this request's cookie, when it is live and was started in this browser. */
  async current(c: Context, browserId: string | undefined): Promise<AccountSession | undefined> {
    const id = getCookie(c, ACCOUNT_COOKIE);
    if (!browserId || !id || !/^[A-Za-z0-9_-]{43}$/.test(id)) return undefined;
    const value = await this.store.get(accountSessionKey(id));
    if (value === undefined) return undefined;
    const stored = JSON.parse(value) as StoredSession;
    if (stored.browser !== hashSecret(browserId) || Date.now() - stored.createdAt > this.ttlMs) return undefined;
    return { id, subject: stored.subject };
  }

  async end(c: Context, session: AccountSession): Promise<void> {
    await this.store.delete(accountSessionKey(session.id));
    deleteCookie(c, ACCOUNT_COOKIE, { path: '/', secure: true });
  }

  /** The CSRF token of the session's forms: worthless in another browser or another session. */
  csrfToken(browserId: string, session: AccountSession): string {
    return this.browser.csrfToken(browserId, csrfScope(session));
  }

  checkCsrf(browserId: string | undefined, session: AccountSession, token: string | undefined): boolean {
    return this.browser.checkCsrf(browserId, csrfScope(session), token);
  }
}

/** Never an interaction id (those are 43 base64url characters), so no token of one form fits the other. */
const csrfScope = (session: AccountSession) => `account-session\0${session.id}`;
