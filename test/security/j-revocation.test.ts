/**
 * SECURITY-CASES J52 (docs/authorization-server.md, "limits and revocation"): when a grant is revoked — /revoke of its
 * refresh token or of one of its access tokens, a replayed code, a reused refresh token — its
 * access tokens are refused (401 invalid_token, nothing upstream) on every replica within 5 s, on
 * a kept-alive connection that used the token before (the per-connection recall and the verified
 * token cache must not keep serving it) and on a new one alike. Two gateways in this process share
 * one real redis-server, one signing key and one public URL; tokens come from replica A, requests
 * go to replica B. A replica that cannot read the revocations for longer than the bound answers
 * 503 for built-in tokens instead of accepting them silently, and recovers without a restart.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateSigningKey } from '../../src/authorization-server/keys/signing-keys.js';
import { headlessUser } from '../helpers/authorization-server.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { codeRequestUrl, newVerifier, registerPublicClient, type PublicClient } from '../helpers/oauth-requests.js';
import { freePort } from '../helpers/net.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';

/** The contract's bound; the replicas poll every second, so a refusal comes well inside it. */
const BOUND_MS = 5_000;
const STORE_TIMEOUT_MS = 300;
const SVC = { id: 'svc', secret: 'svc-secret-value-0123456789' };

let redis: RedisServer;
let upstream: ScriptedUpstream;
let keyDir: string;
let A: TestGateway;
let B: TestGateway;
let publicUrl: string;
let resource: string;

beforeAll(async () => {
  [redis, upstream] = await Promise.all([startRedisServer(), startScriptedUpstream()]);
  keyDir = await mkdtemp(join(tmpdir(), 'mag-j52-'));
  const keyFile = join(keyDir, 'signing.jwk.json');
  await writeFile(keyFile, JSON.stringify(await generateSigningKey()), { mode: 0o600 });
  const [portA, portB] = [await freePort(), await freePort()];
  publicUrl = `http://127.0.0.1:${portA}`;
  resource = `${publicUrl}/everything/mcp`;
  const replica = (port: number) =>
    startTestGateway(
      {
        'gateway.yaml': gatewayYaml({
          listen: { host: '127.0.0.1', port },
          public_url: publicUrl,
          log_level: 'warn',
          store: { kind: 'redis', url: redis.url, key_prefix: 'j52:', command_timeout: `${STORE_TIMEOUT_MS}ms` },
          limits: { store_timeout: `${STORE_TIMEOUT_MS}ms` },
          authorization_server: {
            enabled: true,
            signing_key: { file: keyFile },
            login: { kind: 'dev' },
            clients: [{ client_id: SVC.id, client_secret: { env: 'SVC_SECRET' }, grant_types: ['client_credentials'], scopes: ['mcp:read'] }],
          },
        }),
        'route.yaml': { path: '/everything/mcp', upstream: upstream.url, scopes_supported: ['mcp:read', 'mcp:write'], required_scopes: ['mcp:read'] },
      },
      { SVC_SECRET: SVC.secret },
      { authorizationServer: { registrationRateLimit: { max: 1000, windowMs: 60_000 } } },
    );
  [A, B] = await Promise.all([replica(portA), replica(portB)]);
});

afterAll(async () => {
  await Promise.allSettled([A?.stop(), B?.stop()]);
  await upstream?.close();
  await redis?.stop();
  if (keyDir) await rm(keyDir, { recursive: true, force: true });
});

const registerClient = () => registerPublicClient(A.url, 'j52');

async function tokenRequest(params: Record<string, string>, basic?: [string, string]): Promise<{ status: number; json: Record<string, string> }> {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if (basic) headers.authorization = `Basic ${Buffer.from(basic.join(':')).toString('base64')}`;
  const res = await fetch(`${A.url}/token`, { method: 'POST', headers, body: new URLSearchParams(params) });
  return { status: res.status, json: (await res.json()) as Record<string, string> };
}

interface Grant {
  client: PublicClient;
  code: string;
  verifier: string;
  accessToken: string;
  refreshToken: string;
}

/** A user's grant, obtained from replica A (consent and dev login by a headless user). */
async function userGrant(user = 'j52-user'): Promise<Grant> {
  const client = await registerClient();
  const verifier = newVerifier();
  const url = codeRequestUrl(A.url, { client, verifier, state: 's', resource, scope: 'mcp:read' });
  const callback = await followAuthorization(url, client.redirectUri, { onPage: headlessUser(user) });
  const code = callback.searchParams.get('code')!;
  const issued = await tokenRequest({ grant_type: 'authorization_code', code, code_verifier: verifier, client_id: client.id, redirect_uri: client.redirectUri, resource });
  expect(issued.status).toBe(200);
  return { client, code, verifier, accessToken: issued.json.access_token!, refreshToken: issued.json.refresh_token! };
}

