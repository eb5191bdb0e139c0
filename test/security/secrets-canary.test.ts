/**
 * [I44] [I45] [F26] [H34] The secrets canary: a full flow through the built-in AS and a protected
 * route at `log_level: trace`, on a real redis-server, with distinctive values everywhere a secret
 * lives — the client's access and refresh tokens, the code, the PKCE verifier, the state, a
 * confidential client's secret (and the secret it tried to choose), the upstream's static secret.
 * None of them may appear in the gateway's logs, the audit events, /metrics, any error body, or
 * the Redis dump (KEYS * → DUMP and GET of every key), which must hold only hashes: key names are
 * a namespace and sha256 parts, and the client's secret is there only as its hash.
 * (The third-party IdP's tokens are the OIDC login's canary: as-idp-*.test.ts.)
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/security-fixtures.js';
import { authorize, dumpRedis, registerClient, startRedisAsGateway, tokenRequest, type RedisAsGateway } from './fixtures/as-on-redis.js';

const PREFIX = 'canary:';
const UPSTREAM_SECRET = `CANARY-upstream-${randomBytes(12).toString('base64url')}`;
const CHOSEN_SECRET = `CANARY-chosen-secret-${randomBytes(12).toString('base64url')}`;
const VERIFIER = `CANARY-verifier-${randomBytes(24).toString('base64url')}`;
const STATE = `CANARY-state-${randomBytes(12).toString('base64url')}`;

let redis: RedisServer;
let upstream: RecordingUpstream;
let gateway: RedisAsGateway;
/** Every secret of the flow, by what it is. */
const secrets: Record<string, string> = { upstreamSecret: UPSTREAM_SECRET, chosenSecret: CHOSEN_SECRET, verifier: VERIFIER, state: STATE };
/** Every response body and header block that is not a legitimate delivery of a secret. */
const errorResponses: string[] = [];

/** A secret in the forms it could leak in: raw, URL-encoded, base64 and base64url of its bytes. */
function spellings(secret: string): string[] {
  const bytes = Buffer.from(secret);
  return [secret, encodeURIComponent(secret), bytes.toString('base64'), bytes.toString('base64url')].filter((s, i, all) => all.indexOf(s) === i);
}

function expectNoSecrets(where: string, text: string): void {
  for (const [name, secret] of Object.entries(secrets)) {
    for (const spelling of spellings(secret)) expect(text.includes(spelling), `${name} found in ${where}`).toBe(false);
  }
}

/**
 * Keeps an error response for the scan. An error redirect to the client's own registered
 * redirect URI must carry its state back (RFC 6749 §4.1.2.1): that Location is a delivery, not a leak.
 */
async function recordError(res: Response, redirectUri: string): Promise<void> {
  const text = await res.text();
  const location = res.headers.get('location');
  if (location?.startsWith(`${redirectUri}?`)) expect(new URL(location).searchParams.get('state')).toBe(STATE);
  const headers = [...res.headers].filter(([n, v]) => !(n === 'location' && v.startsWith(`${redirectUri}?`)));
  errorResponses.push(`${res.status}\n${headers.map(([n, v]) => `${n}: ${v}`).join('\n')}\n\n${text}`);
}

