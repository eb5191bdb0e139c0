/**
 * user_oauth against the real upstream of user-oauth.test.ts (a TS SDK server behind a real
 * oidc-provider: resource indicators, rotating refresh tokens, RFC 7009, RFC 9207 `iss`),
 * discovered from its 401 with a dynamic registration, the gateway's own classes unmodified
 * (UpstreamAccounts and its parts, the real MemoryStore). The user's consent at the upstream AS is
 * oidc-provider's headless login, followed by redirects (no page to show here):
 * - the tokens of a refresh that lost its race to Disconnect are revoked at the AS (RFC 7009), not
 *   just dropped: the AS's answer is held until the user has disconnected, then the gateway revokes
 *   exactly the refresh token of that answer, which no longer works there;
 * - the AS issuer is checked always, not only where configured: a grant from another AS than the
 *   one discovered is not used, and its refresh token is never sent to the discovered AS; an
 *   authorization response whose RFC 9207 `iss` is another AS is refused before any token request.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import { UpstreamAccounts } from '../../src/authorization-server/upstream-accounts/upstream-accounts.js';
import type { GrantOwner } from '../../src/authorization-server/upstream-accounts/upstream-grants.js';
import { UpstreamAsError } from '../../src/authorization-server/upstream-accounts/upstream-as-error.js';
import type { RouteConfig } from '../../src/config/types.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { UpstreamAccountRequired } from '../../src/upstream-auth/user-oauth.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { startOAuthProtectedUpstream, type OAuthProtectedUpstream } from '../helpers/oauth-protected-upstream.js';
import { upstreamAccountsContext } from '../helpers/upstream-accounts-context.js';

const ISSUER = 'http://gateway.test';
const ROUTE = '/files/mcp';
const TEST_MS = 60_000;

let upstream: OAuthProtectedUpstream;
/** Every token the gateway sent to the AS's revocation endpoint. */
const revokedTokens: string[] = [];
/** Set: the AS holds its answer to the next refresh until `release` is called. */
let hold: { arrived: () => void; released: Promise<void> } | undefined;

type KoaContext = { path: string; method: string; body?: { refresh_token?: string }; oidc?: { params?: Record<string, unknown> } };

beforeAll(async () => {
  upstream = await startOAuthProtectedUpstream({ accessTokenTtl: 300 });
  (upstream.as.provider as unknown as { use(fn: (ctx: KoaContext, next: () => Promise<void>) => Promise<void>): void }).use(async (ctx, next) => {
    await next();
    if (ctx.path === '/token/revocation') revokedTokens.push(String(ctx.oidc?.params?.token ?? ''));
    // The refresh is done at the AS (its new tokens issued), its answer not yet sent.
    if (ctx.path === '/token' && ctx.oidc?.params?.grant_type === 'refresh_token' && hold) {
      const held = hold;
      hold = undefined;
      held.arrived();
      await held.released;
    }
  });
}, 60_000);

afterAll(async () => {
  await upstream?.close();
});

const audit: { event: string; reason?: string }[] = [];

/** One sealing key for every replica of a test. */
const SEALING_KEY = randomBytes(32);

function accounts(store = new MemoryStore({ maxEntries: 10_000 })): UpstreamAccounts {
  const ctx = upstreamAccountsContext(store, ISSUER, { audit });
  const route = { path: ROUTE, upstream: upstream.url, upstreamAuth: { kind: 'user_oauth', scopes: [], resource: upstream.url, sendResource: true } } as unknown as RouteConfig;
  // The AS is on 127.0.0.1, another port than the upstream: the discovery guard's test-only loopback allowance.
  return new UpstreamAccounts(ctx, [route], { keys: [{ id: 'k1', key: SEALING_KEY }] } as never, { timeoutMs: 10_000, allowLoopback: true });
}

const authOf = (subject: string) => ({ issuer: ISSUER, subject, clientId: 'app', scopes: [], expiresAt: 0, claims: {} }) as unknown as AuthContext;

/** `subject` connects their account `upstreamAccount` (the callback as the AS sent it; `tamper` may change it first). */
async function connect(a: UpstreamAccounts, subject: string, upstreamAccount: string, tamper?: (callback: URL) => void): Promise<GrantOwner> {
  const route = a.routes.get(ROUTE)!;
  const owner = { issuer: ISSUER, subject, routePath: ROUTE };
  upstream.signInAs(upstreamAccount);
  const redirectUri = `${ISSUER}/account/upstream-callback${ROUTE}`;
  const callback = await followAuthorization(await route.flow.start(owner, 'browser-1'), redirectUri);
  tamper?.(callback);
  await route.flow.finish(callback.searchParams, 'browser-1');
  return owner;
}

