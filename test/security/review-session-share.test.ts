/**
 * Review (round 3), [K81]: the memory store bounds a principal's session bindings per route
 * (memory-class-budgets.ts perOwner: a tenth of max_entries), so that "it takes ten principals
 * flooding together to push out another user's session". The owner there was the binding's value,
 * principalKey = [issuer, subject, client_id]: one user with eleven registered clients (DCR is open
 * to anyone) was eleven owners, and pushed every other user's session out of the class. Now the
 * value leads with the user (owned-value.ts) and the cap counts that. Fails while it counts clients.
 * Control: the same number of initializes from one client leaves bob's session alone.
 * The property runs on a real redis-server too, whose per-user share comes from the same function
 * (owner-shares.ts; before it, Redis had no share at all: test/security/k-redis-shares.test.ts).
 */
import fc from 'fast-check';
import type { AuthContext } from '../../src/auth/principal.js';
import { ownerValue } from '../../src/policy/owned-ids.js';
import { createSessionBinding } from '../../src/proxy/session-binding.js';
import { eventIdOwnerKey, taskOwnerKey } from '../../src/store/key-names.js';
import { memoryClassBudget } from '../../src/store/memory-class-budgets.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { perOwnerShare } from '../../src/store/owner-shares.js';
import { RedisStore } from '../../src/store/redis-store.js';
import type { Store } from '../../src/store/store.js';
import { randomUUID } from 'node:crypto';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { startLocalIssuer, type LocalIssuer } from '../helpers/local-issuer.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';

const PATH = '/s/mcp';
const RESOURCE = `https://mcp.example.test${PATH}`;
const INIT = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'r', version: '1' } } });
const LIST = JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' });

let issuer: LocalIssuer;
let up: ScriptedUpstream;
let gw: TestGateway;
let redis: RedisServer;

beforeAll(async () => {
  [issuer, up, redis] = await Promise.all([startLocalIssuer(), startScriptedUpstream({ sessions: true }), startRedisServer()]);
  gw = await startTestGateway({
    // 200 entries: a principal may hold 20 session bindings per route.
    'gateway.yaml': gatewayYaml({ log_level: 'warn', store: { kind: 'memory', max_entries: 200 } }),
    'route.yaml': {
      path: PATH,
      upstream: up.url,
      authorization_servers: [issuer.issuer],
      token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['ES256'] } },
    },
  });
}, 30_000);

afterAll(async () => {
  await gw?.stop();
  await Promise.all([issuer?.close(), up?.close(), redis?.stop()]);
});

async function post(token: string, body: string, session?: string): Promise<Response> {
  return fetch(`${gw.url}${PATH}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(session && { 'mcp-session-id': session }) },
    body,
  });
}

async function openSession(token: string): Promise<string> {
  const res = await post(token, INIT);
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return res.headers.get('mcp-session-id')!;
}

async function floodFrom(clients: string[], each: number): Promise<void> {
  for (const clientId of clients) {
    const token = await issuer.token({ audience: RESOURCE, sub: 'mallory', clientId });
    for (let i = 0; i < each; i++) await openSession(token);
  }
}

describe('[K81] a user does not multiply the per-principal session share by registering clients', () => {
  it('control: 220 sessions of one client of mallory leave bob his session', async () => {
    const bob = await issuer.token({ audience: RESOURCE, sub: 'bob', clientId: 'bobs-app' });
    const session = await openSession(bob);
    await floodFrom(['mallory-app-0'], 220);
    expect((await post(bob, LIST, session)).status).toBe(200);
  }, 120_000);

  it('11 clients of mallory × 20 sessions: bob keeps his session (the cap counts the user)', async () => {
    const bob = await issuer.token({ audience: RESOURCE, sub: 'bob', clientId: 'bobs-app' });
    const session = await openSession(bob);
    await floodFrom(Array.from({ length: 11 }, (_, i) => `mallory-app-${i + 1}`), 20);
    const res = await post(bob, LIST, session);
    expect(res.status).toBe(200);
  }, 120_000);

  // The same property on both backends: the memory store's budget and Redis's share come from one function (owner-shares.ts).
  const backends = [
    { name: 'the memory store', open: async (maxEntries: number): Promise<Store> => new MemoryStore({ maxEntries }) },
    { name: 'redis-server', open: async (maxEntries: number): Promise<Store> => new RedisStore({ url: redis.url, keyPrefix: `t:${randomUUID()}:`, commandTimeoutMs: 2000, shareBasis: maxEntries }) },
  ];
  it.each(backends)('property on $name: session, task and event-id records — a user over many clients keeps at most its share, and never evicts another user\'s', async (backend) => {
    // Each class's records written as the gateway writes them: a session binding by bind(), a task or event-id owner by its ownerValue.
    const write = (keyOf: (route: string, id: string) => string) => (store: Store, id: string, a: Principal) =>
      store.setIfAbsent(keyOf('/r', id), ownerValue(a as AuthContext), 3_600_000).then(() => undefined);
    const held = (keyOf: (route: string, id: string) => string) => async (store: Store, id: string, a: Principal) =>
      (await store.get(keyOf('/r', id))) === ownerValue(a as AuthContext);
    const classes = [
      {
        keyClass: 'session',
        write: (store: Store, id: string, a: Principal) => createSessionBinding(store).bind('/r', id, a as AuthContext),
        held: (store: Store, id: string, a: Principal) => createSessionBinding(store).check('/r', id, a as AuthContext).then(() => true, () => false),
      },
      { keyClass: 'task', write: write(taskOwnerKey), held: held(taskOwnerKey) },
      { keyClass: 'event-id', write: write(eventIdOwnerKey), held: held(eventIdOwnerKey) },
    ];
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...classes), fc.integer({ min: 20, max: 200 }), fc.integer({ min: 1, max: 30 }), fc.integer({ min: 1, max: 400 }), async (cls, maxEntries, clients, flood) => {
        const store = await backend.open(maxEntries);
        const perOwner = memoryClassBudget(cls.keyClass, maxEntries).perOwner!;
        expect(perOwnerShare(cls.keyClass, maxEntries)).toBe(perOwner);
        const bob = { issuer: 'iss', subject: 'bob', clientId: 'bobs-app' };
        const mallory = (i: number) => ({ issuer: 'iss', subject: 'mallory', clientId: `app-${i % clients}` });
        try {
          await cls.write(store, 'bob-0', bob);
          for (let i = 0; i < flood; i++) await cls.write(store, `m-${i}`, mallory(i));
          expect(await cls.held(store, 'bob-0', bob)).toBe(true);
          // The record stays bound to the exact client: another of mallory's clients does not hold it.
          if (clients > 1) expect(await cls.held(store, `m-${flood - 1}`, mallory(flood))).toBe(false);
          let live = 0;
          for (let i = 0; i < flood; i++) if (await cls.held(store, `m-${i}`, mallory(i))) live++;
          expect(live).toBe(Math.min(flood, perOwner));
        } finally {
          await store.close();
        }
      }),
      { numRuns: 60 },
    );
  }, 120_000);
});

type Principal = { issuer: string; subject: string; clientId: string };
