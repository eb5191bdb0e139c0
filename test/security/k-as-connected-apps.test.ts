/**
 * [K71] (issue 20 item 9) "Revoke access" on the connected-apps page ends every grant of the app,
 * whatever sign-ins of the same user ran at the same time: the per-user index is changed only by
 * compare-and-set (one Lua script on Redis), so no concurrent writer's grant drops out of it.
 * Real Grants, RevokedGrants and ConnectedApps on a real redis-server and on the memory store:
 * 15 (and 60) concurrent sign-ins of one user to one app, then the page's revoke steps, and every
 * refresh token ends; sign-ins racing the revoke stay listed (so the page can revoke them too);
 * a fast-check property drives every interleaving of the store calls of sign-ins and revokes
 * (fc.scheduler) and checks that no grant is ever working and unlisted; and the review's own
 * scenario through a real gateway on redis-server: 15 concurrent sign-ins of one user to one app,
 * then "Revoke access" on the page, and all 15 refresh tokens are invalid_grant.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConnectedApps, type Approval } from '../../src/authorization-server/tokens/connected-apps.js';
import { Grants } from '../../src/authorization-server/tokens/grants.js';
import { RevokedGrants } from '../../src/authorization-server/tokens/revoked-grants.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { Store } from '../../src/store/store.js';
import { describeOnEachStore } from '../helpers/store-backends.js';
import { headlessUser, parseForm } from '../helpers/authorization-server.js';
import { CookieBrowser, type Seen } from '../helpers/cookie-browser.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { devAuthorizationServer, originYaml } from '../helpers/gateway-config.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { codeRequestUrl, newVerifier, registerPublicClient, type PublicClient } from '../helpers/oauth-requests.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/security-fixtures.js';

const TTL_MS = 3_600_000;
const quiet = () => createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));
const approval = (clientId: string): Approval => ({ clientId, clientName: clientId, clientKind: 'dynamic', redirectUri: 'http://127.0.0.1:9/cb', resource: 'https://gw.example/mcp', scopes: ['mcp:read'] });

/** The AS's parts that "Revoke access" touches, on one store and issuer. */
async function authorizationServer(store: Store) {
  const issuer = `https://as-${randomUUID()}.example`;
  const revokedGrants = new RevokedGrants({ store, issuer, accessTokenTtlMs: 600_000, logger: quiet(), metrics: new Metrics({ defaultMetrics: false }) });
  await revokedGrants.start();
  revokedGrants.close();
  const grants = new Grants(store, TTL_MS, revokedGrants);
  const apps = new ConnectedApps(store, issuer, TTL_MS);

  /** A completed sign-in as complete-authorization.ts makes it: indexed first, then the grant's refresh token (the code redeemed). */
  async function signIn(subject: string, clientId: string): Promise<{ grantId: string; refreshToken: string }> {
    const grantId = randomUUID();
    const pushedOut = await apps.record(subject, approval(clientId), grantId);
    for (const old of pushedOut) await grants.revoke(old, 'superseded', { subject });
    const refreshToken = await grants.startFamily({ grantId, clientId, subject, scopes: ['mcp:read'], resource: 'https://gw.example/mcp' });
    return { grantId, refreshToken };
  }

  /** The page's "Revoke access" (endpoints/account-apps.ts): the grants it finds revoked, then dropped from the index. */
  async function revokeAccess(subject: string, clientId: string): Promise<void> {
    const found = await apps.find(subject, clientId);
    if (!found) return;
    for (const grantId of found.grants) await grants.revoke(grantId, 'revoked_by_user', { subject, clientId });
    await apps.removeGrants(subject, clientId, found.grants);
  }

  /** Whether the refresh token still refreshes (a rotation), without ending it when it does not. */
  async function works(refreshToken: string, clientId: string): Promise<boolean> {
    return grants.rotate(refreshToken, clientId).then(
      () => true,
      () => false,
    );
  }

  return { grants, apps, signIn, revokeAccess, works };
}

