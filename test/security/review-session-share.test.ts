/**
 * Review (round 3), [K81]: the memory store bounds a principal's session bindings per route
 * (memory-class-budgets.ts perOwner: a tenth of max_entries), so that "it takes ten principals
 * flooding together to push out another user's session". The owner there was the binding's value,
 * principalKey = [issuer, subject, client_id]: one user with eleven registered clients (DCR is open
 * to anyone) was eleven owners, and pushed every other user's session out of the class. Now the
 * value leads with the user (owned-value.ts) and the cap counts that. Fails while it counts clients.
 * Control: the same number of initializes from one client leaves bob's session alone.
 */
import fc from 'fast-check';
import type { AuthContext } from '../../src/auth/principal.js';
import { ownerValue } from '../../src/policy/owned-ids.js';
import { createSessionBinding } from '../../src/proxy/session-binding.js';
import { eventIdOwnerKey, taskOwnerKey } from '../../src/store/key-names.js';
import { memoryClassBudget } from '../../src/store/memory-class-budgets.js';
import { MemoryStore } from '../../src/store/memory-store.js';
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

beforeAll(async () => {
  [issuer, up] = await Promise.all([startLocalIssuer(), startScriptedUpstream({ sessions: true })]);
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
  await Promise.all([issuer?.close(), up?.close()]);
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

  it('property: session, task and event-id records — a user over many clients keeps at most its share, and never evicts another user\'s', async () => {
    // Each class's records written as the gateway writes them: a session binding by bind(), a task or event-id owner by its ownerValue.
    const write = (keyOf: (route: string, id: string) => string) => (store: MemoryStore, id: string, a: Principal) =>
      store.setIfAbsent(keyOf('/r', id), ownerValue(a as AuthContext), 3_600_000).then(() => undefined);
    const held = (keyOf: (route: string, id: string) => string) => async (store: MemoryStore, id: string, a: Principal) =>
      (await store.get(keyOf('/r', id))) === ownerValue(a as AuthContext);
    const classes = [
      {
        keyClass: 'session',
        write: (store: MemoryStore, id: string, a: Principal) => createSessionBinding(store).bind('/r', id, a as AuthContext),
        held: (store: MemoryStore, id: string, a: Principal) => createSessionBinding(store).check('/r', id, a as AuthContext).then(() => true, () => false),
      },
      { keyClass: 'task', write: write(taskOwnerKey), held: held(taskOwnerKey) },
      { keyClass: 'event-id', write: write(eventIdOwnerKey), held: held(eventIdOwnerKey) },
    ];
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...classes), fc.integer({ min: 20, max: 200 }), fc.integer({ min: 1, max: 30 }), fc.integer({ min: 1, max: 400 }), async (cls, maxEntries, clients, flood) => {
        const store = new MemoryStore({ maxEntries });
        const perOwner = memoryClassBudget(cls.keyClass, maxEntries).perOwner!;
        const bob = { issuer: 'iss', subject: 'bob', clientId: 'bobs-app' };
        const mallory = (i: number) => ({ issuer: 'iss', subject: 'mallory', clientId: `app-${i % clients}` });
        await cls.write(store, 'bob-0', bob);
        for (let i = 0; i < flood; i++) await cls.write(store, `m-${i}`, mallory(i));
        expect(await cls.held(store, 'bob-0', bob)).toBe(true);
        // The record stays bound to the exact client: another of mallory's clients does not hold it.
        if (clients > 1) expect(await cls.held(store, `m-${flood - 1}`, mallory(flood))).toBe(false);
        let live = 0;
        for (let i = 0; i < flood; i++) if (await cls.held(store, `m-${i}`, mallory(i))) live++;
        expect(live).toBe(Math.min(flood, perOwner));
      }),
      { numRuns: 60 },
    );
  });
});

type Principal = { issuer: string; subject: string; clientId: string };
