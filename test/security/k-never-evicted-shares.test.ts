/**
 * The never-evicted key classes a sign-in feeds (`code-used:`, `grant:`) are bounded per user
 * (DESIGN.md §8.3, K81): every completed authorization counts against its user's share
 * (issuer + subject, whatever client), so one user who signs in and revokes in a loop gets 429
 * past their share, and another user's sign-in, revocation and reuse detection still work.
 * A revocation marker the store cannot take still ends the grant (K72: revocation fails closed).
 * Found by the second adversarial review (review2-never-evicted: alice got 503 after mallory's loop).
 */
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { headlessUser, startBoundedAsGateway } from '../helpers/authorization-server.js';
import { devAuthorizationServer } from '../helpers/gateway-config.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { codeRequestUrl, newVerifier, registerPublicClient } from '../helpers/oauth-requests.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { memoryClassBudget } from '../../src/store/memory-class-budgets.js';
import { grantKey, usedCodeKey } from '../../src/store/key-names.js';
import { SignInShare, signInShareLimit } from '../../src/authorization-server/tokens/sign-in-share.js';
import { Grants } from '../../src/authorization-server/tokens/grants.js';
import { RevokedGrants } from '../../src/authorization-server/tokens/revoked-grants.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { StoreUnavailableError } from '../../src/store/store.js';
import { createLogger } from '../../src/observability/logger.js';
import { describeOnEachStore } from '../helpers/store-backends.js';
import { Metrics } from '../../src/observability/metrics.js';

const MAX_ENTRIES = 20;
/** Each user's share of sign-ins on this store: a tenth of it. */
const SHARE = signInShareLimit({ kind: 'memory', maxEntries: MAX_ENTRIES } as Parameters<typeof signInShareLimit>[0]);
const NO_FLOOD_LIMITS = { rate_limits: { token: { requests: 1_000_000, window: '1m' } } };
const DAY_MS = 86_400_000;

describe('[K81] one user cannot fill the never-evicted classes for everyone', () => {
  let gateway: { issuer: string; stop(): Promise<void> };
  let issuer: string;
  const mcpUrl = () => `${issuer}/everything/mcp`;

  beforeAll(async () => {
    gateway = await startBoundedAsGateway(MAX_ENTRIES, { authorization_server: devAuthorizationServer(NO_FLOOD_LIMITS) });
    issuer = gateway.issuer;
  }, 60_000);
  afterAll(async () => {
    await gateway?.stop();
  });

  async function post(path: string, params: Record<string, string>) {
    const res = await fetch(`${issuer}${path}`, { method: 'POST', body: new URLSearchParams(params) });
    const text = await res.text();
    return { status: res.status, json: (text ? JSON.parse(text) : {}) as Record<string, string> };
  }

  /** A sign-in of `user` through `client`, redeemed; or the page the authorization stopped at (429 past the share). */
  async function signIn(user: string, client: Awaited<ReturnType<typeof registerPublicClient>>) {
    const verifier = newVerifier();
    let stopped: { status: number; json: Record<string, string> } | undefined;
    const login = headlessUser(user);
    const callback = await followAuthorization(codeRequestUrl(issuer, { client, verifier, state: 's', resource: mcpUrl(), scope: 'mcp:read' }), client.redirectUri, {
      onPage: (page) => {
        if (page.status === 429) stopped = { status: page.status, json: JSON.parse(page.body) as Record<string, string> };
        return login(page);
      },
    }).catch((err: unknown) => {
      if (stopped) return undefined;
      throw err;
    });
    if (!callback) return stopped!;
    return post('/token', { grant_type: 'authorization_code', code: callback.searchParams.get('code')!, code_verifier: verifier, client_id: client.id, redirect_uri: client.redirectUri, resource: mcpUrl() });
  }

  it('mallory signs in and revokes MAX_ENTRIES times: past her share 429 for her alone; alice signs in and revokes; mallory\'s revocations hold', async () => {
    const app = await registerPublicClient(issuer, 'mallory app');
    const revokedTokens: string[] = [];
    const statuses: number[] = [];
    for (let i = 0; i < MAX_ENTRIES; i++) {
      // A new client each time: registering more clients does not multiply the user's share.
      const client = i % 2 === 0 ? app : await registerPublicClient(issuer, `mallory app ${i}`);
      const issued = await signIn('mallory', client);
      statuses.push(issued.status);
      if (issued.status === 429) {
        expect(issued.json.error).toBe('too_many_requests');
        continue;
      }
      expect(issued.status, JSON.stringify(issued.json)).toBe(200);
      const revoked = await post('/revoke', { token: issued.json.refresh_token!, client_id: client.id });
      expect(revoked.status).toBe(200);
      revokedTokens.push(issued.json.refresh_token!);
      // Revoked stays revoked: the marker was kept.
      const refreshed = await post('/token', { grant_type: 'refresh_token', refresh_token: issued.json.refresh_token!, client_id: client.id });
      expect(refreshed.status).toBe(400);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(SHARE);
    expect(statuses.filter((s) => s === 429)).toHaveLength(MAX_ENTRIES - SHARE);

    const aliceApp = await registerPublicClient(issuer, 'alice app');
    const alice = await signIn('alice', aliceApp);
    expect(alice.status, `alice's sign-in after mallory's loop: ${JSON.stringify(alice.json)}`).toBe(200);
    const revoked = await post('/revoke', { token: alice.json.refresh_token!, client_id: aliceApp.id });
    expect(revoked.status, "alice's revocation after mallory's loop").toBe(200);
    const refreshed = await post('/token', { grant_type: 'refresh_token', refresh_token: alice.json.refresh_token!, client_id: aliceApp.id });
    expect(refreshed.status, "alice's revoked grant stays revoked").toBe(400);
    for (const token of revokedTokens) expect((await post('/token', { grant_type: 'refresh_token', refresh_token: token, client_id: app.id })).status).toBe(400);
  }, 180_000);
});

describe('[K81] interleaved users: each holds at most its share, and a user under it is never refused (property)', () => {
  it('any interleaving of sign-ins by up to nine floods and alice: alice\'s sign-in and markers always pass, nobody else\'s marker goes', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 10, max: 60 }), fc.array(fc.integer({ min: 0, max: 8 }), { maxLength: 120 }), fc.integer({ min: 0, max: 120 }), async (maxEntries, floods, aliceAt) => {
        const store = new MemoryStore({ maxEntries });
        const limit = signInShareLimit({ kind: 'memory', maxEntries } as Parameters<typeof signInShareLimit>[0]);
        const share = new SignInShare(store, 'https://as.example', limit, DAY_MS);
        const admitted = new Map<string, number>();
        const written: string[] = [];
        const users = floods.map((n) => `mallory-${n}`);
        users.splice(Math.min(aliceAt, users.length), 0, 'alice');
        for (const [i, user] of users.entries()) {
          const refused = await share.admit(user).then(
            () => undefined,
            (err: unknown) => err,
          );
          if (refused) {
            expect(refused).toBeInstanceOf(GatewayError);
            expect((refused as GatewayError).status).toBe(429);
            expect(admitted.get(user)).toBe(limit);
            continue;
          }
          admitted.set(user, (admitted.get(user) ?? 0) + 1);
          // What one sign-in may leave: its code's marker and its grant's revocation.
          for (const key of [usedCodeKey(`${user}-${i}`), grantKey(`${user}-${i}`)]) {
            await store.set(key, user, DAY_MS);
            written.push(key);
          }
        }
        expect(admitted.get('alice')).toBe(1);
        for (const count of admitted.values()) expect(count).toBeLessThanOrEqual(limit);
        for (const key of written) expect(await store.get(key)).toBeDefined();
      }),
      { numRuns: 60 },
    );
  });
});