async function revoke(token: string, clientId: string, hint?: string): Promise<void> {
  const res = await fetch(`${A.url}/revoke`, { method: 'POST', body: new URLSearchParams({ token, client_id: clientId, ...(hint && { token_type_hint: hint }) }) });
  expect(res.status).toBe(200);
}

/** One MCP request to `base` with `token` on `agent`'s connection: status, challenge, body, whether the socket was reused, and whether the upstream saw it. */
function call(base: string, token: string, agent: Agent | false): Promise<{ status: number; challenge: string | undefined; body: string; reused: boolean; upstreamSaw: number }> {
  const before = upstream.methods.length;
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
  return new Promise((resolve, reject) => {
    const req = request(
      `${base}/everything/mcp`,
      { method: 'POST', agent, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'content-length': Buffer.byteLength(body) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          const header = res.headers['www-authenticate'];
          resolve({ status: res.statusCode ?? 0, challenge: Array.isArray(header) ? header.join(', ') : header, body: text, reused: req.reusedSocket, upstreamSaw: upstream.methods.length - before });
        });
      },
    );
    req.once('error', reject);
    req.end(body);
  });
}

/** A kept-alive connection to `base`, which has already served `token` once (so the gateway remembers it on that connection). */
async function warmConnection(base: string, token: string): Promise<Agent> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const first = await call(base, token, agent);
  expect(first.status, first.body).toBe(200);
  const second = await call(base, token, agent);
  expect(second.status).toBe(200);
  expect(second.reused).toBe(true);
  return agent;
}

