/**
 * [K75] (issue 20 item 13) A refresh whose answer was lost and that its client retries shortly
 * after does not end the grant; reuse after the grace, or with another DPoP key, still does.
 * - On a real redis-server stalled (SIGSTOP) at each store call of a rotation in turn: the
 *   gateway gives up (503), Redis runs the command late, and the client's retry of the same refresh
 *   token gets tokens that work; the grant is not revoked.
 * - A fast-check property over sequences of presentations (the current token, a retry of the one
 *   before within or after the grace, with the same or another key) against a model of the family.
 * - Through a real gateway (the AS's test option shortens the grace): a retry answered, reuse
 *   after the grace revokes the grant.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { Grants, REFRESH_RETRY_GRACE_MS, type GrantInfo } from '../../src/authorization-server/tokens/grants.js';
import { RevokedGrants } from '../../src/authorization-server/tokens/revoked-grants.js';
import { createLogger } from '../../src/observability/logger.js';
import { Metrics } from '../../src/observability/metrics.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { RedisStore } from '../../src/store/redis-store.js';
import { StoreUnavailableError, type Store } from '../../src/store/store.js';
import { headlessUser, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { codeRequestUrl, newVerifier, registerPublicClient, type PublicClient } from '../helpers/oauth-requests.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/security-fixtures.js';

const TTL_MS = 3_600_000;
const COMMAND_TIMEOUT_MS = 300;
const STALL_MS = 1_200;
const quiet = () => createLogger('silent', new Writable({ write: (_c, _e, cb) => cb() }));
const grantInfo = (jkt?: string): GrantInfo => ({ grantId: randomUUID(), clientId: 'app', subject: 'alice', scopes: ['mcp:read'], resource: 'https://gw.example/mcp', ...(jkt !== undefined && { jkt }) });

async function grantsOn(store: Store, options: ConstructorParameters<typeof Grants>[3] = {}) {
  const revokedGrants = new RevokedGrants({ store, issuer: `https://as-${randomUUID()}.example`, accessTokenTtlMs: 600_000, logger: quiet(), metrics: new Metrics({ defaultMetrics: false }) });
  await revokedGrants.start();
  revokedGrants.close();
  return new Grants(store, TTL_MS, revokedGrants, options);
}

const outcome = (rotation: Promise<unknown>) =>
  rotation.then(
    () => 'ok' as const,
    (err: unknown) => (err instanceof StoreUnavailableError ? ('unavailable' as const) : err instanceof GatewayError ? (err.description.includes('grant is revoked') ? ('reuse' as const) : ('invalid' as const)) : ('other' as const)),
  );

describe('[K75] a Redis stall during a rotation, then the client retries', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedisServer();
  });
  afterAll(async () => {
    await redis?.stop();
  });

  /** Which store call of the rotation stalls: its n-th call after the lookup and revocation check. */
  it.each([
    ['the family read', 'get', 2],
    ['the new token written', 'set', 0],
    ['the family compare-and-set (run late by Redis)', 'compareAndSet', 0],
  ] as const)('[K75] stalled at %s: the rotation fails (503), the retry by the same client and key gets working tokens, nothing is revoked', async (_name, method, skip) => {
    const store = new RedisStore({ url: redis.url, keyPrefix: `k75:${randomUUID()}:`, commandTimeoutMs: COMMAND_TIMEOUT_MS });
    try {
      const grants = await grantsOn(store);
      const grant = grantInfo('jkt-1');
      const first = await grants.startFamily(grant);
      // The stall: redis-server stopped just before the chosen call is sent.
      let seen = 0;
      let armed = true;
      const stalling = new Proxy(store, {
        get: (target, name: keyof Store) => {
          const original = (target[name] as (...args: unknown[]) => Promise<unknown>).bind(target);
          if (name !== method) return original;
          return async (...args: unknown[]) => {
            if (armed && seen++ === skip) {
              armed = false;
              await redis.pause(STALL_MS);
            }
            return original(...args);
          };
        },
      });
      const stalledGrants = await grantsOn(stalling);
      expect(await outcome(stalledGrants.rotate(first, 'app', 'jkt-1'))).toBe('unavailable');
      // Redis wakes and runs what was queued (ahead of anything sent later on the same connection); then the client's retry.
      await redis.resume();
      const retried = await grants.rotate(first, 'app', 'jkt-1');
      expect(await grants.isRevoked(grant.grantId)).toBe(false);
      const next = await grants.rotate(retried.refreshToken, 'app', 'jkt-1');
      expect(next.grant.grantId).toBe(grant.grantId);
      expect(await grants.isRevoked(grant.grantId)).toBe(false);
    } finally {
      await store.close();
    }
  }, 30_000);

  it('[K75] the same retry with another DPoP key, or after the grace, is reuse: the grant is revoked', async () => {
    const store = new RedisStore({ url: redis.url, keyPrefix: `k75:${randomUUID()}:`, commandTimeoutMs: COMMAND_TIMEOUT_MS });
    try {
      let clock = Date.now();
      const grants = await grantsOn(store, { now: () => clock });
      for (const [retry, expected] of [
        [(first: string) => grants.rotate(first, 'app', 'jkt-other'), 'reuse'],
        [(first: string) => ((clock += REFRESH_RETRY_GRACE_MS + 1), grants.rotate(first, 'app')), 'reuse'],
        [(first: string) => ((clock += REFRESH_RETRY_GRACE_MS - 1), grants.rotate(first, 'app')), 'ok'],
      ] as const) {
        const grant = grantInfo();
        const first = await grants.startFamily(grant);
        const { refreshToken: successor } = await grants.rotate(first, 'app');
        expect(await outcome(retry(first))).toBe(expected);
        expect(await grants.isRevoked(grant.grantId)).toBe(expected === 'reuse');
        // The successor never reached the client: once the retry was answered it is stale, and presented it is reuse.
        if (expected === 'ok') expect(await outcome(grants.rotate(successor, 'app'))).toBe('reuse');
      }
    } finally {
      await store.close();
    }
  });
});

