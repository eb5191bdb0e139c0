/**
 * Issue 2, end to end with real processes: a real external AS (oidc-provider: resource
 * indicators, JWT access tokens per resource), the gateway configured for it (no built-in AS),
 * the unmodified server-everything (Streamable HTTP) behind recording hops, and the real MCP SDK
 * client driving the whole OAuth flow headlessly from the gateway's 401:
 * 401 → RFC 9728 metadata → AS metadata → DCR → PKCE → token with `resource` → MCP calls.
 */
import { decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { connectWithOAuth, connectWithToken, type OAuthConnection } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { startOidcProvider, type OidcProviderHandle } from '../helpers/oidc-provider.js';
import { expectRejection, parseChallenge, simplify, tokenSecrets } from '../helpers/security-fixtures.js';
import { startEverythingServer, startRecordingHop, type RecordedRequest, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';
import { DPOP_ALGORITHMS } from '../../src/config/jws-algorithms.js';

const SCOPES = ['mcp:read', 'mcp:write', 'mcp:admin'];
const UPSTREAM_PAT = 'upstream-personal-access-token-0123456789';

let everything: UpstreamHandle;
let hopNone: RecordingHop;
let hopStatic: RecordingHop;
let oidc: OidcProviderHandle;
let shortLived: OidcProviderHandle;
let gw: TestGateway;
let publicUrl: string;
let conn: OAuthConnection | undefined;

const url = (path: string) => `${publicUrl}${path}`;
const metadataUrl = (path: string) => `${publicUrl}/.well-known/oauth-protected-resource${path}`;

/** Everything a hop forwarded, as one string per request (path+query, headers, body). */
const flatten = (requests: RecordedRequest[]) =>
  requests.map((r) => `${r.method} ${r.url}\n${r.headers.map(([n, v]) => `${n}: ${v}`).join('\n')}\n\n${r.body.toString('latin1')}`);

function expectTokenNeverArrived(requests: RecordedRequest[], token: string): void {
  expect(requests.length).toBeGreaterThan(0);
  for (const text of flatten(requests)) {
    for (const secret of tokenSecrets(token)) expect(text.includes(secret)).toBe(false);
  }
}

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'gateway-oidc-test', version: '0' } },
});

/** A POST to `path` (by default an `initialize`, which server-everything answers without a session). */
async function post(path: string, token: string | undefined, body = INITIALIZE) {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (token) headers.authorization = `Bearer ${token}`;
  return simplify(await fetch(url(path), { method: 'POST', headers, body }));
}

async function nothingForwarded<T>(run: () => Promise<T>): Promise<T> {
  const before = [hopNone.requests.length, hopStatic.requests.length];
  const result = await run();
  await new Promise((r) => setTimeout(r, 20));
  expect([hopNone.requests.length, hopStatic.requests.length]).toEqual(before);
  return result;
}

beforeAll(async () => {
  everything = await startEverythingServer();
  [hopNone, hopStatic, oidc, shortLived] = await Promise.all([
    startRecordingHop(everything.url),
    startRecordingHop(everything.url),
    startOidcProvider({ resources: [], scopes: SCOPES }),
    startOidcProvider({ resources: [], scopes: SCOPES, accessTokenTtl: 2 }),
  ]);
  const port = await freePort();
  publicUrl = `http://127.0.0.1:${port}`;
  const route = (path: string, as: OidcProviderHandle, upstream: string, extra: Record<string, unknown> = {}) => ({
    path,
    upstream,
    authorization_servers: [as.issuer],
    token: { jwt: { issuer: as.issuer, jwks_uri: as.jwksUri } },
    scopes_supported: ['mcp:read', 'mcp:write'],
    required_scopes: ['mcp:read'],
    ...extra,
  });
  for (const path of ['/everything/mcp', '/static/mcp', '/other/mcp', '/admin/mcp']) oidc.resources.add(url(path));
  for (const path of ['/short/mcp', '/everything/mcp']) shortLived.resources.add(url(path));
  gw = await startTestGateway(
    {
      'gateway.yaml': gatewayYaml({ listen: { host: '127.0.0.1', port }, public_url: publicUrl }),
      'everything.yaml': route('/everything/mcp', oidc, hopNone.url, { upstream_auth: { kind: 'none' } }),
      'static.yaml': route('/static/mcp', oidc, hopStatic.url, { upstream_auth: { kind: 'static', value: { env: 'UPSTREAM_PAT' } } }),
      'other.yaml': route('/other/mcp', oidc, hopNone.url),
      'admin.yaml': route('/admin/mcp', oidc, hopNone.url, { scopes_supported: SCOPES, required_scopes: ['mcp:admin'] }),
      'short.yaml': route('/short/mcp', shortLived, hopNone.url, { token: { jwt: { issuer: shortLived.issuer, jwks_uri: shortLived.jwksUri, clock_skew: '1s' } } }),
    },
    { UPSTREAM_PAT },
  );
  expect(gw.url).toBe(publicUrl);
});