/** Calls until `token` is refused on both connections; returns how long that took. */
async function untilRefused(base: string, token: string, keptAlive: Agent): Promise<number> {
  const started = Date.now();
  for (;;) {
    const [kept, fresh] = await Promise.all([call(base, token, keptAlive), call(base, token, false)]);
    if (kept.status !== 200 && fresh.status !== 200) {
      for (const refused of [kept, fresh]) {
        expect(refused.status).toBe(401);
        expect(refused.challenge).toMatch(/^Bearer .*error="invalid_token"/);
        expect(JSON.parse(refused.body)).toMatchObject({ error: 'invalid_token', error_description: expect.any(String) });
        expect(refused.upstreamSaw).toBe(0);
      }
      // The kept-alive connection was the one that had served the token: its recall was consulted.
      expect(kept.reused).toBe(true);
      return Date.now() - started;
    }
    expect(Date.now() - started, 'still accepted after the bound').toBeLessThan(BOUND_MS);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface RevocationCase {
  name: string;
  /**
   * Revokes the grant on replica A. Returns every other access token of the grant that must stop
   * working too, each with a connection to B that served it before the revocation.
   */
  revoke(grant: Grant): Promise<Array<[string, Agent]>>;
}

const cases: RevocationCase[] = [
  { name: '/revoke of the refresh token', revoke: async (g) => (await revoke(g.refreshToken, g.client.id), []) },
  { name: '/revoke of the refresh token, hinted as an access token', revoke: async (g) => (await revoke(g.refreshToken, g.client.id, 'access_token'), []) },
  { name: '/revoke of the access token', revoke: async (g) => (await revoke(g.accessToken, g.client.id), []) },
  { name: '/revoke of the access token, hinted as a refresh token', revoke: async (g) => (await revoke(g.accessToken, g.client.id, 'refresh_token'), []) },
  {
    name: 'a replayed authorization code',
    revoke: async (g) => {
      const replay = await tokenRequest({ grant_type: 'authorization_code', code: g.code, code_verifier: g.verifier, client_id: g.client.id, redirect_uri: g.client.redirectUri, resource });
      expect(replay.status).toBe(400);
      return [];
    },
  },
  {
    name: 'a reused refresh token (the first and the rotated access token)',
    revoke: async (g) => {
      const rotated = await tokenRequest({ grant_type: 'refresh_token', refresh_token: g.refreshToken, client_id: g.client.id });
      expect(rotated.status).toBe(200);
      const second = rotated.json.access_token!;
      const kept = await warmConnection(B.url, second);
      // Rotated once more, so the first is past its retry grace (K75): presenting it is reuse.
      expect((await tokenRequest({ grant_type: 'refresh_token', refresh_token: rotated.json.refresh_token!, client_id: g.client.id })).status).toBe(200);
      const reuse = await tokenRequest({ grant_type: 'refresh_token', refresh_token: g.refreshToken, client_id: g.client.id });
      expect(reuse.status).toBe(400);
      return [[second, kept]];
    },
  },
];

describe('[J52] a revoked grant’s access tokens are refused on the other replica within 5 s', () => {
  it.each(cases)('[J52] $name → 401 invalid_token on B, kept-alive and new connections, nothing upstream', async (c) => {
    const grant = await userGrant();
    const bystander = await userGrant('j52-bystander');
    const kept = await warmConnection(B.url, grant.accessToken);
    const keptA = await warmConnection(A.url, grant.accessToken);
    try {
      const others = await c.revoke(grant);
      for (const [token, connection] of [[grant.accessToken, kept] as [string, Agent], ...others]) {
        expect(await untilRefused(B.url, token, connection)).toBeLessThan(BOUND_MS);
        connection.destroy();
      }
      // On the replica that revoked, at once.
      const onA = await call(A.url, grant.accessToken, keptA);
      expect(onA.status).toBe(401);
      expect(onA.reused).toBe(true);
      // Another grant is untouched.
      expect((await call(B.url, bystander.accessToken, false)).status).toBe(200);
    } finally {
      kept.destroy();
      keptA.destroy();
    }
  });

  it('[J52] a client_credentials token, revoked with /revoke by its client, is refused on B within 5 s', async () => {
    const issued = await tokenRequest({ grant_type: 'client_credentials', resource, scope: 'mcp:read' }, [SVC.id, SVC.secret]);
    expect(issued.status).toBe(200);
    const token = issued.json.access_token!;
    expect(decodeJwt(token).gid).toEqual(expect.any(String));
    const kept = await warmConnection(B.url, token);
    try {
      const res = await fetch(`${A.url}/revoke`, { method: 'POST', headers: { authorization: `Basic ${Buffer.from(`${SVC.id}:${SVC.secret}`).toString('base64')}` }, body: new URLSearchParams({ token }) });
      expect(res.status).toBe(200);
      expect(await untilRefused(B.url, token, kept)).toBeLessThan(BOUND_MS);
    } finally {
      kept.destroy();
    }
  });

  it('[J52] /revoke by another client, or of a forged or foreign token, revokes nothing (200 all the same)', async () => {
    const grant = await userGrant();
    const other = await registerClient();
    const [header, payload] = grant.accessToken.split('.') as [string, string];
    const forged = `${header}.${payload}.${Buffer.alloc(64).toString('base64url')}`;
    for (const [token, clientId] of [
      [grant.accessToken, other.id],
      [grant.refreshToken, other.id],
      [forged, grant.client.id],
      ['not-a-token', grant.client.id],
    ] as const) {
      await revoke(token, clientId);
    }
    // Past a poll on B: still accepted on both replicas, and refreshable.
    await new Promise((r) => setTimeout(r, 1_500));
    expect((await call(B.url, grant.accessToken, false)).status).toBe(200);
    expect((await call(A.url, grant.accessToken, false)).status).toBe(200);
    expect((await tokenRequest({ grant_type: 'refresh_token', refresh_token: grant.refreshToken, client_id: grant.client.id })).status).toBe(200);
  });
});

describe('[J52] a replica that cannot read the revocations does not accept built-in tokens silently', () => {
  it('[J52] store paused past the bound → 503 temporarily_unavailable on B (kept-alive too), then 200 again without a restart', async () => {
    const grant = await userGrant();
    const kept = await warmConnection(B.url, grant.accessToken);
    try {
      await redis.pause(7_000);
      const started = Date.now();
      let refused;
      for (;;) {
        refused = await call(B.url, grant.accessToken, kept);
        if (refused.status !== 200) break;
        expect(Date.now() - started, 'still accepted with the revocation list unreadable').toBeLessThan(BOUND_MS + 1_000);
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(refused.status).toBe(503);
      expect(JSON.parse(refused.body)).toMatchObject({ error: 'temporarily_unavailable' });
      expect(refused.upstreamSaw).toBe(0);
      const metrics = await (await fetch(`${B.url}/metrics`)).text();
      expect(metrics).toMatch(/^mag_revocation_syncs_total\{result="error"\} [1-9]/m);
      // Once the store answers again (resumed now rather than after the rest of the 7 s), the next poll restores service.
      await redis.resume();
      const recovered = Date.now();
      for (;;) {
        const again = await call(B.url, grant.accessToken, false);
        if (again.status === 200) break;
        expect(Date.now() - recovered, 'no recovery').toBeLessThan(15_000);
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      kept.destroy();
    }
  }, 30_000);
});