describeOnEachStore('[K81] the sign-in share', (store) => {
  it('counts the user (issuer + subject) on a shared store: past it 429 with Retry-After for that user, never for another user or issuer', async () => {
    const limit = 3;
    const share = new SignInShare(store(), 'https://as.example', limit, DAY_MS);
    const user = `mallory-${Math.random()}`;
    for (let i = 0; i < limit; i++) await share.admit(user);
    const refused = await share.admit(user).then(
      () => undefined,
      (err: unknown) => err as GatewayError,
    );
    expect(refused?.status).toBe(429);
    expect(refused?.code).toBe('too_many_requests');
    expect(Number(refused?.headers?.['retry-after'])).toBeGreaterThan(0);
    await expect(share.admit(`alice-${Math.random()}`)).resolves.toBeUndefined();
    // The same subject at another issuer is another user.
    await expect(new SignInShare(store(), 'https://other.example', limit, DAY_MS).admit(user)).resolves.toBeUndefined();
    // Redis bounds no class by itself: the share is what caps one user there.
    expect(signInShareLimit({ kind: 'redis' } as Parameters<typeof signInShareLimit>[0])).toBe(10_000);
  });
});

describe('[K72] a revocation marker the store cannot take still ends the grant (fails closed)', () => {
  it('a full grant: class: revoke answers 503, yet the grant\'s refresh token never rotates and its access tokens are refused', async () => {
    // One grant marker fits; the second revocation finds the class full.
    const store = new MemoryStore({ maxEntries: 1000, budgetOf: (keyClass) => (keyClass === 'grant' ? { maxEntries: 1, whenFull: 'refuse' } : memoryClassBudget(keyClass, 1000)) });
    const logger = createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));
    const revokedGrants = new RevokedGrants({ store, issuer: 'https://as.example', accessTokenTtlMs: 600_000, logger, metrics: new Metrics({ defaultMetrics: false }) });
    await revokedGrants.start();
    try {
      const grants = new Grants(store, DAY_MS, revokedGrants);
      const grant = (grantId: string) => ({ grantId, clientId: 'c', subject: 'mallory', scopes: ['mcp:read'], resource: 'https://gw.example/mcp' });
      await grants.revoke('filler', 'revoked_by_client');
      const token = await grants.startFamily(grant('alice-grant'));
      await expect(grants.revoke('alice-grant', 'revoked_by_client')).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(revokedGrants.state('alice-grant')).toBe('revoked');
      const rotation = await grants.rotate(token, 'c').then(
        () => 'rotated',
        (err: unknown) => err,
      );
      expect(rotation).not.toBe('rotated');
    } finally {
      revokedGrants.close();
    }
  });
});
