/**
 * Group K, the built-in AS's /token (issue 20 items 10 and 11), on a real gateway with the dev login:
 * - [K72] a DPoP proof's `jti` (a never-evicted class) is written only once the request is known
 *   valid: a flood of invalid /token requests with fresh proofs writes no marker (any kind of
 *   invalid request, a fast-check property over the recording store), and 2,050 of them against a
 *   memory store of 2,000 entries leave every user's DPoP requests working;
 * - [K79] valid /token requests spend the user's share of DPoP markers, the same share its routes
 *   spend: past it 429 for that user alone, at /token and at the routes;
 * - [K73] a replayed authorization code revokes its grant only when presented as its own client
 *   would present it: that client, its PKCE verifier and its DPoP key (all eight combinations).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { devAuthorizationServer } from '../helpers/gateway-config.js';
import { headlessUser, startAsGateway, startBoundedAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { dpopKey, proof, type DpopKey } from '../helpers/dpop.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { codeRequestUrl, newVerifier, registerPublicClient, type PublicClient } from '../helpers/oauth-requests.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/security-fixtures.js';

const ROUTE = '/everything/mcp';
/** A first request any MCP server answers with 200, stateful or not. */
const INITIALIZE = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'k72', version: '1' } } });
/** The flood limits out of the way: what is measured is the store, not the limiter. */
const NO_FLOOD_LIMITS = { rate_limits: { token: { requests: 1_000_000, window: '1m' } } };

interface TokenAnswer {
  status: number;
  json: Record<string, string>;
}

async function postToken(issuer: string, params: Record<string, string>, headers: Record<string, string> = {}): Promise<TokenAnswer> {
  const res = await fetch(`${issuer}/token`, { method: 'POST', headers, body: new URLSearchParams(params) });
  return { status: res.status, json: (await res.json()) as Record<string, string> };
}

const tokenProof = (issuer: string, key: DpopKey) => proof(key, { htm: 'POST', htu: `${issuer}/token` });

/** The dev-login flow of a public client, the code bound to `key` (dpop_jkt) when given. */
async function obtainCode(issuer: string, client: PublicClient, user: string, key?: DpopKey): Promise<{ code: string; verifier: string }> {
  const verifier = newVerifier();
  const url = codeRequestUrl(issuer, { client, verifier, state: 's', resource: `${issuer}${ROUTE}`, scope: 'mcp:read' });
  if (key) url.searchParams.set('dpop_jkt', key.jkt);
  const callback = await followAuthorization(url, client.redirectUri, { onPage: headlessUser(user) });
  const code = callback.searchParams.get('code');
  expect(code, callback.href).toBeTruthy();
  return { code: code!, verifier };
}

const redeem = (issuer: string, client: PublicClient, code: { code: string; verifier: string }, key?: DpopKey) =>
  Promise.all([key && tokenProof(issuer, key)]).then(([dpop]) =>
    postToken(issuer, { grant_type: 'authorization_code', code: code.code, code_verifier: code.verifier, redirect_uri: client.redirectUri, client_id: client.id }, dpop ? { dpop } : {}),
  );

