/**
 * The cross-replica refresh of `user_oauth` grants (DESIGN §8.1) once the access tokens have expired:
 * N users × 2 replicas × concurrent calls, the case that made the isolation property in
 * test/integration/user-oauth.test.ts run past its 240 s. Two replicas are two UpstreamAccounts (the
 * gateway's classes, unmodified) over one real redis-server (RedisStore). The upstream AS is a
 * scripted HTTP server (mocked: oidc-provider cannot be made slow, failing or silent on demand) that
 * behaves as oidc-provider does with rotation: each refresh token works once, a reused one is
 * `invalid_grant` and ends the whole family. Every call is timed; none may hang, each ends with its
 * own user's token or a clear error, and no call ever gets another user's token.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import { UpstreamAccounts } from '../../src/authorization-server/upstream-accounts/upstream-accounts.js';
import type { RouteConfig, UserOAuthConfig } from '../../src/config/types.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { RedisStore } from '../../src/store/redis-store.js';
import { UpstreamAccountRequired } from '../../src/upstream-auth/user-oauth.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { upstreamAccountsContext } from '../helpers/upstream-accounts-context.js';

const ISSUER = 'http://gateway.test';
const ROUTE = '/gh/mcp';
const RESOURCE = 'https://up.test/mcp';
const USERS = ['alice', 'bob', 'carol', 'dave'];
const CALLS_PER_USER_AND_REPLICA = 4;
/** The gateway's timeout for each upstream AS request in these tests. */
const AS_TIMEOUT_MS = 1_500;
/** Far past every bound the code has (a waiter's, the AS timeout): a call still pending then hangs. */
const HANG_MS = 45_000;

type Mode = 'answer' | 'fail' | 'silent';

/** A rotating AS: refresh token `rt-<user>-<n>` works once and gives `at-<user>-<n+1>` and `rt-<user>-<n+1>`; a reuse ends the family. */
class RotatingAs {
  mode: Mode = 'answer';
  delayMs = 300;
  /** false: an AS that keeps the refresh token (answers carry none), as GitHub's and Google's do. */
  rotate = true;
  /** Every RFC 7009 request: the token and its hint. */
  readonly revocations: { token: string; hint: string }[] = [];
  readonly refreshes = new Map<string, number>();
  readonly reused: string[] = [];
  readonly #next = new Map<string, number>();
  readonly #revoked = new Set<string>();
  readonly #server: Server = createServer((req, res) => this.#handle(req, res));
  origin = '';