const mcpCall = (token: string, extra: RequestInit = {}, search = '') =>
  fetch(`${gateway.resource}${search}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    ...extra,
  });

beforeAll(async () => {
  [redis, upstream] = await Promise.all([startRedisServer(), startRecordingUpstream()]);
  gateway = await startRedisAsGateway({
    redisUrl: redis.url,
    keyPrefix: PREFIX,
    logLevel: 'trace',
    upstream: `${upstream.origin}/mcp`,
    route: { upstream_auth: { kind: 'static', header: 'Authorization', value: { env: 'UPSTREAM_SECRET' } } },
    // The same secret towards an upstream that refuses connections and one that answers with its own challenge: failures get logged.
    extraRoutes: {
      'down.yaml': { path: '/down/mcp', upstream: 'http://127.0.0.1:9/mcp', scopes_supported: ['mcp:read'], upstream_auth: { kind: 'static', value: { env: 'UPSTREAM_SECRET' } } },
      'challenge.yaml': { path: '/challenge/mcp', upstream: `${upstream.origin}/challenge`, scopes_supported: ['mcp:read'], upstream_auth: { kind: 'static', value: { env: 'UPSTREAM_SECRET' } } },
    },
    env: { UPSTREAM_SECRET },
  });

  // A confidential client registered by DCR; the secret it tries to choose is ignored.
  const client = await registerClient(gateway, { token_endpoint_auth_method: 'client_secret_basic', client_secret: CHOSEN_SECRET, client_name: 'Canary Client' });
  secrets.clientSecret = client.secret!;
  const callback = await authorize(gateway, client, { verifier: VERIFIER, state: STATE, user: 'canary-user', scope: 'mcp:read' });
  expect(callback.searchParams.get('state')).toBe(STATE);
  secrets.code = callback.searchParams.get('code')!;

  const issued = await tokenRequest(gateway, { grant_type: 'authorization_code', code: secrets.code, code_verifier: VERIFIER, redirect_uri: client.redirectUri }, [client.id, client.secret!]);
  expect(issued.status, issued.text).toBe(200);
  secrets.accessToken = String(issued.json.access_token);
  secrets.refreshToken = String(issued.json.refresh_token);

  // The protected route: the upstream gets its own secret, never the client's token.
  const ok = await mcpCall(secrets.accessToken);
  expect(ok.status).toBe(200);
  await ok.text();
  expect(upstream.headerValues('authorization')).toEqual([`Bearer ${UPSTREAM_SECRET}`]);
  expect(upstream.everything()).not.toContain(secrets.accessToken);
  // Tokens for the two failing routes (the resource is per route).
  for (const path of ['/down/mcp', '/challenge/mcp']) {
    const other = await authorize(gateway, client, { verifier: VERIFIER, state: STATE, user: 'canary-user', scope: 'mcp:read', resource: `${gateway.issuer}${path}` });
    const res = await tokenRequest(gateway, { grant_type: 'authorization_code', code: other.searchParams.get('code')!, code_verifier: VERIFIER, redirect_uri: client.redirectUri }, [client.id, client.secret!]);
    const failed = await fetch(`${gateway.issuer}${path}`, { method: 'POST', headers: { authorization: `Bearer ${String(res.json.access_token)}`, 'content-type': 'application/json' }, body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' });
    expect(failed.status).toBe(502);
    errorResponses.push(`${failed.status}\n${[...failed.headers].map(([n, v]) => `${n}: ${v}`).join('\n')}\n\n${await failed.text()}`);
    secrets[`accessToken${path.split('/')[1]}`] = String(res.json.access_token);
    secrets[`refreshToken${path.split('/')[1]}`] = String(res.json.refresh_token);
  }

  // Rotation, then every failure a client can provoke with these secrets in hand.
  const rotated = await tokenRequest(gateway, { grant_type: 'refresh_token', refresh_token: secrets.refreshToken }, [client.id, client.secret!]);
  expect(rotated.status).toBe(200);
  secrets.rotatedAccessToken = String(rotated.json.access_token);
  secrets.rotatedRefreshToken = String(rotated.json.refresh_token);
  const failures: Array<() => Promise<Response>> = [
    // Replay of the rotated refresh token (and so the family is revoked), and of the code.
    () => fetch(`${gateway.issuer}/token`, { method: 'POST', headers: { authorization: basic(client.id, client.secret!) }, body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: secrets.refreshToken! }) }),
    () => fetch(`${gateway.issuer}/token`, { method: 'POST', headers: { authorization: basic(client.id, client.secret!) }, body: new URLSearchParams({ grant_type: 'authorization_code', code: secrets.code!, code_verifier: VERIFIER, redirect_uri: client.redirectUri }) }),
    // A wrong secret that differs from the right one by a character; the right one sent with client_secret_post as well.
    () => fetch(`${gateway.issuer}/token`, { method: 'POST', headers: { authorization: basic(client.id, `${client.secret!}x`) }, body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: secrets.rotatedRefreshToken! }) }),
    () => fetch(`${gateway.issuer}/token`, { method: 'POST', headers: { authorization: basic(client.id, client.secret!) }, body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: secrets.rotatedRefreshToken!, client_secret: client.secret! }) }),
    // The token in the query, in a form body, twice, mangled, as the wrong scheme; the refresh token as an access token.
    () => mcpCall(secrets.accessToken!, {}, `?access_token=${secrets.accessToken}`),
    () => fetch(gateway.resource, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: `access_token=${secrets.accessToken}` }),
    () => fetch(gateway.resource, { method: 'POST', headers: [['authorization', `Bearer ${secrets.accessToken}`], ['authorization', `Bearer ${secrets.refreshToken}`]], body: '{}' }),
    () => mcpCall(`${secrets.accessToken}x`),
    () => mcpCall(secrets.refreshToken!),
    () => fetch(gateway.resource, { method: 'POST', headers: { authorization: `Basic ${secrets.accessToken}` }, body: '{}' }),
    // /authorize with the state and verifier in odd places, /register with the chosen secret in a broken body.
    () => fetch(`${gateway.issuer}/authorize?client_id=${client.id}&redirect_uri=https://evil.example/cb&state=${STATE}&code_challenge=${VERIFIER}`, { redirect: 'manual' }),
    () => fetch(`${gateway.issuer}/authorize?client_id=${client.id}&redirect_uri=${encodeURIComponent(client.redirectUri)}&state=${STATE}&response_type=token`, { redirect: 'manual' }),
    () => fetch(`${gateway.issuer}/register`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: `{"client_secret":"${CHOSEN_SECRET}", "redirect_uris": ["javascript:${STATE}"]}` }),
    // Revocation of the current refresh token (200 either way, no echo).
    () => fetch(`${gateway.issuer}/revoke`, { method: 'POST', headers: { authorization: basic(client.id, client.secret!) }, body: new URLSearchParams({ token: secrets.rotatedRefreshToken! }) }),
  ];
  for (const fail of failures) await recordError(await fail(), client.redirectUri);
});