async function callRoute(issuer: string, accessToken: string, key: DpopKey): Promise<number> {
  const dpop = await proof(key, { htm: 'POST', htu: `${issuer}${ROUTE}`, token: accessToken });
  const res = await fetch(`${issuer}${ROUTE}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `DPoP ${accessToken}`, dpop },
    body: INITIALIZE,
  });
  await res.arrayBuffer();
  return res.status;
}

let up: RecordingUpstream;
let gateway: AsGateway;
let client: PublicClient;
let other: PublicClient;

beforeAll(async () => {
  up = await startRecordingUpstream();
  gateway = await startAsGateway({ upstream: `${up.origin}/mcp`, authorizationServer: NO_FLOOD_LIMITS });
  [client, other] = await Promise.all([registerPublicClient(gateway.issuer, 'k72 app'), registerPublicClient(gateway.issuer, 'k72 other app')]);
});

afterAll(async () => {
  await gateway?.stop();
  await up?.close();
});

const markersWritten = () => gateway.recording.writes.filter((w) => w.key.startsWith('dpop-jti:')).length;

describe('[K72] /token writes a DPoP replay marker only for a request known valid', () => {
  /** Invalid token requests of every kind, each with a fresh, valid proof: none may leave a marker. */
  type Invalid = 'unknown refresh token' | "another client's refresh token" | 'unknown code' | 'wrong verifier' | "another client's code" | 'unknown client' | 'no grant type' | 'unsupported grant type';
  const KINDS: Invalid[] = ['unknown refresh token', "another client's refresh token", 'unknown code', 'wrong verifier', "another client's code", 'unknown client', 'no grant type', 'unsupported grant type'];

  it('[K72] any sequence of invalid requests with fresh proofs (a fast-check property) writes no marker, and the real ones still work after', async () => {
    const key = await dpopKey();
    const owned = await redeem(gateway.issuer, client, await obtainCode(gateway.issuer, client, 'kim', key), key);
    expect(owned.status).toBe(200);
    const pending = await obtainCode(gateway.issuer, client, 'kim');
    const paramsOf = (kind: Invalid, noise: string): Record<string, string> => {
      switch (kind) {
        case 'unknown refresh token': return { grant_type: 'refresh_token', refresh_token: noise, client_id: client.id };
        case "another client's refresh token": return { grant_type: 'refresh_token', refresh_token: owned.json.refresh_token!, client_id: other.id };
        case 'unknown code': return { grant_type: 'authorization_code', code: noise, code_verifier: newVerifier(), redirect_uri: client.redirectUri, client_id: client.id };
        case 'wrong verifier': return { grant_type: 'authorization_code', code: pending.code, code_verifier: newVerifier(), redirect_uri: client.redirectUri, client_id: client.id };
        case "another client's code": return { grant_type: 'authorization_code', code: pending.code, code_verifier: pending.verifier, redirect_uri: other.redirectUri, client_id: other.id };
        case 'unknown client': return { grant_type: 'refresh_token', refresh_token: noise, client_id: `nobody-${noise}` };
        case 'no grant type': return { refresh_token: noise, client_id: client.id };
        case 'unsupported grant type': return { grant_type: 'password', username: noise, password: noise, client_id: client.id };
      }
    };
    const before = markersWritten();
    await fc.assert(
      fc.asyncProperty(fc.array(fc.tuple(fc.constantFrom(...KINDS), fc.string({ minLength: 1, maxLength: 40 })), { minLength: 1, maxLength: 12 }), async (requests) => {
        for (const [kind, noise] of requests) {
          const answer = await postToken(gateway.issuer, paramsOf(kind, noise), { dpop: await tokenProof(gateway.issuer, key) });
          expect(answer.status, `${kind}: ${JSON.stringify(answer.json)}`).toBeGreaterThanOrEqual(400);
          expect(answer.status).toBeLessThan(500);
        }
        expect(markersWritten(), 'a marker written by an invalid request').toBe(before);
      }),
      { numRuns: 25 },
    );
    // The code and the refresh token were never spent by any of it.
    expect((await redeem(gateway.issuer, client, pending)).status).toBe(200);
    const refreshed = await postToken(gateway.issuer, { grant_type: 'refresh_token', refresh_token: owned.json.refresh_token!, client_id: client.id }, { dpop: await tokenProof(gateway.issuer, key) });
    expect(refreshed.status, JSON.stringify(refreshed.json)).toBe(200);
    expect(markersWritten()).toBe(before + 1);
  }, 120_000);

  it('[K72] 2,050 refresh_token=x requests with fresh proofs on a memory store of 2,000 entries: all 400, and every user\'s DPoP requests still work', async () => {
    const bounded = await startBoundedAsGateway(2000, { authorization_server: devAuthorizationServer(NO_FLOOD_LIMITS) });
    try {
      const issuer = bounded.issuer;
      const flooder = await registerPublicClient(issuer, 'flooder');
      const floodKey = await dpopKey();
      const statuses = new Map<number, number>();
      for (let batch = 0; batch < 41; batch++) {
        const answers = await Promise.all(
          Array.from({ length: 50 }, async () => postToken(issuer, { grant_type: 'refresh_token', refresh_token: 'x', client_id: flooder.id }, { dpop: await tokenProof(issuer, floodKey) })),
        );
        for (const a of answers) statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
      }
      expect(Object.fromEntries(statuses)).toEqual({ 400: 2050 });
      // Another user, another client: a DPoP-bound sign-in, a refresh and calls all work.
      const app = await registerPublicClient(issuer, 'victim app');
      const key = await dpopKey();
      const tokens = await redeem(issuer, app, await obtainCode(issuer, app, 'vera', key), key);
      expect(tokens.status, JSON.stringify(tokens.json)).toBe(200);
      expect(tokens.json.token_type).toBe('DPoP');
      for (let i = 0; i < 3; i++) expect(await callRoute(issuer, tokens.json.access_token!, key)).toBe(200);
      const refreshed = await postToken(issuer, { grant_type: 'refresh_token', refresh_token: tokens.json.refresh_token!, client_id: app.id }, { dpop: await tokenProof(issuer, key) });
      expect(refreshed.status, JSON.stringify(refreshed.json)).toBe(200);
    } finally {
      await bounded.stop();
    }
  }, 180_000);
});

describe('[K79] /token spends the user\'s share of DPoP markers, one share with the routes', () => {
  /** A memory store of 1,000 entries: each user may hold 100 live markers (a tenth). */
  const MAX_ENTRIES = 1000;
  const SHARE = 100;

  it('[K79] one user refreshing with fresh proofs through two clients: past the share 429 with Retry-After at /token and at the route; another user signs in, refreshes and calls', async () => {
    const bounded = await startBoundedAsGateway(MAX_ENTRIES, { authorization_server: devAuthorizationServer(NO_FLOOD_LIMITS) });
    try {
      const issuer = bounded.issuer;
      const apps = await Promise.all([registerPublicClient(issuer, 'flood app 1'), registerPublicClient(issuer, 'flood app 2')]);
      const keys = await Promise.all([dpopKey(), dpopKey()]);
      // Two clients of one user, each with its own key and grant: one share (two markers spent redeeming).
      const grants = await Promise.all(apps.map(async (app, i) => (await redeem(issuer, app, await obtainCode(issuer, app, 'flo', keys[i]), keys[i])).json));
      const refreshTokens = grants.map((g) => g.refresh_token!);
      const statuses: number[] = [];
      let retryAfter: string | null = null;
      for (let i = 0; i < SHARE + 10; i++) {
        const which = i % 2;
        const res = await fetch(`${issuer}/token`, {
          method: 'POST',
          headers: { dpop: await tokenProof(issuer, keys[which]!) },
          body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshTokens[which]!, client_id: apps[which]!.id }),
        });
        const json = (await res.json()) as Record<string, string>;
        statuses.push(res.status);
        if (res.status === 200) refreshTokens[which] = json.refresh_token!;
        else retryAfter = res.headers.get('retry-after');
      }
      expect(statuses.filter((s) => s === 200)).toHaveLength(SHARE - 2);
      expect(statuses.slice(SHARE - 2).every((s) => s === 429)).toBe(true);
      expect(Number(retryAfter)).toBeGreaterThan(0);
      // The same share at the route: her access token's proofs are refused there too.
      expect(await callRoute(issuer, grants[0]!.access_token!, keys[0]!)).toBe(429);
      // Another user: sign-in, refresh and calls through the same client, all served.
      const key = await dpopKey();
      const tokens = await redeem(issuer, apps[0]!, await obtainCode(issuer, apps[0]!, 'vera', key), key);
      expect(tokens.status, JSON.stringify(tokens.json)).toBe(200);
      const refreshed = await postToken(issuer, { grant_type: 'refresh_token', refresh_token: tokens.json.refresh_token!, client_id: apps[0]!.id }, { dpop: await tokenProof(issuer, key) });
      expect(refreshed.status, JSON.stringify(refreshed.json)).toBe(200);
      for (let i = 0; i < 5; i++) expect(await callRoute(issuer, refreshed.json.access_token!, key)).toBe(200);
    } finally {
      await bounded.stop();
    }
  }, 120_000);
});

describe('[K73] a replayed code revokes its grant only when presented as its own client would', () => {
  /** Who presents the redeemed code again: the right client or another, the right verifier or not, the code's DPoP key or another. */
  const COMBINATIONS = [true, false].flatMap((ownClient) => [true, false].flatMap((ownVerifier) => [true, false].map((ownKey) => ({ ownClient, ownVerifier, ownKey }))));

  it.each(COMBINATIONS)('[K73] replay with own client $ownClient, own verifier $ownVerifier, own key $ownKey: revoked only when all three are its own', async ({ ownClient, ownVerifier, ownKey }) => {
    const key = await dpopKey();
    const code = await obtainCode(gateway.issuer, client, 'rita', key);
    const first = await redeem(gateway.issuer, client, code, key);
    expect(first.status, JSON.stringify(first.json)).toBe(200);
    expect(await callRoute(gateway.issuer, first.json.access_token!, key)).toBe(200);

    const presenter = ownClient ? client : other;
    const replayKey = ownKey ? key : await dpopKey();
    const replay = await postToken(
      gateway.issuer,
      { grant_type: 'authorization_code', code: code.code, code_verifier: ownVerifier ? code.verifier : newVerifier(), redirect_uri: presenter.redirectUri, client_id: presenter.id },
      { dpop: await tokenProof(gateway.issuer, replayKey) },
    );
    expect(replay.status).toBe(400);
    expect(replay.json.error).toBe('invalid_grant');

    const revoked = ownClient && ownVerifier && ownKey;
    // RevokedGrants reaches this replica at once; the refresh token reads the store.
    expect(await callRoute(gateway.issuer, first.json.access_token!, key)).toBe(revoked ? 401 : 200);
    const refresh = await postToken(gateway.issuer, { grant_type: 'refresh_token', refresh_token: first.json.refresh_token!, client_id: client.id }, { dpop: await tokenProof(gateway.issuer, key) });
    expect(refresh.status, JSON.stringify(refresh.json)).toBe(revoked ? 400 : 200);
  }, 60_000);

  it('[K73] an intercepted dpop_jkt-bound code presented first by an attacker (its client id, no key) is refused and spends nothing: the user redeems it after', async () => {
    const key = await dpopKey();
    const code = await obtainCode(gateway.issuer, client, 'rita', key);
    const attempts = await Promise.all([
      postToken(gateway.issuer, { grant_type: 'authorization_code', code: code.code, code_verifier: code.verifier, redirect_uri: client.redirectUri, client_id: client.id }),
      postToken(gateway.issuer, { grant_type: 'authorization_code', code: code.code, code_verifier: code.verifier, redirect_uri: client.redirectUri, client_id: client.id }, { dpop: await tokenProof(gateway.issuer, await dpopKey()) }),
    ]);
    for (const a of attempts) expect(a.json.error).toBe('invalid_grant');
    const own = await redeem(gateway.issuer, client, code, key);
    expect(own.status, JSON.stringify(own.json)).toBe(200);
    expect(await callRoute(gateway.issuer, own.json.access_token!, key)).toBe(200);
  }, 60_000);
});
