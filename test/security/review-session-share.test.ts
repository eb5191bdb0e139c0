/**
 * Review (round 3), [K81]-shaped: the memory store bounds a principal's session bindings per route
 * (memory-class-budgets.ts perOwner: a tenth of max_entries), so that "it takes ten principals
 * flooding together to push out another user's session". The owner there is the binding's value,
 * principalKey = [issuer, subject, client_id]: one user with eleven registered clients (DCR is open
 * to anyone) is eleven owners, and pushes every other user's session out of the class.
 * Control: the same number of initializes from one client leaves bob's session alone.
 */
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

describe('review: a user multiplies the per-principal session share by registering clients', () => {
  it('control: 220 sessions of one client of mallory leave bob his session', async () => {
    const bob = await issuer.token({ audience: RESOURCE, sub: 'bob', clientId: 'bobs-app' });
    const session = await openSession(bob);
    await floodFrom(['mallory-app-0'], 220);
    expect((await post(bob, LIST, session)).status).toBe(200);
  }, 120_000);

  it('11 clients of mallory × 20 sessions: bob\'s session is gone (404)', async () => {
    const bob = await issuer.token({ audience: RESOURCE, sub: 'bob', clientId: 'bobs-app' });
    const session = await openSession(bob);
    await floodFrom(Array.from({ length: 11 }, (_, i) => `mallory-app-${i + 1}`), 20);
    const res = await post(bob, LIST, session);
    console.log('bob after the flood:', res.status);
    expect(res.status).toBe(200);
  }, 120_000);
});
