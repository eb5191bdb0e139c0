/**
 * The in-process cache of opened user_oauth grants (upstream-grants.ts, issue 21's cost item) ends
 * on every replica at once: two replicas, each its own RedisStore and UpstreamAccounts, on one real
 * redis-server. The cache lives ten minutes here, so what ends it on the other replica can only be
 * the store notice, not its age. A Disconnect on one replica: the other's next call gets the
 * connect link; a refresh or a new connection on one: the other sends the new token; a replica
 * that has heard no change reads nothing from the store for a kept grant.
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import { UpstreamAccounts } from '../../src/authorization-server/upstream-accounts/upstream-accounts.js';
import type { UpstreamGrant } from '../../src/authorization-server/upstream-accounts/upstream-grants.js';
import type { RouteConfig } from '../../src/config/types.js';
import { RedisStore } from '../../src/store/redis-store.js';
import { UpstreamAccountRequired, userOAuthCredential } from '../../src/upstream-auth/user-oauth.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { upstreamAccountsContext } from '../helpers/upstream-accounts-context.js';

const ISSUER = 'http://gateway.test';
const ROUTE = '/tickets/mcp';
const RESOURCE = 'https://tickets.example/mcp';
const AS = 'https://as.tickets.example';
const KEY = randomBytes(32);
const TEN_MINUTES = 600_000;

let redis: RedisServer;
const stores: RedisStore[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
}, 30_000);

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await redis?.stop();
});

/** One replica: its own connection (and subscriber) to the shared redis-server; `gets` counts its store reads. */
function replica(prefix: string): { accounts: UpstreamAccounts; gets: () => number; store: RedisStore } {
  const store = new RedisStore({ url: redis.url, keyPrefix: prefix, commandTimeoutMs: 5_000 });
  stores.push(store);
  let gets = 0;
  const get = store.get.bind(store);
  store.get = (key: string) => {
    gets++;
    return get(key);
  };
  const ctx = upstreamAccountsContext(store, ISSUER);
  // Explicit endpoints, no revocation endpoint: nothing here reaches an AS.
  const upstreamAuth = { kind: 'user_oauth', endpoints: { authorization: `${AS}/authorize`, token: `${AS}/token` }, clientId: 'gw', scopes: [], resource: RESOURCE, sendResource: true };
  const route = { path: ROUTE, upstream: RESOURCE, upstreamAuth } as unknown as RouteConfig;
  const accounts = new UpstreamAccounts(ctx, [route], { keys: [{ id: 'k1', key: KEY }] } as never, { timeoutMs: 5_000, grantCacheTtlMs: TEN_MINUTES });
  return { accounts, gets: () => gets, store };
}

const auth = (subject: string) => ({ issuer: ISSUER, subject, clientId: 'app', scopes: [], expiresAt: 0, claims: {} }) as unknown as AuthContext;

function grant(accessToken: string): UpstreamGrant {
  const now = Date.now();
  return { accessToken, refreshToken: `rt-${accessToken}`, obtainedAt: now, expiresAt: now + 3600_000, scopes: [], connectedAt: now, asIssuer: AS, resource: RESOURCE };
}

/** What `r` sends the upstream for `subject` now: the token, or 'connect link'. */
async function sent(r: ReturnType<typeof replica>, subject: string): Promise<string> {
  return r.accounts.routes.get(ROUTE)!.tokens.accessTokenFor(auth(subject)).catch((err: unknown) => {
    if (err instanceof UpstreamAccountRequired) return 'connect link';
    throw err;
  });
}

