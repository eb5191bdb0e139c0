// Which apps (clients) each user approved, with the grants they hold: the
// index the connected-apps page lists and revokes (`account.enabled`). One
// record per (issuer, user), written when an authorization completes; a
// separate plain key per (user, app) dates its last use (a sign-in or a
// refresh), so /token never reads and rewrites the record.
//
// Bounded per user: MAX_APPS apps and MAX_GRANTS_PER_APP live grants per app.
// What falls out of the record (the oldest grant of an app, the least
// recently approved app) is handed back to the caller to revoke, so every
// grant that still works is one the page shows and can revoke.
//
// Every change is one compare-and-set of the record (a Lua script on Redis):
// a change that lost to a concurrent sign-in or revoke of the same user is
// made again on what that one wrote, so no grant ever drops out of the index
// unrevoked (a lost write would leave a working grant the page cannot show).
import { appLastUsedKey, connectedAppsKey } from '../../store/key-names.js';
import { StoreUnavailableError, type Store } from '../../store/store.js';
import type { ClientKind } from '../clients/client-record.js';

export const MAX_APPS = 50;
export const MAX_GRANTS_PER_APP = 20;
/** Far beyond what one user's concurrent sign-ins need (each lost attempt means another's won); bounded so nothing spins. */
const WRITE_ATTEMPTS = 100;

/** One app a user approved: what the page shows, and the grants revoking it ends. */
export interface ConnectedApp {
  clientId: string;
  /** Self-asserted (or configured) name, as it was when approved: the page fetches nothing. */
  clientName?: string;
  clientKind: ClientKind;
  /** The registered redirect URI approved last (the page shows its host). */
  redirectUri: string;
  resource: string;
  scopes: string[];
  /** When the user last approved it (ms). */
  approvedAt: number;
  /** Live grant ids, newest first. */
  grants: string[];
}

/** A listed app with its last use (ms; undefined: never since it was approved). */
export type ListedApp = ConnectedApp & { lastUsedAt?: number };

export type Approval = Omit<ConnectedApp, 'grants' | 'approvedAt'>;

export class ConnectedApps {
  constructor(
    private readonly store: Store,
    private readonly issuer: string,
    /** The record lives as long as the longest grant it lists. */
    private readonly ttlMs: number,
  ) {}

  /** A completed authorization: the app (new or again) and its new grant. Returns the grant ids pushed out by the bounds. */
  async record(subject: string, approval: Approval, grantId: string): Promise<string[]> {
    let pushedOut: string[] = [];
    await this.update(subject, (apps) => {
      const previous = apps.find((a) => a.clientId === approval.clientId);
      const grants = [grantId, ...(previous?.grants ?? []).filter((g) => g !== grantId)];
      const app: ConnectedApp = { ...approval, approvedAt: Date.now(), grants: grants.slice(0, MAX_GRANTS_PER_APP) };
      // Newest approval first: the app dropped beyond MAX_APPS is the one approved longest ago.
      const all = [app, ...apps.filter((a) => a.clientId !== approval.clientId)];
      pushedOut = [...grants.slice(MAX_GRANTS_PER_APP), ...all.slice(MAX_APPS).flatMap((a) => a.grants)];
      return all.slice(0, MAX_APPS);
    });
    return pushedOut;
  }

  /** The user's apps, most recently approved first, with their last use. */
  async list(subject: string): Promise<ListedApp[]> {
    const apps = await this.read(subject);
    return Promise.all(
      apps.map(async (app) => {
        const used = Number(await this.store.get(appLastUsedKey(this.issuer, subject, app.clientId)));
        return Number.isFinite(used) && used > 0 ? { ...app, lastUsedAt: used } : app;
      }),
    );
  }

  /** The user's app of this client id, or undefined when the user has none (another user's client id included). */
  async find(subject: string, clientId: string): Promise<ConnectedApp | undefined> {
    return (await this.read(subject)).find((a) => a.clientId === clientId);
  }

  /**
   * Drops `grantIds` (revoked by the caller) from the user's app, and the app once it holds no
   * other: a grant added by a sign-in meanwhile stays listed, so it can still be revoked.
   */
  async removeGrants(subject: string, clientId: string, grantIds: readonly string[]): Promise<void> {
    const kept = await this.update(subject, (apps) =>
      apps.flatMap((a) => {
        if (a.clientId !== clientId) return [a];
        const grants = a.grants.filter((g) => !grantIds.includes(g));
        return grants.length > 0 ? [{ ...a, grants }] : [];
      }),
    );
    if (!kept.some((a) => a.clientId === clientId)) await this.store.delete(appLastUsedKey(this.issuer, subject, clientId));
  }

  /** Tokens were issued to the app for this user (code redeemed, refresh rotated): one write, no read. */
  async used(subject: string, clientId: string): Promise<void> {
    await this.store.set(appLastUsedKey(this.issuer, subject, clientId), String(Date.now()), this.ttlMs);
  }

  private async read(subject: string): Promise<ConnectedApp[]> {
    return parseApps(await this.store.get(connectedAppsKey(this.issuer, subject)));
  }

  /** `change` applied to the record as one compare-and-set, again on a newer record until none raced it; returns what was written. */
  private async update(subject: string, change: (apps: ConnectedApp[]) => ConnectedApp[]): Promise<ConnectedApp[]> {
    const key = connectedAppsKey(this.issuer, subject);
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const current = await this.store.get(key);
      const next = change(parseApps(current));
      if (await this.store.compareAndSet(key, current, next.length === 0 ? undefined : JSON.stringify(next), this.ttlMs)) return next;
    }
    throw new StoreUnavailableError(`connected apps: ${WRITE_ATTEMPTS} concurrent changes of one user's record in a row`);
  }
}

function parseApps(value: string | undefined): ConnectedApp[] {
  if (value === undefined) return [];
  try {
    const parsed: unknown = JSON.parse(value);
    return Array.isArray(parsed) ? parsed.filter(isConnectedApp) : [];
  } catch {
    return [];
  }
}

function isConnectedApp(value: unknown): value is ConnectedApp {
  const app = value as ConnectedApp;
  return (
    typeof app === 'object' && app !== null &&
    typeof app.clientId === 'string' && typeof app.redirectUri === 'string' && typeof app.resource === 'string' &&
    typeof app.approvedAt === 'number' && Array.isArray(app.scopes) && app.scopes.every((s) => typeof s === 'string') &&
    Array.isArray(app.grants) && app.grants.every((g) => typeof g === 'string')
  );
}
