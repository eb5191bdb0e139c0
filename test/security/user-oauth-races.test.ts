/**
 * Races and hostile answers around `upstream_auth: { kind: user_oauth }` (DESIGN §8.1), from the
 * second review: a refresh in flight against Disconnect and a new connection, the refresh lock,
 * bounded upstream AS answers, a connect state bound to its route, per-principal pending connects,
 * a forgotten dynamic registration. The upstream AS is a real HTTP server on a free port that the test
 * scripts (a hostile or slow AS); the store is the real MemoryStore; the gateway's own classes
 * (UpstreamAccounts, its ConnectFlow, UpstreamTokens, UpstreamGrants) are used unmodified.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import { ConnectCallbackRefused } from '../../src/authorization-server/upstream-accounts/connect-flow.js';
import { UpstreamAccounts } from '../../src/authorization-server/upstream-accounts/upstream-accounts.js';
import type { RouteConfig, UserOAuthConfig } from '../../src/config/types.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { upstreamRefreshLockKey } from '../../src/store/key-names.js';
import { bounded, MAX_UPSTREAM_ANSWER_BYTES } from '../../src/authorization-server/upstream-accounts/upstream-answers.js';
import { upstreamAccountsContext } from '../helpers/upstream-accounts-context.js';

const ISSUER = 'http://gateway.test';
const SUBJECT = 'alice';

type Handler = (req: IncomingMessage, body: URLSearchParams, res: ServerResponse) => void;

interface ScriptedAs {
  origin: string;
  requests: { path: string; body: URLSearchParams }[];
  on: Map<string, Handler>;
  close(): Promise<void>;
}

const open: Server[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => new Promise((r) => { s.closeAllConnections(); s.close(r); })));
});

/** An upstream AS without metadata (explicit endpoints) whose answers each test scripts. */
async function scriptedAs(): Promise<ScriptedAs> {
  const on = new Map<string, Handler>();
  const requests: ScriptedAs['requests'] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      const body = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      requests.push({ path, body });
      const handler = on.get(path);
      if (handler) handler(req, body, res);
      else res.writeHead(404).end();
    });
  });
  open.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { origin, requests, on, close: () => new Promise((r) => server.close(() => r())) };
}

function userOAuth(as: ScriptedAs, resource: string): UserOAuthConfig {
  return {
    kind: 'user_oauth',
    endpoints: { authorization: `${as.origin}/authorize`, token: `${as.origin}/token` },
    revocationEndpoint: `${as.origin}/revoke`,
    clientId: 'gw',
    scopes: ['read'],
    resource,
    sendResource: true,
  };
}

function accountsFor(store: MemoryStore, routes: { path: string; as: ScriptedAs; resource: string }[]): UpstreamAccounts {
  const ctx = upstreamAccountsContext(store, ISSUER);
  const routeConfigs = routes.map((r) => ({ path: r.path, upstream: r.resource, upstreamAuth: userOAuth(r.as, r.resource) }) as unknown as RouteConfig);
  return new UpstreamAccounts(ctx, routeConfigs, { keys: [{ id: 'k1', key: randomBytes(32) }] } as never, { timeoutMs: 10_000 });
}

const auth = { issuer: ISSUER, subject: SUBJECT, clientId: 'app', scopes: [], expiresAt: 0, claims: {} } as unknown as AuthContext;

function json(res: ServerResponse, body: unknown) {
  res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));
}

