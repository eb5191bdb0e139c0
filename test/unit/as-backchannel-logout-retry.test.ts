// The back-channel logout receiver (src/authorization-server/login/backchannel-logout.ts)
// when the store fails partway: the logout token's jti is recorded only after every
// grant of the IdP session is revoked, so the IdP's retry of the same token finishes
// the job instead of being refused as a replay. Real Grants, RevokedGrants, IdpSessions
// and MemoryStore; only the token's signature check is stubbed (j-idp-session covers it).
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { Grants } from '../../src/authorization-server/tokens/grants.js';
import { backchannelLogoutRoutes } from '../../src/authorization-server/login/backchannel-logout.js';
import { IdpSessions } from '../../src/authorization-server/login/idp-sessions.js';
import type { LogoutClaims, OidcClient } from '../../src/authorization-server/idp/oidc-client.js';
import { RevokedGrants } from '../../src/authorization-server/tokens/revoked-grants.js';
import { createAudit } from '../../src/observability/audit.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { StoreUnavailableError, type AdmitRequest, type LogEntry, type Store } from '../../src/store/store.js';

const IDP = 'https://idp.example';
const TTL_MS = 3_600_000;
const quiet = () => createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));

/** A memory store whose `failAt`-th call (counting every call from 1) fails as an unreachable Redis would; the others pass. */
class FailingOnceStore implements Store {
  readonly kind = 'memory' as const;
  calls = 0;
  constructor(
    readonly inner: MemoryStore,
    private readonly failAt: number,
  ) {}
  #call<T>(run: () => Promise<T>): Promise<T> {
    this.calls++;
    return this.calls === this.failAt ? Promise.reject(new StoreUnavailableError('injected: store down')) : run();
  }
  get = (key: string) => this.#call(() => this.inner.get(key));
  set = (key: string, value: string, ttlMs: number) => this.#call(() => this.inner.set(key, value, ttlMs));
  setIfAbsent = (key: string, value: string, ttlMs: number) => this.#call(() => this.inner.setIfAbsent(key, value, ttlMs));
  compareAndSet = (key: string, expected: string | undefined, next: string | undefined, ttlMs: number) => this.#call(() => this.inner.compareAndSet(key, expected, next, ttlMs));
  take = (key: string) => this.#call(() => this.inner.take(key));
  increment = (key: string, ttlMs: number) => this.#call(() => this.inner.increment(key, ttlMs));
  admit = (key: string, request: AdmitRequest) => this.#call(() => this.inner.admit(key, request));
  appendToLog = (key: string, member: string, retentionMs: number) => this.#call(() => this.inner.appendToLog(key, member, retentionMs));
  readLog = (key: string, sinceMs: number): Promise<LogEntry[]> => this.#call(() => this.inner.readLog(key, sinceMs));
  delete = (key: string) => this.#call(() => this.inner.delete(key));
  ping = () => this.#call(() => this.inner.ping());
  close = () => this.inner.close();
}

/** A receiver whose IdP session `sid-1` stands behind `grantCount` grants, on a store that fails at its `failAt`-th call after set-up. */
async function receiver(grantCount: number, failAt: number) {
  const inner = new MemoryStore({ maxEntries: 1000 });
  const sessions = new IdpSessions(inner, TTL_MS);
  const grantIds = Array.from({ length: grantCount }, (_, i) => `grant-${i}`);
  for (const grantId of grantIds) await sessions.bind(grantId, IDP, 'alice', 'sid-1');

  const store = new FailingOnceStore(inner, failAt);
  const revokedGrants = new RevokedGrants({ store, issuer: 'https://as.example', accessTokenTtlMs: 600_000, logger: quiet(), metrics: new Metrics({ defaultMetrics: false }) });
  const grants = new Grants(store, TTL_MS, revokedGrants);
  const claims: LogoutClaims = { issuer: IDP, sid: 'sid-1', jti: 'jti-1' };
  const client = { verifyLogoutToken: async () => claims } as unknown as OidcClient;
  const app = backchannelLogoutRoutes('/logout', { client, sessions: new IdpSessions(store, TTL_MS), grants, store, audit: createAudit('none'), logger: quiet() });

  const deliver = async () => {
    const res = await app.request('/logout', { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'logout_token=signed-by-the-idp' });
    return { status: res.status, body: res.status === 200 ? undefined : ((await res.json()) as { error: string; error_description: string }) };
  };
  /** Read past the failing store: the grants whose revocation is not recorded. */
  const stillLive = async () => {
    const reader = new Grants(inner, TTL_MS, revokedGrants);
    const live: string[] = [];
    for (const grantId of grantIds) if (!(await reader.isRevoked(grantId))) live.push(grantId);
    return live;
  };
  return { store, deliver, stillLive };
}

const GRANTS = 3;
/** How many store calls one delivery that ends GRANTS grants makes. */
const CALLS_OF_ONE_DELIVERY = await (async () => {
  const { store, deliver } = await receiver(GRANTS, Number.POSITIVE_INFINITY);
  await deliver();
  return store.calls;
})();

describe('back-channel logout: a store failing partway', () => {
  it('a store that never fails: every grant revoked (200), the same token again is a replay (400)', async () => {
    const { store, deliver, stillLive } = await receiver(GRANTS, Number.POSITIVE_INFINITY);
    expect((await deliver()).status).toBe(200);
    expect(await stillLive()).toEqual([]);
    expect(store.calls).toBe(CALLS_OF_ONE_DELIVERY);
    expect(CALLS_OF_ONE_DELIVERY).toBeGreaterThan(GRANTS * 2);
    expect(await deliver()).toEqual({ status: 400, body: { error: 'invalid_request', error_description: 'The logout token was already used' } });
  });

  // Every call a successful delivery makes, failed in turn: the first delivery either fails with 503
  // (the IdP retries) or finishes; the retry is never refused as a replay while a grant is still live.
  it.each(Array.from({ length: CALLS_OF_ONE_DELIVERY }, (_, i) => i + 1))('the store fails once, at call %i of the delivery: the IdP\'s retry ends every grant, and only then is the token spent', async (failAt) => {
    const { store, deliver, stillLive } = await receiver(GRANTS, failAt);
    const first = await deliver();
    expect(store.calls).toBeGreaterThanOrEqual(failAt);
    expect([200, 503]).toContain(first.status);
    if (first.status === 503) {
      expect(first.body).toEqual({ error: 'temporarily_unavailable', error_description: 'The logout cannot be recorded now; try again' });
      expect((await deliver()).status).toBe(200);
    }
    expect(await stillLive()).toEqual([]);
    expect((await deliver()).status).toBe(400);
  });
});