  async start(): Promise<void> {
    await new Promise<void>((r) => this.#server.listen(0, '127.0.0.1', r));
    this.origin = `http://127.0.0.1:${(this.#server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((r) => this.#server.close(() => r()));
  }

  /** A connection's first tokens: at-<user>-0, rt-<user>-0. */
  connect(user: string): void {
    this.#next.set(user, 0);
    this.#revoked.delete(user);
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (this.mode === 'silent') return; // never answers: only the gateway's timeout ends the request
      const body = new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
      if (req.url === '/revoke') {
        this.revocations.push({ token: body.get('token') ?? '', hint: body.get('token_type_hint') ?? '' });
        return void res.writeHead(200).end();
      }
      setTimeout(() => this.#answer(body, res), this.delayMs);
    });
  }

  #answer(body: URLSearchParams, res: ServerResponse): void {
    if (this.mode === 'fail') return void res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'temporarily_unavailable' }));
    const [, user, n] = /^rt-(\w+)-(\d+)$/.exec(body.get('refresh_token') ?? '') ?? [];
    if (!user || this.#revoked.has(user) || this.#next.get(user) !== Number(n)) {
      if (user) {
        this.reused.push(`${user}:${n}`);
        this.#revoked.add(user);
      }
      return void res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_grant' }));
    }
    const next = Number(n) + 1;
    if (!this.rotate) {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      return void res.end(JSON.stringify({ access_token: `at-${user}-${next}`, token_type: 'Bearer', expires_in: 6 }));
    }
    this.#next.set(user, next);
    this.refreshes.set(user, (this.refreshes.get(user) ?? 0) + 1);
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    res.end(JSON.stringify({ access_token: `at-${user}-${next}`, token_type: 'Bearer', expires_in: 6, refresh_token: `rt-${user}-${next}` }));
  }
}

let redis: RedisServer;
const as = new RotatingAs();
const stores: RedisStore[] = [];

beforeAll(async () => {
  [redis] = await Promise.all([startRedisServer(), as.start()]);
}, 60_000);

afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await as.close();
  await redis?.stop();
});

/** Two replicas: the same configuration and key, each its own UpstreamAccounts and store connection, one redis. */
function replicas(timeoutMs = AS_TIMEOUT_MS): [UpstreamAccounts, UpstreamAccounts] {
  const keyPrefix = `race:${randomUUID()}:`;
  const key = randomBytes(32);
  const config: UserOAuthConfig = { kind: 'user_oauth', endpoints: { authorization: `${as.origin}/authorize`, token: `${as.origin}/token` }, clientId: 'gw', scopes: ['read'], resource: RESOURCE, sendResource: true, revocationEndpoint: `${as.origin}/revoke` };
  const one = () => {
    const store = new RedisStore({ url: redis.url, keyPrefix, commandTimeoutMs: 5_000 });
    stores.push(store);
    const ctx = upstreamAccountsContext(store, ISSUER);
    const route = { path: ROUTE, upstream: RESOURCE, upstreamAuth: config } as unknown as RouteConfig;
    return new UpstreamAccounts(ctx, [route], { keys: [{ id: 'k1', key }] } as never, { timeoutMs });
  };
  return [one(), one()];
}

const authOf = (subject: string) => ({ issuer: ISSUER, subject, clientId: 'app', scopes: [], expiresAt: 0, claims: {} }) as unknown as AuthContext;

/** Each user connected (rt-<user>-0) with an access token that expired a second ago. */
async function expiredGrants(accounts: UpstreamAccounts): Promise<void> {
  const now = Date.now();
  for (const user of USERS) {
    as.connect(user);
    const grant = { accessToken: `at-${user}-0`, refreshToken: `rt-${user}-0`, obtainedAt: now - 7_000, expiresAt: now - 1_000, scopes: ['read'], connectedAt: now - 7_000, asIssuer: as.origin, resource: RESOURCE };
    await accounts.grants.save({ issuer: ISSUER, subject: user, routePath: ROUTE }, grant);
  }
}

interface Outcome {
  user: string;
  replica: 'A' | 'B';
  ms: number;
  /** The token, `elicit`, `<status> <code>: <cause>`, or `hung`. */
  result: string;
}

/** Every user on both replicas at once, CALLS_PER_USER_AND_REPLICA each; each call timed, and `hung` when it outlives HANG_MS. */
async function stampede(A: UpstreamAccounts, B: UpstreamAccounts): Promise<Outcome[]> {
  const calls = USERS.flatMap((user) => (['A', 'B'] as const).flatMap((replica) => Array.from({ length: CALLS_PER_USER_AND_REPLICA }, () => ({ user, replica }))));
  return Promise.all(
    calls.map(async ({ user, replica }) => {
      const started = performance.now();
      const tokens = (replica === 'A' ? A : B).routes.get(ROUTE)!.tokens;
      let timer: NodeJS.Timeout | undefined;
      const hung = new Promise<string>((r) => (timer = setTimeout(() => r('hung'), HANG_MS)));
      const call = tokens.accessTokenFor(authOf(user)).then(
        (token) => token,
        (err: unknown) => (err instanceof UpstreamAccountRequired ? 'elicit' : err instanceof GatewayError ? `${err.status} ${err.code}: ${(err.cause as Error | undefined)?.message}` : `unexpected ${String(err)}`),
      );
      const result = await Promise.race([call, hung]).finally(() => clearTimeout(timer));
      return { user, replica, ms: Math.round(performance.now() - started), result };
    }),
  );
}

function timing(outcomes: Outcome[]): string {
  const ms = outcomes.map((o) => o.ms).sort((a, b) => a - b);
  return `${outcomes.length} calls: median ${ms[ms.length >> 1]} ms, max ${ms.at(-1)} ms; ${[...new Set(outcomes.map((o) => o.result.replace(/^at-\w+-\d+$/, 'own token')))].join(', ')}`;
}

/** Two fresh replicas, every user's token expired, the AS in `mode` (then answering again): the timed stampede, logged. */
async function expiredStampede(mode: Mode, opts: { timeoutMs?: number; delayMs?: number } = {}): Promise<{ outcomes: Outcome[]; A: UpstreamAccounts }> {
  const [A, B] = replicas(opts.timeoutMs);
  await expiredGrants(A);
  [as.mode, as.delayMs] = [mode, opts.delayMs ?? 300];
  as.refreshes.clear();
  as.reused.length = 0;
  const outcomes = await stampede(A, B).finally(() => ([as.mode, as.delayMs] = ['answer', 300]));
  console.info(`[refresh-race] ${mode} AS${opts.delayMs ? ` (${opts.delayMs} ms)` : ''}: ${timing(outcomes)}`);
  return { outcomes, A };
}

/** Each call has its own user's first refreshed token. */
function expectOwnNewTokens(outcomes: Outcome[]): void {
  for (const o of outcomes) expect(o.result, `${o.user} on ${o.replica} after ${o.ms} ms`).toBe(`at-${o.user}-1`);
}

/** The holder's callers get its failure; the other replica's waiters learn it when the lock is let go, not after a fixed wait. */
function expectOnly502s(outcomes: Outcome[]): void {
  for (const o of outcomes) expect(o.result, `${o.user} on ${o.replica} after ${o.ms} ms`).toMatch(/^502 bad_gateway: (upstream token refresh failed|another replica could not refresh)/);
  expect(outcomes.some((o) => o.result.includes('another replica could not refresh'))).toBe(true);
}

describe('[G33] user_oauth: expired tokens, N users × 2 replicas × concurrent calls (the cross-replica refresh lock)', () => {
  it('[G33] every call ends with its own user\'s new token; one refresh per user across both replicas; no refresh token reused', async () => {
    const { outcomes } = await expiredStampede('answer');
    expectOwnNewTokens(outcomes);
    expect(Object.fromEntries(as.refreshes)).toEqual(Object.fromEntries(USERS.map((u) => [u, 1])));
    expect(as.reused).toEqual([]);
  }, 60_000);

  it('[G33] the lock holder\'s refresh fails (AS 503): every waiter on the other replica ends with 502, none hangs, no token is handed out', async () => {
    const { outcomes, A } = await expiredStampede('fail');
    expectOnly502s(outcomes);
    // The grants stand (a 5xx is not a refusal): the next call refreshes them.
    expect(await A.routes.get(ROUTE)!.tokens.accessTokenFor(authOf('bob'))).toBe('at-bob-1');
  }, 60_000);

  it('[G33] the AS never answers: the holder ends at the AS timeout, every waiter within its bound, each with 502', async () => {
    expectOnly502s((await expiredStampede('silent')).outcomes);
  }, 60_000);

  it('[G33] a holder slower than the old fixed 10 s wait (within its AS timeout): the other replica\'s waiters get the new token, not a 502', async () => {
    expectOwnNewTokens((await expiredStampede('answer', { timeoutMs: 30_000, delayMs: 10_500 })).outcomes);
  }, 90_000);
});

describe('[G33] user_oauth: what a refresh that lost its race is revoked with', () => {
  it('[G33] an AS that keeps the refresh token: the dropped refresh\'s access token is revoked, never the refresh token the new connection still holds', async () => {
    const [A] = replicas();
    await expiredGrants(A);
    [as.rotate, as.delayMs] = [false, 800];
    as.revocations.length = 0;
    try {
      const refreshing = A.routes.get(ROUTE)!.tokens.accessTokenFor(authOf('alice')).catch(() => undefined);
      // While the AS answers, alice connects again and the AS hands her the same refresh token.
      await new Promise((r) => setTimeout(r, 200));
      const now = Date.now();
      await A.grants.save({ issuer: ISSUER, subject: 'alice', routePath: ROUTE }, { accessToken: 'at-alice-new', refreshToken: 'rt-alice-0', obtainedAt: now, expiresAt: now + 60_000, scopes: ['read'], connectedAt: now, asIssuer: as.origin, resource: RESOURCE });
      expect(await refreshing).toBe('at-alice-new');
      const deadline = Date.now() + 10_000;
      while (as.revocations.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(as.revocations).toEqual([{ token: 'at-alice-1', hint: 'access_token' }]);
    } finally {
      [as.rotate, as.delayMs] = [true, 300];
    }
  }, 60_000);
});
