// What this browser approved: a signed `__Host-` cookie listing entries bound
// to (browser, client, registered redirect URI, resource), each holding the
// approved scopes. A new client, a changed redirect URI, another resource or a
// wider scope set is not covered and asks again; a tampered cookie fails its
// signature and counts as empty. It only lets the login start without the
// consent page (the user is not known before the login, and no IdP is
// contacted for a request nobody here approved); the signed-in user's own
// consent (user-consents) decides whether a code is issued.
import type { Context } from 'hono';
import { getSignedCookie, setSignedCookie } from 'hono/cookie';
import { hashSecret } from '../helpers/secrets.js';
import type { AuthorizationRequest } from './interactions.js';

const CONSENT_COOKIE = '__Host-mag-consent';
const CONSENT_LIFETIME_MS = 30 * 24 * 3600_000;
const MAX_ENTRIES = 20;

interface ConsentEntry {
  /** hash of browser, client, redirect URI and resource */
  k: string;
  /** approved scopes */
  s: string[];
  /** approved at (ms) */
  t: number;
}

export class ConsentMemory {
  constructor(private readonly secret: Uint8Array) {}

  async covers(c: Context, browserId: string | undefined, request: AuthorizationRequest): Promise<boolean> {
    if (!browserId) return false;
    const key = entryKey(browserId, request);
    const entry = (await this.entries(c)).find((e) => e.k === key);
    return entry !== undefined && request.scopes.every((scope) => entry.s.includes(scope));
  }

  async remember(c: Context, browserId: string, request: AuthorizationRequest): Promise<void> {
    const key = entryKey(browserId, request);
    const kept = (await this.entries(c)).filter((e) => e.k !== key);
    const entries = [{ k: key, s: request.scopes, t: Date.now() }, ...kept].slice(0, MAX_ENTRIES);
    await setSignedCookie(c, CONSENT_COOKIE, Buffer.from(JSON.stringify(entries)).toString('base64url'), this.secret, {
      path: '/',
      secure: true,
      httpOnly: true,
      sameSite: 'Lax',
      maxAge: CONSENT_LIFETIME_MS / 1000,
    });
  }

  private async entries(c: Context): Promise<ConsentEntry[]> {
    const value = await getSignedCookie(c, this.secret, CONSENT_COOKIE);
    if (typeof value !== 'string') return [];
    try {
      const parsed: unknown = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
      if (!Array.isArray(parsed)) return [];
      const fresh = Date.now() - CONSENT_LIFETIME_MS;
      return parsed.filter(
        (e): e is ConsentEntry =>
          typeof e?.k === 'string' && Array.isArray(e.s) && e.s.every((s: unknown) => typeof s === 'string') && typeof e.t === 'number' && e.t > fresh,
      );
    } catch {
      return [];
    }
  }
}

function entryKey(browserId: string, request: AuthorizationRequest): string {
  return hashSecret(JSON.stringify([browserId, request.clientId, request.registeredRedirectUri, request.resource]));
}