/** The grant made due for refresh (its tokens kept). */
async function makeDue(a: UpstreamAccounts, owner: GrantOwner, change: { asIssuer?: string } = {}): Promise<void> {
  const grant = (await a.grants.load(owner))!;
  const now = Date.now();
  await a.grants.save(owner, { ...grant, ...change, obtainedAt: now - 600_000, expiresAt: now + 1_000 });
}

async function until(check: () => boolean, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('user_oauth with a real oidc-provider upstream: the issuer always checked, a dropped refresh revoked', () => {
  it('a refresh that lost its race to Disconnect: the AS\'s new tokens are revoked there (RFC 7009) and no longer work', async () => {
    const a = accounts();
    const owner = await connect(a, 'alice', 'alice-up');
    const before = (await a.grants.load(owner))!;
    await makeDue(a, owner);
    let arrived!: () => void;
    const atAs = new Promise<void>((resolve) => (arrived = resolve));
    let release!: () => void;
    hold = { arrived, released: new Promise<void>((resolve) => (release = resolve)) };
    const issuedBefore = new Set(upstream.issuedTokens);

    const call = a.routes.get(ROUTE)!.tokens.accessTokenFor(authOf('alice')).catch((err: unknown) => err);
    await atAs;
    // The AS has issued the new tokens; the user disconnects before its answer arrives.
    expect(await a.disconnect(owner)).toBe(true);
    expect(revokedTokens).toContain(before.refreshToken);
    release();
    expect(await call).toBeInstanceOf(UpstreamAccountRequired);
    expect(await a.grants.load(owner)).toBeUndefined();

    const dropped = [...upstream.issuedTokens].filter((t) => !issuedBefore.has(t));
    expect(dropped).toHaveLength(2); // the refresh's access and refresh tokens
    await until(() => revokedTokens.some((t) => dropped.includes(t)));
    const droppedRefresh = revokedTokens.find((t) => dropped.includes(t))!;
    await until(() => audit.some((l) => l.event === 'upstream_account_refresh_dropped'));
    // Revoked there: the refresh token of the dropped answer is refused by the AS.
    const grantType = await fetch(`${upstream.as.issuer}/token`, {
      method: 'POST',
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: droppedRefresh, client_id: (await a.routes.get(ROUTE)!.server.resolve()).client.client_id }),
    });
    expect(grantType.status).toBe(400);
    expect(((await grantType.json()) as { error: string }).error).toBe('invalid_grant');
  }, TEST_MS);

  it('a grant from another AS than the one discovered is not used, and its refresh token is never sent to the discovered AS', async () => {
    const store = new MemoryStore({ maxEntries: 10_000 });
    const a = accounts(store);
    const owner = await connect(a, 'bob', 'bob-up');
    const grant = (await a.grants.load(owner))!;
    // Known from discovery (no issuer configured): the grant says another AS issued it.
    await a.grants.save(owner, { ...grant, asIssuer: 'https://other-as.example' });
    await expect(a.routes.get(ROUTE)!.tokens.accessTokenFor(authOf('bob'))).rejects.toBeInstanceOf(UpstreamAccountRequired);

    // A replica that has not discovered yet: the grant is due, the refresh resolves the AS first and stops there.
    const fresh = accounts(store);
    await makeDue(fresh, owner, { asIssuer: 'https://other-as.example' });
    const refreshes = upstream.refreshes;
    await expect(fresh.routes.get(ROUTE)!.tokens.accessTokenFor(authOf('bob'))).rejects.toBeInstanceOf(UpstreamAccountRequired);
    expect(upstream.refreshes).toBe(refreshes);
    expect(await fresh.grants.load(owner)).toBeUndefined();
    expect(audit).toContainEqual(expect.objectContaining({ event: 'upstream_account_refresh_failed', reason: 'the grant is from another authorization server than the upstream now names' }));
  }, TEST_MS);

  it('an authorization response whose RFC 9207 iss names another AS is refused before any token request, and nothing is connected', async () => {
    const a = accounts();
    const issued = upstream.issuedTokens.size;
    const outcome = await connect(a, 'carol', 'carol-up', (callback) => callback.searchParams.set('iss', 'https://other-as.example')).catch((err: unknown) => err);
    expect(outcome).toBeInstanceOf(UpstreamAsError);
    expect(upstream.issuedTokens.size).toBe(issued);
    expect(await a.grants.load({ issuer: ISSUER, subject: 'carol', routePath: ROUTE })).toBeUndefined();
  }, TEST_MS);
});