/** Until `r` sends `expected` (the notice is on its way); fails after a bound far below the cache's ten minutes. */
async function until(r: ReturnType<typeof replica>, subject: string, expected: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while ((await sent(r, subject)) !== expected) {
    if (Date.now() > deadline) throw new Error(`replica still sends something else than ${expected}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('user_oauth grant cache: ended on every replica by store notices (two replicas, real redis-server)', () => {
  it('a kept grant is served without a store read; a Disconnect on one replica ends it on the other', async () => {
    const { A, B, owner } = await keptOnB('alice');
    // Kept: 50 more calls on B read nothing from the store (the last-used write aside, which is no read).
    const before = B.gets();
    for (let i = 0; i < 50; i++) expect(await sent(B, 'alice')).toBe('at-1');
    expect(B.gets() - before).toBe(0);

    expect(await A.accounts.disconnect(owner)).toBe(true);
    expect(await sent(A, 'alice')).toBe('connect link');
    await until(B, 'alice', 'connect link');
  }, 60_000);

  it('a refresh or a new connection on one replica: the other sends the new token', async () => {
    const prefix = `gc-${randomBytes(4).toString('hex')}:`;
    const [A, B] = [replica(prefix), replica(prefix)];
    const owner = { issuer: ISSUER, subject: 'bob', routePath: ROUTE };
    await A.accounts.grants.save(owner, grant('at-1'));
    await until(B, 'bob', 'at-1');
    const { version } = (await A.accounts.grants.loadVersioned(owner))!;
    expect(await A.accounts.grants.replace(owner, version, grant('at-2'))).toBe(true);
    await until(B, 'bob', 'at-2');
    await A.accounts.grants.save(owner, grant('at-3'));
    await until(B, 'bob', 'at-3');
    // Another prefix (another gateway on the same Redis) hears none of it and has no grant.
    expect(await sent(replica(`gc-other-${randomBytes(4).toString('hex')}:`), 'bob')).toBe('connect link');
  }, 60_000);

  it('a kept grant is answered synchronously (no promise, no store read) for every principal, frozen or not, until a notice ends it; one due for refresh never is', async () => {
    const subjects = ['dave', 'd\u00e9j\u00e0', 'e:f*g', ' ', 'x'.repeat(300)];
    for (const subject of subjects) {
      const { A, B, owner } = await keptOnB(subject);
      const tokens = B.accounts.routes.get(ROUTE)!.tokens;
      const credential = userOAuthCredential(tokens);
      const before = B.gets();
      for (const principal of [auth(subject), Object.freeze(auth(subject))]) {
        // Twice: the second call of a frozen principal takes its remembered key.
        for (let i = 0; i < 2; i++) {
          const headers = credential.headersFor(principal);
          expect(headers).not.toBeInstanceOf(Promise);
          expect(headers).toEqual({ authorization: 'Bearer at-1' });
        }
      }
      expect(B.gets() - before).toBe(0);
      // Another principal's grant is not this one's, kept or not.
      expect(tokens.keptAccessTokenFor(Object.freeze(auth(`${subject}-other`)))).toBeUndefined();

      expect(await A.accounts.disconnect(owner)).toBe(true);
      await waitFor(() => tokens.keptAccessTokenFor(Object.freeze(auth(subject))) === undefined);
      const after = credential.headersFor(Object.freeze(auth(subject)));
      expect(after).toBeInstanceOf(Promise);
      await expect(after).rejects.toBeInstanceOf(UpstreamAccountRequired);
    }
    // Due for refresh (less than 60 s left): kept in process like any grant, but never handed out synchronously.
    const C = replica(`gc-${randomBytes(4).toString('hex')}:`);
    const due = { issuer: ISSUER, subject: 'due', routePath: ROUTE };
    const now = Date.now();
    await C.accounts.grants.save(due, { ...grant('at-due'), obtainedAt: now - 3_570_000, expiresAt: now + 30_000 });
    await waitForAsync(async () => (await C.accounts.grants.load(due)) !== undefined && C.accounts.grants.kept(C.accounts.grants.keyOf(due)) !== undefined);
    expect(C.accounts.routes.get(ROUTE)!.tokens.keptAccessTokenFor(Object.freeze(auth('due')))).toBeUndefined();
  }, 120_000);

  it('[review-2] a notice missed while a replica\'s subscriber was down: what it kept before is not served after it reconnects', async () => {
    const { A, B, owner } = await keptOnB('carol');
    // A second subscription on B's one subscriber connection shows when that connection is down and back.
    const probe = B.store.notices.subscribe('review-probe', () => undefined);
    await waitFor(() => probe.live());
    const admin = new Redis(redis.url);
    try {
      await admin.client('KILL', 'TYPE', 'pubsub');
    } finally {
      admin.disconnect();
    }
    await waitFor(() => !probe.live());
    // The Disconnect's notice is published while B hears nothing (its first reconnect waits 100 ms).
    expect(await A.accounts.disconnect(owner)).toBe(true);
    await waitFor(() => probe.live());
    expect(await sent(B, 'carol')).toBe('connect link');
  }, 60_000);

  it('[review-2] a replaced UpstreamAccounts (a reload builds another) stops hearing notices: the channel goes when the last is closed', async () => {
    const prefix = `gc-${randomBytes(4).toString('hex')}:`;
    const first = replica(prefix);
    // A reload: a second UpstreamAccounts on the same store, then the first's route table is closed.
    const store = first.store;
    const ctx = upstreamAccountsContext(store, ISSUER);
    const second = new UpstreamAccounts(ctx, [], { keys: [{ id: 'k1', key: KEY }] } as never, { grantCacheTtlMs: TEN_MINUTES });
    const admin = new Redis(redis.url);
    const subscribers = async () => Number(((await admin.pubsub('NUMSUB', `${prefix}upstream-grant-changed`)) as [string, number])[1]);
    try {
      await waitForAsync(async () => (await subscribers()) === 1);
      first.accounts.close();
      // The second still listens on the one connection.
      expect(await subscribers()).toBe(1);
      second.close();
      await waitForAsync(async () => (await subscribers()) === 0);
    } finally {
      admin.disconnect();
    }
  }, 60_000);
});

async function waitForAsync(condition: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('condition never held');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Two replicas on a new prefix; A connects `subject`, B sends that grant and then keeps it. */
async function keptOnB(subject: string) {
  const prefix = `gc-${randomBytes(4).toString('hex')}:`;
  const [A, B] = [replica(prefix), replica(prefix)];
  const owner = { issuer: ISSUER, subject, routePath: ROUTE };
  await A.accounts.grants.save(owner, grant('at-1'));
  await until(B, subject, 'at-1');
  // B keeps grants once its subscription is live (a moment after it starts): a call then reads nothing.
  await keptBy(B, subject);
  return { A, B, owner };
}

/** Until B keeps the grant: a call reads nothing from the store. */
async function keptBy(r: ReturnType<typeof replica>, subject: string): Promise<void> {
  for (let calls = 0; ; calls++) {
    const reads = r.gets();
    await sent(r, subject);
    if (r.gets() === reads) return;
    if (calls > 1_000) throw new Error('never kept the grant');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

async function waitFor(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition never held');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
