/**
 * DPoP in the built-in authorization server (RFC 9449 §5): a client that sends a proof at /token
 * gets `token_type: DPoP` and an access token bound to the proof's key (`cnf.jkt`), which the
 * gateway then accepts only with the DPoP scheme and a proof of that key; a public client's refresh
 * token is bound to the same key. Real gateway, dev login, proofs minted with jose.
 */
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DPOP_ALGORITHMS } from '../../src/config/jws-algorithms.js';
import { headlessUser, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { dpopKey, proof, type DpopKey } from '../helpers/dpop.js';
import { followAuthorization } from '../helpers/mcp-client.js';
import { codeRequestUrl, newVerifier, registerPublicClient, type PublicClient } from '../helpers/oauth-requests.js';
import { startRecordingUpstream, type RecordingUpstream } from '../helpers/security-fixtures.js';

const SVC_SECRET = 'svc-secret-value-0123456789';
const TOOLS_LIST = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';
const ALLOWED = '/everything/mcp';
const REQUIRED = '/strict/mcp';

let up: RecordingUpstream;
let gateway: AsGateway;
let key: DpopKey;
let client: PublicClient;

beforeAll(async () => {
  [up, key] = await Promise.all([startRecordingUpstream(), dpopKey('ES256')]);
  const route = { scopes_supported: ['mcp:read'], required_scopes: ['mcp:read'] };
  gateway = await startAsGateway({
    upstream: `${up.origin}/mcp`,
    routes: {
      'allowed.yaml': { path: ALLOWED, ...route },
      'required.yaml': { path: REQUIRED, ...route, token: { dpop: 'required' } },
    },
    authorizationServer: {
      clients: [{ client_id: 'svc', client_secret: { env: 'SVC_SECRET' }, grant_types: ['client_credentials'], scopes: ['mcp:read'] }],
    },
    env: { SVC_SECRET },
  });
  client = await registerPublicClient(gateway.issuer, 'dpop app');
});

afterAll(async () => {
  await gateway?.stop();
  await up?.close();
});

const tokenEndpoint = () => `${gateway.issuer}/token`;
const resourceOf = (path: string) => `${gateway.issuer}${path}`;

async function token(params: Record<string, string>, headers: Record<string, string> = {}) {
  const res = await fetch(tokenEndpoint(), { method: 'POST', headers, body: new URLSearchParams(params) });
  return { status: res.status, json: (await res.json()) as Record<string, string> };
}

const tokenProof = (k: DpopKey = key, more: { htu?: string; htm?: string } = {}) => proof(k, { htm: more.htm ?? 'POST', htu: more.htu ?? tokenEndpoint() });

/** The dev-login browser flow of the public client: a code and its verifier. */
async function obtainCode(path = ALLOWED): Promise<{ code: string; verifier: string }> {
  const verifier = newVerifier();
  const url = codeRequestUrl(gateway.issuer, { client, verifier, state: 's', resource: resourceOf(path), scope: 'mcp:read' });
  const callback = await followAuthorization(url, client.redirectUri, { onPage: headlessUser('dana') });
  const code = callback.searchParams.get('code');
  expect(code, callback.href).toBeTruthy();
  return { code: code!, verifier };
}

const redeem = ({ code, verifier }: { code: string; verifier: string }, headers: Record<string, string> = {}) =>
  token({ grant_type: 'authorization_code', code, code_verifier: verifier, redirect_uri: client.redirectUri, client_id: client.id }, headers);

async function call(path: string, authorization: string, dpop?: string) {
  const res = await fetch(`${gateway.issuer}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization, ...(dpop && { dpop }) },
    body: TOOLS_LIST,
  });
  return { status: res.status, challenge: res.headers.get('www-authenticate') ?? '', body: await res.text() };
}

const resourceProof = (accessToken: string, path: string, k: DpopKey = key) => proof(k, { htm: 'POST', htu: resourceOf(path), token: accessToken });

describe('metadata', () => {
  it('advertises dpop_signing_alg_values_supported (RFC 9449 §5.1)', async () => {
    const metadata = (await (await fetch(`${gateway.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(metadata.dpop_signing_alg_values_supported).toEqual([...DPOP_ALGORITHMS]);
  });
});

