// ConnectedApps (src/authorization-server/tokens/connected-apps.ts), the per-user index the
// connected-apps page lists and revokes (the property on the memory store, the rest on it and on a
// real redis-server):
// - no grant is ever lost: for any sequence of sign-ins (users × apps), every grant is either
//   listed under its own user and app or handed back to be revoked, and the record stays within
//   its bounds (a fast-check property);
// - users never see each other's apps; a grant added while a revoke runs stays listed;
// - "last used" is one plain write, dropped with the app; a corrupt record reads as empty.
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ConnectedApps, MAX_APPS, MAX_GRANTS_PER_APP, type Approval } from '../../src/authorization-server/tokens/connected-apps.js';
import { connectedAppsKey } from '../../src/store/key-names.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { describeOnEachStore } from '../helpers/store-backends.js';

const TTL_MS = 3_600_000;
const approval = (clientId: string): Approval => ({ clientId, clientName: `App ${clientId}`, clientKind: 'dynamic', redirectUri: `https://${clientId}.example/cb`, resource: 'https://gw.example/mcp', scopes: ['mcp:read'] });

describe('ConnectedApps, any sequence of sign-ins', () => {
  it('no grant is lost: each is listed under its user and app, or handed back to revoke; the record stays bounded', async () => {
    // Mostly alice, half her sign-ins to three apps (past MAX_GRANTS_PER_APP) and half spread over
    // twice MAX_APPS apps, long enough that both bounds are reached (checked after the runs); on the memory store (the record's logic; the backends share the tests below).
    const app = fc.oneof(fc.integer({ min: 0, max: 2 }), fc.integer({ min: 0, max: MAX_APPS + 50 }));
    const signIn = fc.record({ user: fc.constantFrom('alice', 'alice', 'alice', 'bob'), app });
    const reached = { grants: 0, apps: 0 };
    await fc.assert(
      fc.asyncProperty(fc.array(signIn, { minLength: 300, maxLength: 350 }), async (signIns) => {
        const apps = new ConnectedApps(new MemoryStore({ maxEntries: 10_000 }), 'https://issuer.example', TTL_MS);
        const recorded: Array<{ user: string; clientId: string; grantId: string }> = [];
        const pushedOut = new Set<string>();
        for (const [i, { user, app }] of signIns.entries()) {
          const grantId = `g${i}`;
          recorded.push({ user, clientId: `c${app}`, grantId });
          const pushed = await apps.record(user, approval(`c${app}`), grantId);
          const sameApp = (g: string) => recorded.some((r) => r.grantId === g && r.clientId === `c${app}`);
          if (pushed.some(sameApp)) reached.grants++;
          if (pushed.some((g) => !sameApp(g))) reached.apps++;
          for (const g of pushed) pushedOut.add(g);
        }
        for (const user of ['alice', 'bob']) {
          const listed = await apps.list(user);
          expect(listed.length).toBeLessThanOrEqual(MAX_APPS);
          for (const app of listed) expect(app.grants.length).toBeLessThanOrEqual(MAX_GRANTS_PER_APP);
          for (const r of recorded.filter((r) => r.user === user)) {
            const isListed = listed.some((a) => a.clientId === r.clientId && a.grants.includes(r.grantId));
            expect(isListed !== pushedOut.has(r.grantId), `${r.grantId} listed xor handed back`).toBe(true);
          }
          // Nothing listed that this user did not record under that app.
          for (const app of listed) for (const g of app.grants) expect(recorded).toContainEqual({ user, clientId: app.clientId, grantId: g });
        }
      }),
      { numRuns: 10 },
    );
    // The generator reached both bounds at least once in all those runs (or the property proved little).
    expect(reached.grants).toBeGreaterThan(0);
    expect(reached.apps).toBeGreaterThan(0);
  }, 60_000);
});

describeOnEachStore('ConnectedApps', (store) => {
  const fresh = () => new ConnectedApps(store(), `https://issuer-${randomUUID()}.example`, TTL_MS);

  it('the oldest grant of an app and the app approved longest ago are the ones pushed out', async () => {
    const apps = fresh();
    for (let i = 0; i < MAX_GRANTS_PER_APP; i++) expect(await apps.record('alice', approval('c0'), `old-${i}`)).toEqual([]);
    expect(await apps.record('alice', approval('c0'), 'newest')).toEqual(['old-0']);
    for (let i = 1; i < MAX_APPS; i++) await apps.record('alice', approval(`c${i}`), `g${i}`);
    // c0 was approved first: the next new app pushes it, with all its grants, out.
    const pushed = await apps.record('alice', approval('new-app'), 'g-new');
    expect(pushed).toHaveLength(MAX_GRANTS_PER_APP);
    expect(pushed).toContain('newest');
    expect((await apps.list('alice')).map((a) => a.clientId)).not.toContain('c0');
  });

  it('a user finds only their own apps', async () => {
    const apps = fresh();
    await apps.record('alice', approval('shared-client'), 'g-alice');
    expect(await apps.find('bob', 'shared-client')).toBeUndefined();
    expect(await apps.list('bob')).toEqual([]);
    expect((await apps.find('alice', 'shared-client'))?.grants).toEqual(['g-alice']);
  });

  it('removing the revoked grants keeps a grant added meanwhile, and the app with it', async () => {
    const apps = fresh();
    await apps.record('alice', approval('c1'), 'g1');
    const seen = (await apps.find('alice', 'c1'))!;
    await apps.record('alice', approval('c1'), 'g2'); // a sign-in while the revoke runs
    await apps.removeGrants('alice', 'c1', seen.grants);
    expect((await apps.find('alice', 'c1'))?.grants).toEqual(['g2']);
    await apps.removeGrants('alice', 'c1', ['g2']);
    expect(await apps.find('alice', 'c1')).toBeUndefined();
  });

  it('last used: set by a use, listed with the app, gone with it', async () => {
    const apps = fresh();
    await apps.record('alice', approval('c1'), 'g1');
    expect((await apps.list('alice'))[0]?.lastUsedAt).toBeUndefined();
    const before = Date.now();
    await apps.used('alice', 'c1');
    const [listed] = await apps.list('alice');
    expect(listed?.lastUsedAt).toBeGreaterThanOrEqual(before);
    expect(listed).toMatchObject({ clientId: 'c1', clientName: 'App c1', redirectUri: 'https://c1.example/cb', scopes: ['mcp:read'], grants: ['g1'] });
    await apps.removeGrants('alice', 'c1', ['g1']);
    await apps.record('alice', approval('c1'), 'g3');
    expect((await apps.list('alice'))[0]?.lastUsedAt).toBeUndefined();
  });

  it('a corrupt or foreign record reads as no apps', async () => {
    const issuer = `https://issuer-${randomUUID()}.example`;
    const apps = new ConnectedApps(store(), issuer, TTL_MS);
    for (const value of ['{not json', '{"clientId":"x"}', '[{"clientId":"x","grants":"g"}]', '[null, 3, "x"]']) {
      await store().set(connectedAppsKey(issuer, 'alice'), value, TTL_MS);
      expect(await apps.list('alice')).toEqual([]);
    }
  });
});
