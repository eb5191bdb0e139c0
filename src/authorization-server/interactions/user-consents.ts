// Consent remembered per user: which (client, registered redirect URI,
// resource) a user approved, and for which scopes. Read after the login, so a
// consent one user gave never covers another user of the same browser.
import { consentKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';
import type { AuthorizationRequest } from './interactions.js';

const USER_CONSENT_TTL_MS = 30 * 24 * 3600_000;
/** Per (user, client): a client with many redirect URIs or resources cannot grow one record without bound. */
const MAX_ENTRIES = 20;

interface UserConsentEntry {
  redirectUri: string;
  resource: string;
  scopes: string[];
  /** approved at (ms) */
  at: number;
}

export class UserConsents {
  constructor(
    private readonly store: Store,
    private readonly issuer: string,
  ) {}

  async covers(subject: string, request: AuthorizationRequest): Promise<boolean> {
    const entry = (await this.entries(subject, request.clientId)).find((e) => sameTarget(e, request));
    return entry !== undefined && request.scopes.every((scope) => entry.scopes.includes(scope));
  }

  async remember(subject: string, request: AuthorizationRequest): Promise<void> {
    const kept = (await this.entries(subject, request.clientId)).filter((e) => !sameTarget(e, request));
    const entry: UserConsentEntry = { redirectUri: request.registeredRedirectUri, resource: request.resource, scopes: request.scopes, at: Date.now() };
    await this.store.set(consentKey(this.issuer, subject, request.clientId), JSON.stringify([entry, ...kept].slice(0, MAX_ENTRIES)), USER_CONSENT_TTL_MS);
  }

  /** Every approval the user gave the client (the connected-apps page revoking it): the next authorization asks again. */
  async forget(subject: string, clientId: string): Promise<void> {
    await this.store.delete(consentKey(this.issuer, subject, clientId));
  }

  private async entries(subject: string, clientId: string): Promise<UserConsentEntry[]> {
    const value = await this.store.get(consentKey(this.issuer, subject, clientId));
    if (value === undefined) return [];
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      return [];
    }
    // Records written before this list existed held one entry.
    const list: unknown[] = Array.isArray(parsed) ? parsed : [parsed];
    const fresh = Date.now() - USER_CONSENT_TTL_MS;
    return list.filter(
      (e): e is UserConsentEntry =>
        typeof e === 'object' && e !== null &&
        typeof (e as UserConsentEntry).redirectUri === 'string' && typeof (e as UserConsentEntry).resource === 'string' &&
        Array.isArray((e as UserConsentEntry).scopes) && (e as UserConsentEntry).scopes.every((s) => typeof s === 'string') &&
        typeof (e as UserConsentEntry).at === 'number' && (e as UserConsentEntry).at > fresh,
    );
  }
}

const sameTarget = (entry: UserConsentEntry, request: AuthorizationRequest) => entry.redirectUri === request.registeredRedirectUri && entry.resource === request.resource;