afterAll(async () => {
  await conn?.close().catch(() => undefined);
  await gw?.stop();
  await Promise.all([oidc?.close(), shortLived?.close(), hopNone?.close(), hopStatic?.close()]);
  await everything?.close();
});

describe('discovery starts at the gateway', () => {
  it("answers a token-less request with a 401 whose resource_metadata leads to the external AS", async () => {
    const res = await nothingForwarded(() => post('/everything/mcp', undefined));
    expect(res.status).toBe(401);
    const { params } = parseChallenge(res.header('www-authenticate')!);
    expect(params).toEqual({ scope: 'mcp:read', resource_metadata: metadataUrl('/everything/mcp') });
    const prm = await (await fetch(params.resource_metadata!)).json();
    expect(prm).toEqual({
      resource: url('/everything/mcp'),
      authorization_servers: [oidc.issuer],
      scopes_supported: ['mcp:read', 'mcp:write'],
      bearer_methods_supported: ['header'],
      dpop_signing_alg_values_supported: [...DPOP_ALGORITHMS],
    });
  });
});

describe('the SDK client through the gateway (upstream_auth: none)', () => {
  let before: number;

  beforeAll(async () => {
    before = hopNone.requests.length;
    const errorsBefore = oidc.errors.length;
    conn = await connectWithOAuth(url('/everything/mcp'));
    expect(oidc.errors.slice(errorsBefore)).toEqual([]);
  });

  it('ran discovery → DCR → PKCE → token bound to the route', () => {
    const [authorizationUrl] = conn!.provider.authorizationUrls;
    expect(authorizationUrl!.origin).toBe(oidc.issuer);
    expect(authorizationUrl!.searchParams.get('resource')).toBe(url('/everything/mcp'));
    expect(authorizationUrl!.searchParams.get('code_challenge_method')).toBe('S256');
    expect(authorizationUrl!.searchParams.get('scope')).toContain('mcp:read');
    expect(conn!.provider.clientInformation()?.client_id).toBeTruthy(); // dynamically registered
    const token = conn!.tokens()!.access_token;
    expect(decodeProtectedHeader(token).alg).toBe('ES256');
    expect(decodeJwt(token)).toMatchObject({ iss: oidc.issuer, aud: url('/everything/mcp'), sub: 'alice' });
  });

  it('lists tools and calls echo', async () => {
    const { tools } = await conn!.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(['echo', 'trigger-long-running-operation']));
    const result = await conn!.client.callTool({ name: 'echo', arguments: { message: 'through the gateway' } });
    expect(result.content).toEqual([{ type: 'text', text: 'Echo: through the gateway' }]);
  });

  it('streams progress notifications as they happen (SSE event by event)', async () => {
    const progressAt: number[] = [];
    const started = Date.now();
    await conn!.client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 4 } }, undefined, {
      onprogress: () => progressAt.push(Date.now() - started),
    });
    const doneAt = Date.now() - started;
    expect(progressAt).toHaveLength(4);
    expect(doneAt - progressAt[0]!).toBeGreaterThan(400);
    expect(progressAt[3]! - progressAt[0]!).toBeGreaterThan(300);
  });

  it('serves GET event streams: the SDK stream, and one opened by hand on a fresh session', async () => {
    // the SDK opened its standalone stream after initialize
    await vi.waitFor(() => expect(hopNone.requests.slice(before).some((r) => r.method === 'GET')).toBe(true));
    const token = conn!.tokens()!.access_token;
    const init = await fetch(url('/everything/mcp'), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: INITIALIZE,
    });
    expect(init.status).toBe(200);
    await init.body?.cancel();
    const session = init.headers.get('mcp-session-id')!;
    expect(session).toBeTruthy();
    const abort = new AbortController();
    const res = await fetch(url('/everything/mcp'), {
      headers: { authorization: `Bearer ${token}`, 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18', accept: 'text/event-stream' },
      signal: abort.signal,
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    expect(res.headers.get('mcp-session-id') ?? session).toBe(session);
    abort.abort();
  });

  it('never forwarded the client token, nor any Authorization header', () => {
    const seen = hopNone.requests.slice(before);
    expect(seen.map((r) => r.method)).toEqual(expect.arrayContaining(['POST', 'GET']));
    expect(seen.flatMap((r) => r.headers.filter(([n]) => n.toLowerCase() === 'authorization'))).toEqual([]);
    expectTokenNeverArrived(seen, conn!.tokens()!.access_token);
    for (const r of seen) expect(r.url).toBe(new URL(everything.url).pathname);
  });

  it('terminates the session with DELETE, after which the id is refused', async () => {
    const session = conn!.transport.sessionId!;
    const token = conn!.tokens()!.access_token;
    const mark = hopNone.requests.length;
    await conn!.transport.terminateSession();
    const deletes = hopNone.requests.slice(mark).filter((r) => r.method === 'DELETE');
    expect(deletes).toHaveLength(1);
    expect(deletes[0]!.headers.filter(([n]) => n.toLowerCase() === 'authorization')).toEqual([]);
    const res = await nothingForwarded(async () =>
      simplify(
        await fetch(url('/everything/mcp'), {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'mcp-session-id': session, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
          body: '{"jsonrpc":"2.0","id":9,"method":"tools/list"}',
        }),
      ),
    );
    expectRejection(res, { status: 404, error: 'not_found' }, tokenSecrets(token));
    await conn!.close();
    conn = undefined;
  });
});