describe('authorization code with a proof: a DPoP-bound token that works only with proofs', () => {
  it('token_type DPoP, cnf.jkt = the key thumbprint; the gateway takes it only under DPoP with that key', async () => {
    const res = await redeem(await obtainCode(), { dpop: await tokenProof() });
    expect(res.status, JSON.stringify(res.json)).toBe(200);
    expect(res.json.token_type).toBe('DPoP');
    const accessToken = res.json.access_token!;
    expect(decodeJwt(accessToken).cnf).toEqual({ jkt: key.jkt });

    expect((await call(ALLOWED, `DPoP ${accessToken}`, await resourceProof(accessToken, ALLOWED))).status).toBe(200);
    const asBearer = await call(ALLOWED, `Bearer ${accessToken}`);
    expect(asBearer.status).toBe(401);
    expect(asBearer.challenge).toMatch(/^DPoP error="invalid_token"/);
    const otherKey = await call(ALLOWED, `DPoP ${accessToken}`, await resourceProof(accessToken, ALLOWED, await dpopKey()));
    expect(otherKey.status).toBe(401);
    expect(otherKey.challenge).toMatch(/^DPoP error="invalid_dpop_proof"/);
    expect((await call(ALLOWED, `DPoP ${accessToken}`)).status).toBe(401);
  });

  it('without a proof: a Bearer token, refused by a dpop: required route with the DPoP challenge', async () => {
    const res = await redeem(await obtainCode(REQUIRED));
    expect(res.json.token_type).toBe('Bearer');
    expect(decodeJwt(res.json.access_token!).cnf).toBeUndefined();
    const refused = await call(REQUIRED, `Bearer ${res.json.access_token}`);
    expect(refused.status).toBe(401);
    expect(refused.challenge).toMatch(/^DPoP error="invalid_token".*algs="/);
  });
});

describe('refresh tokens of a public client are bound to its key (RFC 9449 §5)', () => {
  it('a refresh without a proof, or with another key, is invalid_grant and costs nothing; with the key it rotates', async () => {
    const first = await redeem(await obtainCode(), { dpop: await tokenProof() });
    const refreshToken = first.json.refresh_token!;
    expect(refreshToken).toBeTruthy();
    const refresh = { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: client.id };

    const noProof = await token(refresh);
    expect(noProof).toMatchObject({ status: 400, json: { error: 'invalid_grant' } });
    const otherKey = await token(refresh, { dpop: await tokenProof(await dpopKey()) });
    expect(otherKey).toMatchObject({ status: 400, json: { error: 'invalid_grant' } });

    // The refused attempts did not rotate (or revoke) it: the key holder refreshes.
    const rotated = await token(refresh, { dpop: await tokenProof() });
    expect(rotated.status, JSON.stringify(rotated.json)).toBe(200);
    expect(rotated.json.token_type).toBe('DPoP');
    expect(decodeJwt(rotated.json.access_token!).cnf).toEqual({ jkt: key.jkt });
    // And the new refresh token is bound too.
    const next = { ...refresh, refresh_token: rotated.json.refresh_token! };
    expect(await token(next)).toMatchObject({ status: 400, json: { error: 'invalid_grant' } });
    expect((await token(next, { dpop: await tokenProof() })).status).toBe(200);
  });
});

describe('bad proofs at /token: 400 invalid_dpop_proof, nothing issued, the code still usable', () => {
  it.each([
    ['htu of another endpoint', () => tokenProof(key, { htu: `${gateway.issuer}/revoke` })],
    ['htu of a protected route', () => tokenProof(key, { htu: resourceOf(ALLOWED) })],
    ['htm GET', () => tokenProof(key, { htm: 'GET' })],
    ['not a JWT', async () => 'garbage'],
    ['two proofs', async () => `${await tokenProof()}, ${await tokenProof()}`],
  ])('%s', async (_name, make) => {
    const code = await obtainCode();
    const res = await redeem(code, { dpop: await make() });
    expect(res).toMatchObject({ status: 400, json: { error: 'invalid_dpop_proof' } });
    expect(res.json.access_token).toBeUndefined();
    expect((await redeem(code, { dpop: await tokenProof() })).status).toBe(200);
  });

  it('a replayed proof', async () => {
    const used = await tokenProof();
    expect((await redeem(await obtainCode(), { dpop: used })).status).toBe(200);
    expect(await redeem(await obtainCode(), { dpop: used })).toMatchObject({ status: 400, json: { error: 'invalid_dpop_proof' } });
  });
});

describe('client_credentials with a proof', () => {
  const basic = `Basic ${Buffer.from(`svc:${SVC_SECRET}`).toString('base64')}`;

  it('a bound machine token passes a dpop: required route with its proof; a Bearer one does not', async () => {
    const bound = await token({ grant_type: 'client_credentials', resource: resourceOf(REQUIRED) }, { authorization: basic, dpop: await tokenProof() });
    expect(bound.json.token_type).toBe('DPoP');
    expect((await call(REQUIRED, `DPoP ${bound.json.access_token}`, await resourceProof(bound.json.access_token!, REQUIRED))).status).toBe(200);
    const bearer = await token({ grant_type: 'client_credentials', resource: resourceOf(REQUIRED) }, { authorization: basic });
    expect(bearer.json.token_type).toBe('Bearer');
    expect((await call(REQUIRED, `Bearer ${bearer.json.access_token}`)).status).toBe(401);
  });
});