describeOnEachStore('[K71] "Revoke access" after concurrent sign-ins', (store) => {
  it.each([15, 60])('[K71] %i concurrent sign-ins of one user to one app are all listed, and "Revoke access" ends every one', async (count) => {
    const as = await authorizationServer(store());
    const signedIn = await Promise.all(Array.from({ length: count }, () => as.signIn('alice', 'app-1')));
    const listed = (await as.apps.find('alice', 'app-1'))!.grants;
    // Bounded per app: the newest are listed, every other one was revoked when it fell out.
    for (const { grantId } of signedIn) expect(listed.includes(grantId) || (await as.grants.isRevoked(grantId))).toBe(true);
    await as.revokeAccess('alice', 'app-1');
    for (const { refreshToken } of signedIn) expect(await as.works(refreshToken, 'app-1')).toBe(false);
    expect(await as.apps.find('alice', 'app-1')).toBeUndefined();
  });

  it('[K71] sign-ins racing "Revoke access" are each revoked or still listed, so a second revoke ends all; other apps and users untouched', async () => {
    const as = await authorizationServer(store());
    const before = await Promise.all(Array.from({ length: 5 }, () => as.signIn('alice', 'app-1')));
    const bob = await as.signIn('bob', 'app-1');
    const otherApp = await as.signIn('alice', 'app-2');
    const [racing] = await Promise.all([Promise.all(Array.from({ length: 15 }, () => as.signIn('alice', 'app-1'))), as.revokeAccess('alice', 'app-1')]);
    const listed = (await as.apps.find('alice', 'app-1'))?.grants ?? [];
    for (const { grantId } of [...before, ...racing]) expect(listed.includes(grantId) || (await as.grants.isRevoked(grantId))).toBe(true);
    await as.revokeAccess('alice', 'app-1');
    for (const { refreshToken } of [...before, ...racing]) expect(await as.works(refreshToken, 'app-1')).toBe(false);
    expect(await as.works(bob.refreshToken, 'app-1')).toBe(true);
    expect(await as.works(otherApp.refreshToken, 'app-2')).toBe(true);
  });
});

describe('[K71] any interleaving of sign-ins and revokes (fc.scheduler over the store calls)', () => {
  /** The store with every get and compareAndSet resolved in an order fast-check chooses. */
  function scheduled(s: fc.Scheduler, inner: Store): Store {
    const overrides: Partial<Store> = {
      get: s.scheduleFunction((key: string) => inner.get(key)),
      compareAndSet: s.scheduleFunction((key: string, expected: string | undefined, next: string | undefined, ttl: number) => inner.compareAndSet(key, expected, next, ttl)),
    };
    return new Proxy(inner, {
      get: (target, name: keyof Store) => overrides[name] ?? (typeof target[name] === 'function' ? (target[name] as (...a: unknown[]) => unknown).bind(target) : target[name]),
    });
  }

  it('[K71] no grant is ever working and unlisted: after the run, every grant is listed under its app or revoked', async () => {
    const step = fc.oneof({ weight: 4, arbitrary: fc.record({ op: fc.constant('sign-in' as const), app: fc.constantFrom('app-1', 'app-2') }) }, { weight: 1, arbitrary: fc.record({ op: fc.constant('revoke' as const), app: fc.constantFrom('app-1', 'app-2') }) });
    await fc.assert(
      fc.asyncProperty(fc.scheduler(), fc.array(step, { minLength: 2, maxLength: 12 }), async (s, steps) => {
        const as = await authorizationServer(scheduled(s, new MemoryStore({ maxEntries: 10_000 })));
        const signedIn: Array<{ app: string; grantId: string }> = [];
        const running = steps.map((st) =>
          st.op === 'sign-in' ? as.signIn('alice', st.app).then(({ grantId }) => void signedIn.push({ app: st.app, grantId })) : as.revokeAccess('alice', st.app),
        );
        await s.waitFor(Promise.all(running));
        for (const { app, grantId } of signedIn) {
          // Still through the scheduled store: each read released by the scheduler.
          const listed = (await s.waitFor(as.apps.find('alice', app)))?.grants ?? [];
          expect(listed.includes(grantId) || (await s.waitFor(as.grants.isRevoked(grantId))), `${grantId} of ${app}: working and unlisted\n${s.report().map((r) => r.label).join('\n')}`).toBe(true);
        }
      }),
      { numRuns: 150 },
    );
  }, 60_000);
});