describe('upstream_auth static: only the configured credential arrives', () => {
  it('runs the OAuth flow and MCP calls; the hop sees only the PAT', async () => {
    const staticConn = await connectWithOAuth(url('/static/mcp'));
    try {
      const { tools } = await staticConn.client.listTools();
      expect(tools.map((t) => t.name)).toContain('echo');
      expect((await staticConn.client.callTool({ name: 'echo', arguments: { message: 'pat' } })).content).toEqual([{ type: 'text', text: 'Echo: pat' }]);
      await vi.waitFor(() => expect(hopStatic.requests.some((r) => r.method === 'GET')).toBe(true));
      await staticConn.transport.terminateSession();
      const seen = hopStatic.requests;
      expect(seen.map((r) => r.method)).toEqual(expect.arrayContaining(['POST', 'GET', 'DELETE']));
      for (const r of seen) {
        expect(r.headers.filter(([n]) => n.toLowerCase() === 'authorization').map(([, v]) => v)).toEqual([`Bearer ${UPSTREAM_PAT}`]);
      }
      expectTokenNeverArrived(seen, staticConn.tokens()!.access_token);
      expect(decodeJwt(staticConn.tokens()!.access_token).aud).toBe(url('/static/mcp'));
    } finally {
      await staticConn.close();
    }
  });
});

