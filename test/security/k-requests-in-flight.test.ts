/**
 * Issue 26 item 2, DESIGN.md §8.3, review of 2026-11-29: one user held 300 long `tools/call` POSTs
 * (event-stream answers, never timed out) and took every file descriptor of a gateway limited to
 * 400; bob and `/healthz` got ECONNRESET. [K80]: every POST of a user (issuer + subject, whatever
 * its client) counts in a per-route share of requests in flight (`limits.max_requests_in_flight_per_user`)
 * until its answer ends or the client leaves; beyond it, 429 with Retry-After and a JSON body,
 * nothing forwarded. End to end against server-everything over Streamable HTTP and legacy HTTP+SSE (its
 * `trigger-long-running-operation`) and the stdio fixture (`sleep`), plus a fast-check property of
 * the counting. Fails without the share: alice's extra requests are forwarded (200).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InFlightCounts } from '../../src/proxy/in-flight-share.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { FIXTURE_SERVER } from '../helpers/stdio-stage.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';
import { waitFor } from '../helpers/wait.js';

const HTTP = '/everything/mcp';
const STDIO = '/fixture/mcp';
const LEGACY = '/legacy/mcp';
const SHARE = 3;
const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'k80', version: '1' } } };
const LONG_CALL: Record<string, unknown> = {
  [HTTP]: { name: 'trigger-long-running-operation', arguments: { duration: 300, steps: 300 } },
  [STDIO]: { name: 'sleep', arguments: { ms: 300_000 } },
  [LEGACY]: { name: 'trigger-long-running-operation', arguments: { duration: 300, steps: 300 } },
};

let issuer: TestIssuer;
let everything: UpstreamHandle;
/** server-everything over the legacy HTTP+SSE transport: the gateway's POST waits for the answers from its GET stream. */
let everythingSse: UpstreamHandle;
let gw: TestGateway;
const leaving = new AbortController();

beforeAll(async () => {
  [issuer, everything, everythingSse] = await Promise.all([startTestIssuer('ES256'), startEverythingServer('streamableHttp'), startEverythingServer('sse')]);
  const limits = { max_requests_in_flight_per_user: SHARE };
  gw = await startTestGateway({
    'gateway.yaml': gatewayYaml({ log_level: 'warn' }),
    'http.yaml': jwtRoute(HTTP, everything.url, issuer, { limits }),
    'legacy.yaml': jwtRoute(LEGACY, '', issuer, { upstream: { sse: { url: everythingSse.url } }, limits }),
    'stdio.yaml': jwtRoute(STDIO, '', issuer, { upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER, 'probe'] } }, limits }),
  });
}, 60_000);

afterAll(async () => {
  leaving.abort();
  await gw?.stop();
  await Promise.allSettled([issuer?.close(), everything?.close(), everythingSse?.close()]);
});

const token = (path: string, sub: string, client: string) =>
  issuer.mint({ sub, client_id: client, aud: resourceOf(path), scope: 'mcp:read mcp:write', exp: Math.floor(Date.now() / 1000) + 3600 });

async function post(path: string, bearer: string, body: unknown, session?: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${gw.url}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${bearer}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      ...(session && { 'mcp-session-id': session }),
    },
    body: JSON.stringify(body),
    signal,
  });
}

async function openSession(path: string, bearer: string): Promise<string> {
  const res = await post(path, bearer, INITIALIZE);
  expect(res.status).toBe(200);
  const session = res.headers.get('mcp-session-id')!;
  await res.text();
  (await post(path, bearer, { jsonrpc: '2.0', method: 'notifications/initialized' }, session)).body?.cancel();
  return session;
}

let pings = 0;
/** Status of a quick `ping` on the session; the body read, so it holds nothing after. */
async function ping(path: string, bearer: string, session: string): Promise<number> {
  // Ids distinct: a session refuses a second request in flight under the same id (400).
  const res = await post(path, bearer, { jsonrpc: '2.0', id: `ping-${++pings}`, method: 'ping' }, session);
  await res.text();
  return res.status;
}

describe.each([HTTP, LEGACY, STDIO])('[K80] requests in flight are bounded per user on %s', (path) => {
  it(`[K80] alice at her share (${SHARE}) gets 429 through any of her clients; bob and /healthz are served; room comes back when one ends`, async () => {
    const [aliceA, aliceB, bob] = await Promise.all([token(path, 'alice', 'app-a'), token(path, 'alice', 'app-b'), token(path, 'bob', 'app-a')]);
    const session = await openSession(path, aliceA);
    const calls = Array.from({ length: SHARE }, (_, i) => {
      const ends = new AbortController();
      leaving.signal.addEventListener('abort', () => ends.abort());
      const answer = post(path, aliceA, { jsonrpc: '2.0', id: 100 + i, method: 'tools/call', params: LONG_CALL[path] }, session, ends.signal).catch(() => undefined);
      return { ends, answer };
    });
    // Her long calls are in flight once a quick request of hers is refused.
    await waitFor(async () => (await ping(path, aliceA, session)) === 429, 20_000, 'alice at her share');

    // Another of her clients, even a new session's initialize: refused before anything is forwarded.
    const viaB = await post(path, aliceB, INITIALIZE);
    expect(viaB.status).toBe(429);
    expect(Number(viaB.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(viaB.headers.get('content-type')).toMatch(/^application\/json/);
    expect(viaB.headers.get('mcp-session-id')).toBeNull();
    expect(await viaB.json()).toMatchObject({ error: 'too_many_requests' });

    // Bob has a share of his own; /healthz is the gateway's.
    const bobSession = await openSession(path, bob);
    expect(await ping(path, bob, bobSession)).toBe(200);
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);

    // One of alice's answers ends (she leaves it): room for one more.
    calls[0]!.ends.abort();
    await waitFor(async () => (await ping(path, aliceA, session)) === 200, 20_000, 'room after one call ends');
    for (const c of calls) c.ends.abort();
    await Promise.all(calls.map((c) => c.answer));
    // All gone: her whole share again.
    await waitFor(async () => (await Promise.all(Array.from({ length: SHARE }, () => ping(path, aliceA, session)))).every((s) => s === 200), 20_000, 'whole share back');
  }, 90_000);
});

describe('[K80] the in-flight share over interleaved starts and ends of several users', () => {
  const users = ['alice', 'bob', 'carol', 'dave'];
  const step = fc.record({ user: fc.constantFrom(...users), start: fc.boolean() });
  it('[K80] nobody ever holds more than the share, and a user under it is never refused', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 6 }), fc.array(step, { maxLength: 300 }), (share, steps) => {
        const counts = new InFlightCounts(share);
        const held = new Map<string, number>();
        for (const { user, start } of steps) {
          const mine = held.get(user) ?? 0;
          if (start) {
            // Admitted exactly when under the share, whatever the others hold.
            expect(counts.take(user)).toBe(mine < share);
            if (mine < share) held.set(user, mine + 1);
          } else if (mine > 0) {
            counts.release(user);
            held.set(user, mine - 1);
          }
          for (const u of users) {
            expect(counts.of(u)).toBe(held.get(u) ?? 0);
            expect(counts.of(u)).toBeLessThanOrEqual(share);
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