describe('[K71] through the gateway on a real redis-server: the review\'s scenario', () => {
  let redis: RedisServer;
  let up: RecordingUpstream;
  let gateway: TestGateway;
  beforeAll(async () => {
    [redis, up] = await Promise.all([startRedisServer(), startRecordingUpstream()]);
    gateway = await startTestGateway((origin) => ({
      'gateway.yaml': originYaml(origin, {
        log_level: 'warn',
        store: { kind: 'redis', url: redis.url, key_prefix: 'k71:' },
        account: { enabled: true },
        authorization_server: devAuthorizationServer({ rate_limits: { token: { requests: 100_000, window: '1m' }, interaction: { requests: 100_000, window: '1m' }, authorize: { requests: 100_000, window: '1m' } } }),
      }),
      'everything.yaml': { path: '/everything/mcp', upstream: `${up.origin}/mcp`, scopes_supported: ['mcp:read'], required_scopes: ['mcp:read'] },
    }));
  });
  afterAll(async () => {
    await gateway?.stop();
    await up?.close();
    await redis?.stop();
  });

  /** GETs `url` and follows redirects (cookies kept) to the first page. */
  async function open(browser: CookieBrowser, url: string): Promise<Seen> {
    let next = new URL(url);
    for (let step = 0; step < 20; step++) {
      const seen = await browser.request(next);
      if (seen.status < 300 || seen.status >= 400 || !seen.location) return seen;
      next = new URL(seen.location, seen.url);
    }
    throw new Error(`too many redirects from ${url}`);
  }

  async function signIn(client: PublicClient): Promise<string> {
    const verifier = newVerifier();
    const url = codeRequestUrl(gateway.url, { client, verifier, state: 's', resource: `${gateway.url}/everything/mcp`, scope: 'mcp:read' });
    const code = (await followAuthorization(url, client.redirectUri, { onPage: headlessUser('alice') })).searchParams.get('code')!;
    const res = await fetch(`${gateway.url}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri, client_id: client.id }) });
    expect(res.status).toBe(200);
    return ((await res.json()) as { refresh_token: string }).refresh_token;
  }

  it('[K71] 15 concurrent sign-ins of alice to one app, "Revoke access" on the page: all 15 refresh tokens are invalid_grant, and the page lists no app', async () => {
    const client = await registerPublicClient(gateway.url, 'k71 app');
    const refreshTokens = await Promise.all(Array.from({ length: 15 }, () => signIn(client)));

    const browser = new CookieBrowser();
    const login = await open(browser, `${gateway.url}/account/apps`);
    const loginForm = parseForm(login.body)!;
    const signedIn = await browser.request(new URL(loginForm.action, gateway.url), { method: 'POST', body: new URLSearchParams({ ...loginForm.fields, username: 'alice' }), headers: { 'sec-fetch-site': 'same-origin', origin: gateway.url } });
    const page = await open(browser, new URL(signedIn.location!, gateway.url).href);
    expect(page.body).toContain(client.id);
    const form = parseForm(page.body);
    expect(form).toMatchObject({ action: '/account/apps/revoke', fields: { client_id: client.id } });
    const revoked = await browser.request(new URL(form!.action, gateway.url), { method: 'POST', body: new URLSearchParams(form!.fields), headers: { 'sec-fetch-site': 'same-origin', origin: gateway.url } });
    expect(revoked.status, revoked.body.slice(0, 300)).toBe(303);

    const answers = await Promise.all(
      refreshTokens.map(async (refreshToken) => {
        const res = await fetch(`${gateway.url}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.id }) });
        return ((await res.json()) as { error?: string }).error;
      }),
    );
    expect(answers).toEqual(Array.from({ length: 15 }, () => 'invalid_grant'));
    expect((await browser.request(`${gateway.url}/account/apps`)).body).not.toContain(client.id);
  }, 120_000);
});