describe('tokens the gateway refuses', () => {
  it('refuses a token for another route of the same AS (both ways)', async () => {
    const forOther = await oidc.mintAccessToken({ resource: url('/other/mcp'), scope: 'mcp:read' });
    const forEverything = await oidc.mintAccessToken({ resource: url('/everything/mcp'), scope: 'mcp:read' });
    expect((await post('/other/mcp', forOther)).status).toBe(200); // control: valid where it belongs
    expect((await post('/everything/mcp', forEverything)).status).toBe(200);
    for (const [path, token] of [['/everything/mcp', forOther], ['/other/mcp', forEverything]] as const) {
      const res = await nothingForwarded(() => post(path, token));
      expectRejection(res, { status: 401, error: 'invalid_token', challenge: 'error', resourceMetadata: metadataUrl(path) }, tokenSecrets(token));
    }
    // The operator sees why: the expected audience and the one the token had (never the token).
    const refusal = gw.logs.map((line) => JSON.parse(line) as Record<string, unknown>).find((l) => l.claim === 'aud' && l.route === '/everything/mcp');
    expect(refusal).toMatchObject({ expected: url('/everything/mcp'), msg: 'token refused: its audience is not the one this route expects' });
    expect(JSON.stringify(refusal?.received)).toContain(url('/other/mcp'));
  });

  it('refuses a token once it has expired (real 2 s token, 1 s skew; the cache does not outlive it)', async () => {
    const token = await shortLived.mintAccessToken({ resource: url('/short/mcp'), scope: 'mcp:read' });
    const { exp } = decodeJwt(token);
    expect((await post('/short/mcp', token)).status).toBe(200);
    await new Promise((r) => setTimeout(r, exp! * 1000 + 1_000 - Date.now() + 300));
    const res = await nothingForwarded(() => post('/short/mcp', token));
    expectRejection(res, { status: 401, error: 'invalid_token', challenge: 'error', resourceMetadata: metadataUrl('/short/mcp') }, tokenSecrets(token));
  });

  it('refuses a forged token (the same claims and kid, signed by another key)', async () => {
    const genuine = await oidc.mintAccessToken({ resource: url('/everything/mcp'), scope: 'mcp:read' });
    const { privateKey, publicKey } = await generateKeyPair('ES256');
    expect(await exportJWK(publicKey)).not.toEqual(oidc.jwks.keys[0]);
    const forged = await new SignJWT(decodeJwt(genuine)).setProtectedHeader(decodeProtectedHeader(genuine) as { alg: string }).sign(privateKey);
    expect(decodeProtectedHeader(forged)).toEqual(decodeProtectedHeader(genuine));
    const res = await nothingForwarded(() => post('/everything/mcp', forged));
    expectRejection(res, { status: 401, error: 'invalid_token', challenge: 'error', resourceMetadata: metadataUrl('/everything/mcp') }, tokenSecrets(forged));
  });

  it('refuses a token from another (real) AS for the right audience: wrong issuer', async () => {
    const foreign = await shortLived.mintAccessToken({ resource: url('/everything/mcp'), scope: 'mcp:read' });
    expect(decodeJwt(foreign)).toMatchObject({ aud: url('/everything/mcp'), iss: shortLived.issuer });
    const res = await nothingForwarded(() => post('/everything/mcp', foreign));
    expectRejection(res, { status: 401, error: 'invalid_token', challenge: 'error', resourceMetadata: metadataUrl('/everything/mcp') }, tokenSecrets(foreign));
  });

  it('answers 403 insufficient_scope naming the scope the route needs', async () => {
    const readOnly = await oidc.mintAccessToken({ resource: url('/admin/mcp'), scope: 'mcp:read' });
    const res = await nothingForwarded(() => post('/admin/mcp', readOnly));
    expectRejection(res, { status: 403, error: 'insufficient_scope', challenge: 'error', scope: 'mcp:admin', resourceMetadata: metadataUrl('/admin/mcp') }, tokenSecrets(readOnly));

    const admin = await oidc.mintAccessToken({ resource: url('/admin/mcp'), scope: 'mcp:admin' });
    expect((await post('/admin/mcp', admin)).status).toBe(200); // control

    const noScope = await oidc.mintAccessToken({ resource: url('/everything/mcp') });
    const bare = await nothingForwarded(() => post('/everything/mcp', noScope));
    expectRejection(bare, { status: 403, error: 'insufficient_scope', challenge: 'error', scope: 'mcp:read' }, tokenSecrets(noScope));
  });

  it('a refused SDK client surfaces the 401 instead of reaching the upstream', async () => {
    const forOther = await oidc.mintAccessToken({ resource: url('/other/mcp'), scope: 'mcp:read' });
    await nothingForwarded(() => expect(connectWithToken(url('/everything/mcp'), forOther)).rejects.toThrow());
  });
});

describe('the logs', () => {
  it('hold no access token', () => {
    const logs = gw.logs.join('');
    expect(logs.length).toBeGreaterThan(0);
    expect(logs).not.toMatch(/eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{20,}/);
  });
});