async function until(check: () => boolean, ms = 5_000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not reached');
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('user_oauth races and hostile upstream AS answers', () => {
  it('a Disconnect while a refresh is in flight stays disconnected (the refresh answer does not bring the grant back)', async () => {
    const as = await scriptedAs();
    let release: () => void = () => undefined;
    as.on.set('/token', (_req, _body, res) => {
      release = () => json(res, { access_token: 'at-after-refresh', token_type: 'Bearer', expires_in: 3600, refresh_token: 'rt-after-refresh' });
    });
    as.on.set('/revoke', (_req, _body, res) => res.writeHead(200).end());
    const store = new MemoryStore({ maxEntries: 10_000 });
    const accounts = accountsFor(store, [{ path: '/gh/mcp', as, resource: 'https://up.test/mcp' }]);
    const owner = { issuer: ISSUER, subject: SUBJECT, routePath: '/gh/mcp' };
    const now = Date.now();
    // A grant whose access token is about to expire: the next call refreshes it.
    await accounts.grants.save(owner, { accessToken: 'at-old', refreshToken: 'rt-old', obtainedAt: now - 3_590_000, expiresAt: now + 5_000, scopes: ['read'], connectedAt: now - 3_600_000, asIssuer: as.origin, resource: 'https://up.test/mcp' });

    const call = accounts.routes.get('/gh/mcp')!.tokens.accessTokenFor(auth).catch((err: unknown) => err);
    await until(() => as.requests.some((r) => r.path === '/token'));
    // The user presses Disconnect on /account/apps while the AS is still answering the refresh.
    expect(await accounts.disconnect(owner)).toBe(true);
    release();
    await call;

    expect(await accounts.list(SUBJECT)).toEqual([]);
    expect(await accounts.grants.load(owner)).toBeUndefined();
    // The dropped answer's tokens are revoked there too (RFC 7009), not left live at the AS.
    await until(() => as.requests.some((r) => r.path === '/revoke' && r.body.get('token') === 'rt-after-refresh'));
  });

  it('a token endpoint answer is read only up to a bound (a hostile AS cannot make the gateway hold or store megabytes per user)', async () => {
    const as = await scriptedAs();
    const huge = 'x'.repeat(16 * 1024 * 1024);
    as.on.set('/token', (_req, _body, res) => json(res, { access_token: huge, token_type: 'Bearer', expires_in: 3600, refresh_token: 'rt-2' }));
    const store = new MemoryStore({ maxEntries: 10_000 });
    const accounts = accountsFor(store, [{ path: '/gh/mcp', as, resource: 'https://up.test/mcp' }]);
    const owner = { issuer: ISSUER, subject: SUBJECT, routePath: '/gh/mcp' };
    const now = Date.now();
    await accounts.grants.save(owner, { accessToken: 'at-old', refreshToken: 'rt-old', obtainedAt: now - 3_590_000, expiresAt: now + 5_000, scopes: ['read'], connectedAt: now, asIssuer: as.origin, resource: 'https://up.test/mcp' });

    const outcome = await accounts.routes.get('/gh/mcp')!.tokens.accessTokenFor(auth).then(
      (token) => ({ tokenBytes: token.length }),
      () => ({ tokenBytes: 0 }),
    );
    const stored = (await store.get(accounts.grants.keyOf(owner))) ?? '';
    // Metadata is bounded at 64 KiB (upstream-server.ts); a token answer of 16 MiB is taken whole and sealed into the store.
    expect(outcome.tokenBytes).toBeLessThan(1024 * 1024);
    expect(stored.length).toBeLessThan(1024 * 1024);
  });

  it("a connection's state is taken only by the callback of the route that started it (no cross-route mix-up)", async () => {
    const [asA, asB] = [await scriptedAs(), await scriptedAs()];
    for (const as of [asA, asB]) as.on.set('/token', (_req, _body, res) => json(res, { access_token: `at-from-${as.origin}`, token_type: 'Bearer', expires_in: 3600 }));
    const store = new MemoryStore({ maxEntries: 10_000 });
    // Two routes in front of the same upstream resource, each with its own AS (e.g. a read-only and a full route).
    const accounts = accountsFor(store, [
      { path: '/a/mcp', as: asA, resource: 'https://up.test/mcp' },
      { path: '/b/mcp', as: asB, resource: 'https://up.test/mcp' },
    ]);
    const ownerB = { issuer: ISSUER, subject: SUBJECT, routePath: '/b/mcp' };
    const browser = 'browser-1';
    const authorizeB = new URL(await accounts.routes.get('/b/mcp')!.flow.start(ownerB, browser));
    const state = authorizeB.searchParams.get('state')!;

    // B's state arrives at A's callback (a mix-up: the browser was steered there with a code from A's AS).
    const callback = new URLSearchParams({ code: 'code-from-A', state });
    const outcome = await accounts.routes.get('/a/mcp')!.flow.finish(callback, browser).then(
      () => 'connected',
      (err: unknown) => (err instanceof ConnectCallbackRefused ? 'refused' : String(err)),
    );

    expect(outcome).toBe('refused');
    // B's PKCE verifier never reached A's token endpoint, and route B holds no grant from A's AS.
    expect(asA.requests.filter((r) => r.path === '/token')).toEqual([]);
    expect(await accounts.grants.load(ownerB)).toBeUndefined();
  });
  it("one user's many connection starts do not push out another user's pending connection (upstream-connect: is LRU per class, not per principal)", async () => {
    const as = await scriptedAs();
    as.on.set('/token', (_req, _body, res) => json(res, { access_token: 'at-alice', token_type: 'Bearer', expires_in: 3600, refresh_token: 'rt-alice' }));
    const maxEntries = 10;
    const store = new MemoryStore({ maxEntries });
    const accounts = accountsFor(store, [{ path: '/gh/mcp', as, resource: 'https://up.test/mcp' }]);
    const flow = accounts.routes.get('/gh/mcp')!.flow;
    const alice = { issuer: ISSUER, subject: 'alice', routePath: '/gh/mcp' };
    const aliceState = new URL(await flow.start(alice, 'alice-browser')).searchParams.get('state')!;
    // Mallory, signed in, opens her connect link (or approves a consent) again and again: one start each.
    const mallory = { issuer: ISSUER, subject: 'mallory', routePath: '/gh/mcp' };
    for (let i = 0; i < maxEntries; i++) await flow.start(mallory, 'mallory-browser');

    // Alice comes back from the upstream AS within her ten minutes.
    const outcome = await flow.finish(new URLSearchParams({ code: 'code-for-alice', state: aliceState }), 'alice-browser').then(
      () => 'connected',
      (err: unknown) => (err instanceof ConnectCallbackRefused ? 'refused: pending connection gone' : String(err)),
    );
    expect(outcome).toBe('connected');
  });
  it('a dynamic registration the upstream AS no longer knows (invalid_client) is made again, not kept for a year', async () => {
    const as = await scriptedAs();
    let registered = 0;
    const known = new Set<string>();
    as.on.set('/.well-known/oauth-authorization-server', (_req, _body, res) =>
      json(res, { issuer: as.origin, authorization_endpoint: `${as.origin}/authorize`, token_endpoint: `${as.origin}/token`, registration_endpoint: `${as.origin}/register`, code_challenge_methods_supported: ['S256'] }),
    );
    as.on.set('/register', (_req, _body, res) => {
      const id = `client-${++registered}`;
      known.add(id);
      res.writeHead(201, { 'content-type': 'application/json' }).end(JSON.stringify({ client_id: id, redirect_uris: [`${ISSUER}/cb`], token_endpoint_auth_method: 'none' }));
    });
    as.on.set('/token', (_req, body, res) => {
      if (!known.has(body.get('client_id') ?? '')) return void res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_client' }));
      json(res, { access_token: 'at', token_type: 'Bearer', expires_in: 3600 });
    });
    const store = new MemoryStore({ maxEntries: 10_000 });
    const ctx = upstreamAccountsContext(store, ISSUER);
    const config: UserOAuthConfig = { kind: 'user_oauth', issuer: as.origin, scopes: ['read'], resource: 'https://up.test/mcp', sendResource: true };
    const accounts = new UpstreamAccounts(ctx, [{ path: '/gh/mcp', upstream: 'https://up.test/mcp', upstreamAuth: config } as unknown as RouteConfig], { keys: [{ id: 'k1', key: randomBytes(32) }] } as never);
    const flow = accounts.routes.get('/gh/mcp')!.flow;
    const owner = { issuer: ISSUER, subject: SUBJECT, routePath: '/gh/mcp' };
    const connect = async () => {
      const state = new URL(await flow.start(owner, 'b')).searchParams.get('state')!;
      return flow.finish(new URLSearchParams({ code: 'c', state, iss: as.origin }), 'b').then(() => 'connected', (err: unknown) => String(err));
    };
    expect(await connect()).toBe('connected');
    // The upstream AS drops its idle dynamic clients (many do): the gateway's client is gone.
    known.clear();
    const attempts = [await connect(), await connect(), await connect()];
    expect(registered, `registrations after invalid_client: ${attempts.join(' | ')}`).toBeGreaterThan(1);
    expect(attempts.at(-1)).toBe('connected');
  });
  it('a refresh the AS refuses after the user connected again does not delete the new connection', async () => {
    const as = await scriptedAs();
    let refuseRefresh: () => void = () => undefined;
    as.on.set('/token', (_req, body, res) => {
      if (body.get('grant_type') === 'refresh_token') {
        refuseRefresh = () => void res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_grant' }));
        return;
      }
      json(res, { access_token: 'at-new-connection', token_type: 'Bearer', expires_in: 3600, refresh_token: 'rt-new-connection' });
    });
    const store = new MemoryStore({ maxEntries: 10_000 });
    const accounts = accountsFor(store, [{ path: '/gh/mcp', as, resource: 'https://up.test/mcp' }]);
    const route = accounts.routes.get('/gh/mcp')!;
    const owner = { issuer: ISSUER, subject: SUBJECT, routePath: '/gh/mcp' };
    const now = Date.now();
    await accounts.grants.save(owner, { accessToken: 'at-old', refreshToken: 'rt-old', obtainedAt: now - 3_590_000, expiresAt: now + 5_000, scopes: ['read'], connectedAt: now - 3_600_000, asIssuer: as.origin, resource: 'https://up.test/mcp' });

    const call = route.tokens.accessTokenFor(auth).catch((err: unknown) => err);
    await until(() => as.requests.some((r) => r.body.get('grant_type') === 'refresh_token'));
    // Meanwhile the user connects again (the connect page, or a consent), and it completes.
    const state = new URL(await route.flow.start(owner, 'b')).searchParams.get('state')!;
    await route.flow.finish(new URLSearchParams({ code: 'c', state }), 'b');
    expect((await accounts.grants.load(owner))?.accessToken).toBe('at-new-connection');
    refuseRefresh();
    await call;

    expect((await accounts.grants.load(owner))?.accessToken).toBe('at-new-connection');
  });

  it("the refresh lock is released only by its holder: a lock another replica took meanwhile stays", async () => {
    const as = await scriptedAs();
    let release: () => void = () => undefined;
    as.on.set('/token', (_req, _body, res) => {
      release = () => json(res, { access_token: 'at-2', token_type: 'Bearer', expires_in: 3600, refresh_token: 'rt-2' });
    });
    const store = new MemoryStore({ maxEntries: 10_000 });
    const accounts = accountsFor(store, [{ path: '/gh/mcp', as, resource: 'https://up.test/mcp' }]);
    const owner = { issuer: ISSUER, subject: SUBJECT, routePath: '/gh/mcp' };
    const now = Date.now();
    await accounts.grants.save(owner, { accessToken: 'at-old', refreshToken: 'rt-old', obtainedAt: now - 3_590_000, expiresAt: now + 5_000, scopes: ['read'], connectedAt: now, asIssuer: as.origin, resource: 'https://up.test/mcp' });
    const lock = upstreamRefreshLockKey(accounts.grants.keyOf(owner));
    const call = accounts.routes.get('/gh/mcp')!.tokens.accessTokenFor(auth);
    await until(() => as.requests.some((r) => r.path === '/token'));
    // Our lock expired and another replica holds it now.
    await store.set(lock, 'another-replica', 60_000);
    release();
    expect(await call).toBe('at-2');
    expect(await store.get(lock)).toBe('another-replica');
  });

  it('a connect callback whose token answer carries an oversized refresh token stores nothing', async () => {
    const as = await scriptedAs();
    as.on.set('/token', (_req, _body, res) => json(res, { access_token: 'at', token_type: 'Bearer', expires_in: 3600, refresh_token: 'r'.repeat(20_000) }));
    const store = new MemoryStore({ maxEntries: 10_000 });
    const accounts = accountsFor(store, [{ path: '/gh/mcp', as, resource: 'https://up.test/mcp' }]);
    const flow = accounts.routes.get('/gh/mcp')!.flow;
    const owner = { issuer: ISSUER, subject: SUBJECT, routePath: '/gh/mcp' };
    const state = new URL(await flow.start(owner, 'b')).searchParams.get('state')!;
    await expect(flow.finish(new URLSearchParams({ code: 'c', state }), 'b')).rejects.toThrow(/longer than/);
    expect(await accounts.grants.load(owner)).toBeUndefined();
  });

  it('property: an answer is passed on byte for byte up to the bound and refused past it, declared or streamed in any chunking', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 0, max: MAX_UPSTREAM_ANSWER_BYTES * 2 }), fc.integer({ min: 1, max: 20_000 }), fc.boolean(), async (size, chunk, declare) => {
        const body = Buffer.alloc(size, 0x61);
        const stream = new ReadableStream<Uint8Array>({
          start(controller) {
            for (let at = 0; at < size; at += chunk) controller.enqueue(body.subarray(at, at + chunk));
            controller.close();
          },
        });
        const headers = declare ? { 'content-length': String(size) } : undefined;
        const outcome = await bounded(new Response(stream, { status: 200, headers })).then(
          async (r) => (await r.text()).length,
          () => -1,
        );
        expect(outcome).toBe(size <= MAX_UPSTREAM_ANSWER_BYTES ? size : -1);
      }),
      { numRuns: 60 },
    );
  });

  it('property: a state is taken only at the callback of the route it was started for, in either direction', async () => {
    const [asA, asB] = [await scriptedAs(), await scriptedAs()];
    for (const as of [asA, asB]) as.on.set('/token', (_req, _body, res) => json(res, { access_token: `at-${as.origin}`, token_type: 'Bearer', expires_in: 3600 }));
    const store = new MemoryStore({ maxEntries: 10_000 });
    const accounts = accountsFor(store, [
      { path: '/a/mcp', as: asA, resource: 'https://up.test/mcp' },
      { path: '/b/mcp', as: asB, resource: 'https://up.test/mcp' },
    ]);
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('/a/mcp', '/b/mcp'), fc.constantFrom('/a/mcp', '/b/mcp'), fc.string({ minLength: 1, maxLength: 8 }), async (startedAt, callbackAt, subject) => {
        const owner = { issuer: ISSUER, subject, routePath: startedAt };
        const state = new URL(await accounts.routes.get(startedAt)!.flow.start(owner, 'b')).searchParams.get('state')!;
        const outcome = await accounts.routes.get(callbackAt)!.flow.finish(new URLSearchParams({ code: 'c', state }), 'b').then(
          (done) => done.owner.routePath,
          (err: unknown) => (err instanceof ConnectCallbackRefused ? 'refused' : String(err)),
        );
        expect(outcome).toBe(startedAt === callbackAt ? startedAt : 'refused');
        const grant = await accounts.grants.load(owner);
        if (startedAt === callbackAt) expect(grant?.asIssuer).toBe((startedAt === '/a/mcp' ? asA : asB).origin);
        await accounts.grants.delete(owner);
      }),
      { numRuns: 30 },
    );
  });

  it("property: however many starts some users make, every other user's newest pending connection survives", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 60 }), async (starters) => {
        const as = await scriptedAs();
        as.on.set('/token', (_req, _body, res) => json(res, { access_token: 'at', token_type: 'Bearer', expires_in: 3600 }));
        const store = new MemoryStore({ maxEntries: 40 });
        const flow = accountsFor(store, [{ path: '/gh/mcp', as, resource: 'https://up.test/mcp' }]).routes.get('/gh/mcp')!.flow;
        const bob = { issuer: ISSUER, subject: 'bob', routePath: '/gh/mcp' };
        const bobState = new URL(await flow.start(bob, 'bob-browser')).searchParams.get('state')!;
        for (const who of starters) await flow.start({ issuer: ISSUER, subject: `flooder-${who}`, routePath: '/gh/mcp' }, 'x');
        const done = await flow.finish(new URLSearchParams({ code: 'c', state: bobState }), 'bob-browser');
        expect(done.owner.subject).toBe('bob');
      }),
      { numRuns: 15 },
    );
  });
});