describe('[K75] any sequence of presentations (fast-check, against a model of the family)', () => {
  type Step = { token: 'current' | 'previous' | 'older'; sameKey: boolean; elapsedMs: number };
  const step: fc.Arbitrary<Step> = fc.record({
    token: fc.constantFrom('current', 'current', 'previous', 'older'),
    sameKey: fc.boolean(),
    elapsedMs: fc.oneof(fc.integer({ min: 0, max: REFRESH_RETRY_GRACE_MS }), fc.integer({ min: REFRESH_RETRY_GRACE_MS + 1, max: 10 * REFRESH_RETRY_GRACE_MS })),
  });

  it('[K75] the grant ends exactly at the first reuse: a token neither current nor the previous one retried in the grace with its key', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 15 }), async (steps) => {
        let clock = 1_000_000;
        const grants = await grantsOn(new MemoryStore({ maxEntries: 10_000 }), { now: () => clock });
        const grant = grantInfo();
        // The model: every token issued in order, the current one, and the one it replaced (when, with which key).
        const issued = [await grants.startFamily(grant)];
        let current = issued[0]!;
        let previous: { token: string; at: number; key: string } | undefined;
        let revoked = false;
        for (const { token, sameKey, elapsedMs } of steps) {
          clock += elapsedMs;
          const presented = token === 'current' ? current : token === 'previous' ? previous?.token : issued.find((t) => t !== current && t !== previous?.token);
          if (presented === undefined) continue;
          const key = sameKey ? 'k1' : 'k2';
          const result = await grants.rotate(presented, 'app', key).then(
            (r) => r.refreshToken,
            (err: GatewayError) => err.description,
          );
          const retry = previous !== undefined && presented === previous.token && clock - previous.at <= REFRESH_RETRY_GRACE_MS && previous.key === key;
          if (revoked) {
            expect(result).toBe('The refresh token is invalid, expired or revoked');
          } else if (presented === current || retry) {
            expect(issued).not.toContain(result);
            if (presented === current) previous = { token: presented, at: clock, key };
            issued.push(result);
            current = result;
          } else {
            expect(result).toBe('The refresh token was already used: the grant is revoked');
            revoked = true;
          }
          expect(await grants.isRevoked(grant.grantId)).toBe(revoked);
        }
      }),
      { numRuns: 200 },
    );
  }, 60_000);
});

describe('[K75] through the gateway: a retried refresh is answered, reuse after the grace revokes', () => {
  const GRACE_MS = 400;
  let up: RecordingUpstream;
  let gateway: AsGateway;
  let client: PublicClient;
  beforeAll(async () => {
    up = await startRecordingUpstream();
    gateway = await startAsGateway({ upstream: `${up.origin}/mcp`, options: { refreshRetryGraceMs: GRACE_MS } });
    client = await registerPublicClient(gateway.issuer, 'k75 app');
  });
  afterAll(async () => {
    await gateway?.stop();
    await up?.close();
  });

  const refresh = async (refreshToken: string) => {
    const res = await fetch(`${gateway.issuer}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.id }) });
    return { status: res.status, json: (await res.json()) as Record<string, string> };
  };

  it('[K75] the answer lost, the same refresh token again within the grace: 200 and a working token; after the grace: 400 and the grant revoked', async () => {
    const verifier = newVerifier();
    const url = codeRequestUrl(gateway.issuer, { client, verifier, state: 's', resource: `${gateway.issuer}/everything/mcp`, scope: 'mcp:read' });
    const code = (await followAuthorization(url, client.redirectUri, { onPage: headlessUser('lou') })).searchParams.get('code')!;
    const redeemed = await fetch(`${gateway.issuer}/token`, { method: 'POST', body: new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri, client_id: client.id }) });
    const t0 = ((await redeemed.json()) as Record<string, string>).refresh_token!;
    expect((await refresh(t0)).status).toBe(200); // this answer is "lost"
    const retried = await refresh(t0);
    expect(retried.status, JSON.stringify(retried.json)).toBe(200);
    const t2 = retried.json.refresh_token!;
    await new Promise((r) => setTimeout(r, GRACE_MS + 100));
    const late = await refresh(t0);
    expect(late.json.error).toBe('invalid_grant');
    expect((await refresh(t2)).json.error).toBe('invalid_grant');
  });
});
