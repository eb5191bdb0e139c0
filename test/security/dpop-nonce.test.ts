/**
 * Server-provided DPoP nonces (RFC 9449 §8 at a resource, §9 at /token) and `dpop_jkt`
 * authorization-code binding (§10), against real gateways: two replicas sharing a real
 * redis-server and `dpop_nonce_key`, and the built-in AS with the dev login (its nonces derived
 * from its signing key). Proofs minted with jose as a client would. Each check has its negative:
 * no nonce, a stale one (two slots old), forged ones; a retry with the nonce given succeeds.
 */
import { randomBytes } from 'node:crypto';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDpopNonces, NONCE_SLOT_SECONDS, type DpopNonces } from '../../src/auth/dpop-nonce.js';
import { generateSigningKey, loadSigningKeys } from '../../src/authorization-server/keys/signing-keys.js';
import { DPOP_ALGORITHMS } from '../../src/config/jws-algorithms.js';
import { headlessUser, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { dpopKey, proof, type DpopKey } from '../helpers/dpop.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { codeRequestUrl, getManual, newVerifier, registerPublicClient, type PublicClient } from '../helpers/oauth-requests.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import {
  expectRejection,
  gatewayYaml,
  jwtRoute,
  metadataUrlOf,
  parseChallenge,
  PUBLIC_URL,
  resourceOf,
  simplify,
  startRecordingUpstream,
  startTestIssuer,
  type RecordingUpstream,
  type SimpleResponse,
  type TestIssuer,
} from '../helpers/security-fixtures.js';

const NONCED = '/nonce/mcp';
const PLAIN = '/plain/mcp';
const TOOLS_LIST = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';
const NONCE_KEY = 'dpop-nonce-key-shared-by-every-replica-0123456789';
const APP_ORIGIN = 'https://app.example.test';
const now = () => Math.floor(Date.now() / 1000);

let up: RecordingUpstream;
let key: DpopKey;

beforeAll(async () => {
  [up, key] = await Promise.all([startRecordingUpstream(), dpopKey('ES256')]);
});

afterAll(async () => {
  await up?.close();
});

/** The request must be refused with nothing forwarded. */
async function refused(run: () => Promise<SimpleResponse>): Promise<SimpleResponse> {
  const before = up.requests.length;
  const res = await run();
  await new Promise((r) => setTimeout(r, 20));
  expect(up.requests.slice(before).map((r) => r.url)).toEqual([]);
  return res;
}

/** Forged nonces: random, well-formed but of another key, and not a string at all. */
const forgedNonces = (): unknown[] => [randomBytes(32).toString('base64url'), createDpopNonces('another-key-that-is-not-the-gateways-0123456').current(), 12345, ['x']];

describe('nonces at protected routes (RFC 9449 §8), two replicas on a real redis-server', () => {
  let issuer: TestIssuer;
  let redis: RedisServer;
  let a: TestGateway;
  let b: TestGateway;

  beforeAll(async () => {
    [issuer, redis] = await Promise.all([startTestIssuer('RS256'), startRedisServer()]);
    const jwt = { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['RS256'] };
    const files = {
      'gateway.yaml': gatewayYaml({ store: { kind: 'redis', url: redis.url, key_prefix: 'nonce:' }, dpop_nonce_key: { env: 'DPOP_NONCE_KEY' } }),
      'n.yaml': jwtRoute(NONCED, `${up.origin}/mcp`, issuer, { token: { jwt, dpop: 'required', dpop_nonce: true }, cors: { allowed_origins: [APP_ORIGIN] } }),
      'p.yaml': jwtRoute(PLAIN, `${up.origin}/mcp`, issuer, { token: { jwt, dpop: 'allowed' } }),
    };
    [a, b] = await Promise.all([startTestGateway(files, { DPOP_NONCE_KEY: NONCE_KEY }), startTestGateway(files, { DPOP_NONCE_KEY: NONCE_KEY })]);
  });

  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
    await Promise.all([redis?.stop(), issuer?.close()]);
  });

  const bound = (path = NONCED) => issuer.mint({ aud: resourceOf(path), scope: 'mcp:read', cnf: { jkt: key.jkt } });
  const proofFor = (token: string, nonce?: unknown, path = NONCED) => proof(key, { htm: 'POST', htu: `${PUBLIC_URL}${path}`, token, ...(nonce !== undefined && { claims: { nonce } }) });

  async function post(gw: TestGateway, path: string, headers: Record<string, string>): Promise<SimpleResponse> {
    const res = await fetch(`${gw.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body: TOOLS_LIST,
    });
    return simplify(res);
  }

  /** 401 use_dpop_nonce with the DPoP challenge and a nonce the gateway accepts now. */
  function expectNonceChallenge(res: SimpleResponse, path = NONCED): string {
    expectRejection(res, { status: 401, error: 'use_dpop_nonce', challenge: 'error', scheme: 'DPoP', resourceMetadata: metadataUrlOf(path) });
    expect(parseChallenge(res.header('www-authenticate')!).params.algs).toBe(DPOP_ALGORITHMS.join(' '));
    const nonce = res.header('dpop-nonce');
    expect(nonce).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(createDpopNonces(NONCE_KEY).accepts(nonce)).toBe(true);
    return nonce!;
  }

  it('a proof without a nonce: 401 use_dpop_nonce with DPoP-Nonce; the retry with it passes and names the nonce again', async () => {
    const token = await bound();
    const first = await refused(async () => post(a, NONCED, { authorization: `DPoP ${token}`, dpop: await proofFor(token) }));
    const nonce = expectNonceChallenge(first);
    const before = up.requests.length;
    const retry = await post(a, NONCED, { authorization: `DPoP ${token}`, dpop: await proofFor(token, nonce) });
    expect(retry.status, retry.body).toBe(200);
    expect(up.requests.length).toBe(before + 1);
    expect(retry.header('dpop-nonce')).toBe(nonce);
  });

  it("another replica's nonce is accepted (same key, no store round trip), both ways", async () => {
    const token = await bound();
    const fromA = expectNonceChallenge(await post(a, NONCED, { authorization: `DPoP ${token}`, dpop: await proofFor(token) }));
    expect((await post(b, NONCED, { authorization: `DPoP ${token}`, dpop: await proofFor(token, fromA) })).status).toBe(200);
    const fromB = expectNonceChallenge(await post(b, NONCED, { authorization: `DPoP ${token}`, dpop: await proofFor(token) }));
    expect((await post(a, NONCED, { authorization: `DPoP ${token}`, dpop: await proofFor(token, fromB) })).status).toBe(200);
  });

  it('a stale nonce (two slots old) is refused with a fresh one', async () => {
    const token = await bound();
    const stale = createDpopNonces(NONCE_KEY).current(now() - 2 * NONCE_SLOT_SECONDS);
    const res = await refused(async () => post(a, NONCED, { authorization: `DPoP ${token}`, dpop: await proofFor(token, stale) }));
    expect(expectNonceChallenge(res)).not.toBe(stale);
  });

  it('the previous slot is still accepted (a nonce handed out just before a rotation)', async () => {
    const token = await bound();
    const previous = createDpopNonces(NONCE_KEY).current(now() - NONCE_SLOT_SECONDS);
    expect((await post(b, NONCED, { authorization: `DPoP ${token}`, dpop: await proofFor(token, previous) })).status).toBe(200);
  });

  it('forged nonces (random, of another key, not a string) are refused on both replicas', async () => {
    const token = await bound();
    for (const forged of forgedNonces()) {
      for (const gw of [a, b]) expectNonceChallenge(await refused(async () => post(gw, NONCED, { authorization: `DPoP ${token}`, dpop: await proofFor(token, forged) })));
    }
  });

  it('a proof that fails another check is invalid_dpop_proof, nonce or not; a replayed proof with a good nonce too', async () => {
    const token = await bound();
    const nonce = createDpopNonces(NONCE_KEY).current();
    const wrongHtu = await proof(key, { htm: 'POST', htu: `${PUBLIC_URL}/elsewhere`, token, claims: { nonce } });
    expectRejection(await refused(async () => post(a, NONCED, { authorization: `DPoP ${token}`, dpop: wrongHtu })), { status: 401, error: 'invalid_dpop_proof', challenge: 'error', scheme: 'DPoP', resourceMetadata: metadataUrlOf(NONCED) });
    const once = await proofFor(token, nonce);
    expect((await post(a, NONCED, { authorization: `DPoP ${token}`, dpop: once })).status).toBe(200);
    expectRejection(await refused(async () => post(b, NONCED, { authorization: `DPoP ${token}`, dpop: once })), { status: 401, error: 'invalid_dpop_proof', challenge: 'error', scheme: 'DPoP', resourceMetadata: metadataUrlOf(NONCED) });
  });

  it('DPoP-Nonce is exposed to an allowed browser origin (CORS)', async () => {
    const token = await bound();
    const res = await post(a, NONCED, { origin: APP_ORIGIN, authorization: `DPoP ${token}`, dpop: await proofFor(token) });
    expect(res.header('dpop-nonce')).toBeTruthy();
    expect(res.header('access-control-expose-headers')?.split(/,\s*/)).toContain('dpop-nonce');
  });

  it('a route without dpop_nonce takes a proof without a nonce and names none; a Bearer request gets none either', async () => {
    const token = await bound(PLAIN);
    const res = await post(a, PLAIN, { authorization: `DPoP ${token}`, dpop: await proofFor(token, undefined, PLAIN) });
    expect(res.status, res.body).toBe(200);
    expect(res.header('dpop-nonce')).toBeUndefined();
    const bearer = await post(a, NONCED, { authorization: `Bearer ${await issuer.mint({ aud: resourceOf(NONCED), scope: 'mcp:read' })}` });
    expect(bearer.status).toBe(401);
    expect(bearer.header('dpop-nonce')).toBeUndefined();
  });
});

describe('nonces at the built-in AS /token (RFC 9449 §9), derived from its signing key', () => {
  const SVC_SECRET = 'svc-secret-value-0123456789';
  let gateway: AsGateway;
  let client: PublicClient;
  /** The gateway's nonces, derived here as the gateway derives them: from its signing key's secret. */
  let asNonces: DpopNonces;

  beforeAll(async () => {
    const signingKey = JSON.stringify(await generateSigningKey());
    asNonces = createDpopNonces((await loadSigningKeys({ configured: signingKey, publicUrl: 'http://127.0.0.1' })).cookieSecret);
    gateway = await startAsGateway({
      upstream: `${up.origin}/mcp`,
      routes: { 'n.yaml': { path: NONCED, scopes_supported: ['mcp:read'], required_scopes: ['mcp:read'], token: { dpop: 'required', dpop_nonce: true } } },
      authorizationServer: {
        dpop_nonce: true,
        signing_key: { env: 'SIGNING_KEY' },
        clients: [{ client_id: 'svc', client_secret: { env: 'SVC_SECRET' }, grant_types: ['client_credentials'], scopes: ['mcp:read'] }],
      },
      env: { SVC_SECRET, SIGNING_KEY: signingKey },
    });
    client = await registerPublicClient(gateway.issuer, 'nonce app');
  });

  afterAll(async () => {
    await gateway?.stop();
  });

  const tokenEndpoint = () => `${gateway.issuer}/token`;
  const tokenProof = (nonce?: unknown) => proof(key, { htm: 'POST', htu: tokenEndpoint(), ...(nonce !== undefined && { claims: { nonce } }) });
  const svcParams = { grant_type: 'client_credentials', client_id: 'svc', client_secret: SVC_SECRET };

  async function token(params: Record<string, string>, headers: Record<string, string> = {}) {
    const body = new URLSearchParams({ resource: gateway.issuer + NONCED, ...params });
    const res = await fetch(tokenEndpoint(), { method: 'POST', headers, body });
    return { status: res.status, headers: res.headers, json: (await res.json()) as Record<string, string> };
  }

  function expectUseNonce(res: Awaited<ReturnType<typeof token>>): string {
    expect(res.status, JSON.stringify(res.json)).toBe(400);
    expect(res.json.error).toBe('use_dpop_nonce');
    expect(Object.keys(res.json).sort()).toEqual(['error', 'error_description']);
    const nonce = res.headers.get('dpop-nonce');
    expect(nonce).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(asNonces.accepts(nonce)).toBe(true);
    return nonce!;
  }

  it('a proof without a nonce: 400 use_dpop_nonce with DPoP-Nonce, exposed to browsers; the retry gets a DPoP token and the nonce again', async () => {
    const first = await token(svcParams, { dpop: await tokenProof(), origin: APP_ORIGIN });
    const nonce = expectUseNonce(first);
    expect(first.headers.get('access-control-expose-headers')?.toLowerCase().split(/,\s*/)).toContain('dpop-nonce');
    const retry = await token(svcParams, { dpop: await tokenProof(nonce) });
    expect(retry.status, JSON.stringify(retry.json)).toBe(200);
    expect(retry.json.token_type).toBe('DPoP');
    expect(retry.headers.get('dpop-nonce')).toBe(nonce);
  });

  it('stale (two slots old) and forged nonces: 400 use_dpop_nonce; the previous slot passes', async () => {
    const stale = asNonces.current(now() - 2 * NONCE_SLOT_SECONDS);
    expect(expectUseNonce(await token(svcParams, { dpop: await tokenProof(stale) }))).not.toBe(stale);
    for (const forged of forgedNonces()) expectUseNonce(await token(svcParams, { dpop: await tokenProof(forged) }));
    expect((await token(svcParams, { dpop: await tokenProof(asNonces.current(now() - NONCE_SLOT_SECONDS)) })).status).toBe(200);
  });

  it('a token request without a proof is not asked for a nonce (nonces concern proofs only)', async () => {
    const res = await token(svcParams);
    expect(res.status).toBe(200);
    expect(res.json.token_type).toBe('Bearer');
    expect(res.headers.get('dpop-nonce')).toBeNull();
  });

  it('use_dpop_nonce does not spend the authorization code: the retry with the nonce redeems it', async () => {
    const verifier = newVerifier();
    const url = codeRequestUrl(gateway.issuer, { client, verifier, state: 's', resource: gateway.issuer + NONCED, scope: 'mcp:read' });
    const code = (await followAuthorization(url, client.redirectUri, { onPage: headlessUser('erin') })).searchParams.get('code')!;
    const params = { grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri, client_id: client.id };
    const nonce = expectUseNonce(await token(params, { dpop: await tokenProof() }));
    const redeemed = await token(params, { dpop: await tokenProof(nonce) });
    expect(redeemed.status, JSON.stringify(redeemed.json)).toBe(200);
    expect(decodeJwt(redeemed.json.access_token!).cnf).toEqual({ jkt: key.jkt });
  });

  it("one nonce per gateway: /token's nonce is accepted at a protected route with dpop_nonce", async () => {
    const nonce = expectUseNonce(await token(svcParams, { dpop: await tokenProof() }));
    const issued = await token(svcParams, { dpop: await tokenProof(nonce) });
    const accessToken = issued.json.access_token!;
    const withProof = async (n?: string) =>
      simplify(
        await fetch(`${gateway.issuer}${NONCED}`, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            authorization: `DPoP ${accessToken}`,
            dpop: await proof(key, { htm: 'POST', htu: gateway.issuer + NONCED, token: accessToken, ...(n !== undefined && { claims: { nonce: n } }) }),
          },
          body: TOOLS_LIST,
        }),
      );
    const without = await withProof();
    expect(without.status).toBe(401);
    expect(without.header('www-authenticate')).toMatch(/^DPoP error="use_dpop_nonce"/);
    expect(without.header('dpop-nonce')).toBe(nonce);
    expect((await withProof(nonce)).status).toBe(200);
  });
});

describe('dpop_jkt binds the authorization code to the key (RFC 9449 §10)', () => {
  let gateway: AsGateway;
  let client: PublicClient;

  beforeAll(async () => {
    gateway = await startAsGateway({ upstream: `${up.origin}/mcp` });
    client = await registerPublicClient(gateway.issuer, 'jkt app');
  });

  afterAll(async () => {
    await gateway?.stop();
  });

  const resource = () => `${gateway.issuer}/everything/mcp`;
  const tokenProof = (k: DpopKey) => proof(k, { htm: 'POST', htu: `${gateway.issuer}/token` });

  async function boundCode(jkt: string): Promise<{ code: string; verifier: string }> {
    const verifier = newVerifier();
    const url = codeRequestUrl(gateway.issuer, { client, verifier, state: 's', resource: resource(), scope: 'mcp:read' });
    url.searchParams.set('dpop_jkt', jkt);
    const code = (await followAuthorization(url, client.redirectUri, { onPage: headlessUser('frank') })).searchParams.get('code');
    expect(code).toBeTruthy();
    return { code: code!, verifier };
  }

  async function redeem({ code, verifier }: { code: string; verifier: string }, headers: Record<string, string> = {}) {
    const body = new URLSearchParams({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri, client_id: client.id });
    const res = await fetch(`${gateway.issuer}/token`, { method: 'POST', headers, body });
    return { status: res.status, json: (await res.json()) as Record<string, string> };
  }

  it('a Bearer exchange (no proof) and a proof of another key are invalid_grant and leave the code; the bound key redeems it', async () => {
    const code = await boundCode(key.jkt);
    const bearer = await redeem(code);
    expect(bearer.status).toBe(400);
    expect(bearer.json).toEqual({ error: 'invalid_grant', error_description: expect.stringMatching(/dpop_jkt/) });
    const other = await redeem(code, { dpop: await tokenProof(await dpopKey('ES256')) });
    expect(other.status).toBe(400);
    expect(other.json).toEqual({ error: 'invalid_grant', error_description: expect.stringMatching(/dpop_jkt/) });
    const right = await redeem(code, { dpop: await tokenProof(key) });
    expect(right.status, JSON.stringify(right.json)).toBe(200);
    expect(right.json.token_type).toBe('DPoP');
    expect(decodeJwt(right.json.access_token!).cnf).toEqual({ jkt: key.jkt });
  });

  it('an RSA key bound by its thumbprint works too (the thumbprint is what is compared)', async () => {
    const rsa = await dpopKey('PS256');
    const right = await redeem(await boundCode(rsa.jkt), { dpop: await tokenProof(rsa) });
    expect(right.status, JSON.stringify(right.json)).toBe(200);
    expect(decodeJwt(right.json.access_token!).cnf).toEqual({ jkt: rsa.jkt });
  });

  it('a malformed dpop_jkt is refused at /authorize (a page for a dynamic client, no code)', async () => {
    for (const bad of ['', 'short', key.jkt + 'A', key.jkt.slice(0, 42) + '=', key.jkt.slice(0, 42) + '+']) {
      const url = codeRequestUrl(gateway.issuer, { client, verifier: newVerifier(), state: 's', resource: resource(), scope: 'mcp:read' });
      url.searchParams.set('dpop_jkt', bad);
      const res = await getManual(url);
      expect(res.status, bad).toBe(400);
      expect(res.headers.get('location')).toBeNull();
      expect(res.body).toMatch(/dpop_jkt/);
    }
  });
});