afterAll(async () => {
  await gateway?.stop();
  await upstream?.close();
  await redis?.stop();
});

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;

describe('[I45] the secrets canary', () => {
  it('the flow ran with every canary in play', () => {
    expect(Object.keys(secrets).sort()).toEqual(
      ['accessToken', 'accessTokenchallenge', 'accessTokendown', 'chosenSecret', 'clientSecret', 'code', 'refreshToken', 'refreshTokenchallenge', 'refreshTokendown', 'rotatedAccessToken', 'rotatedRefreshToken', 'state', 'upstreamSecret', 'verifier'].sort(),
    );
    for (const value of Object.values(secrets)) expect(value.length).toBeGreaterThanOrEqual(24);
    expect(errorResponses.length).toBeGreaterThanOrEqual(14);
  });

  it('[I45] no secret in the logs, written at trace level', () => {
    const logs = gateway.logs.join('');
    expect(gateway.logs.length).toBeGreaterThan(3); // the logger did write (startup, request failures at debug)
    expect(logs).toMatch(/"level":(10|20)/); // and trace/debug lines are among them
    expect(logs).toMatch(/"level":(40|50)/); // and the upstream failures (warn/error) too
    expectNoSecrets('the logs', logs);
  });

  it('[I45] no secret in the audit events', () => {
    expect(gateway.audit.map((e) => e.event)).toEqual(expect.arrayContaining(['client_registered', 'consent', 'authorization_granted', 'token_issued']));
    expectNoSecrets('the audit events', JSON.stringify(gateway.audit));
  });

  it('[I45] no secret, client id or user in the metrics labels', async () => {
    const metrics = await (await fetch(`${gateway.issuer}/metrics`)).text();
    expect(metrics).toContain('mag_requests_total');
    expectNoSecrets('/metrics', metrics);
    expect(metrics).not.toContain('canary-user');
  });

  it('[A6] [F26] no secret in any error response (body or header)', () => {
    for (const response of errorResponses) {
      expect(Number(response.slice(0, 3))).toBeGreaterThanOrEqual(200);
      expectNoSecrets(`an error response: ${response.slice(0, 200)}`, response);
    }
  });

  it('[I44] the Redis dump holds no raw secret, in any key or value, as text or DUMP bytes', async () => {
    const dump = await dumpRedis(gateway.redis, PREFIX);
    expect(dump.length).toBeGreaterThan(5);
    for (const { key, text, dump: bytes } of dump) {
      expectNoSecrets(`Redis key ${key}`, key);
      expectNoSecrets(`Redis value of ${key}`, text);
      expectNoSecrets(`Redis DUMP of ${key}`, bytes.toString('latin1'));
    }
  });

  /** Classes written by Store.admit (sliding windows): the per-user sign-in and DPoP shares, route rate limits. */
  const SLIDING_WINDOWS = ['sign-in-share', 'dpop-share', 'route-limit'];

  it('[I44] key names are a namespace and sha256 parts only; the client secret is stored as its hash', async () => {
    const dump = await dumpRedis(gateway.redis, PREFIX);
    const namespaces = new Set<string>();
    for (const { key, type } of dump) {
      expect(key).toMatch(/^canary:[a-z-]+(?::[A-Za-z0-9_-]{43})+$/);
      // The one log (a sorted set of revoked grant ids) and the sliding-window counters (Store.admit:
      // a hash of slot → count, no values from the flow); every other key is a string.
      const expected = key.startsWith('canary:revoked-grants:') ? 'zset' : SLIDING_WINDOWS.some((c) => key.startsWith(`canary:${c}:`)) ? 'hash' : 'string';
      expect(type, key).toBe(expected);
      namespaces.add(key.split(':')[1]!);
    }
    // What a full flow leaves: the client, the redeemed code marker, the refresh family, the consent record.
    expect([...namespaces]).toEqual(expect.arrayContaining(['client', 'code-used', 'refresh', 'refresh-family', 'consent']));
    // The code and interactions were taken (single use): none is left.
    expect(namespaces.has('code')).toBe(false);
    expect(namespaces.has('pending-authz')).toBe(false);
    const hash = createHash('sha256').update(secrets.clientSecret!).digest('base64url');
    const client = dump.find(({ text }) => text.includes('"secretHash"'));
    expect(JSON.parse(client!.text).secretHash).toBe(hash);
  });
});
