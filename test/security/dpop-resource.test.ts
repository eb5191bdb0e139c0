/**
 * DPoP (RFC 9449) at protected routes, against the real gateway: key-bound tokens (`cnf.jkt`)
 * minted by a test issuer, proofs minted with jose as a client would. Every proof check has its
 * negative; every refusal is checked for status, JSON error, the DPoP challenge, and that nothing
 * reached the upstream. Replay is checked on one replica and across two sharing a real redis-server.
 */
import { createServer } from 'node:http';
import { base64url, exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DPOP_ALGORITHMS } from '../../src/config/jws-algorithms.js';
import { dpopKey, proof, type DpopKey, type ProofOptions } from '../helpers/dpop.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { closeServer, listen } from '../helpers/net.js';
import { buildRequest, rawRequest } from '../helpers/raw-http.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import {
  expectRejection,
  gatewayYaml,
  jwtRoute,
  metadataUrlOf,
  now,
  parseChallenge,
  PUBLIC_URL,
  resourceOf,
  simplify,
  simplifyRaw,
  startRecordingUpstream,
  startTestIssuer,
  tokenSecrets,
  type RecordingUpstream,
  type SimpleResponse,
  type TestIssuer,
} from '../helpers/security-fixtures.js';

const ALLOWED = '/mcp';
const REQUIRED = '/req/mcp';
const OFF = '/off/mcp';
const INTRO = '/intro/mcp';
const TOOLS_LIST = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';
const INTROSPECTION_SECRET = 'introspection-client-secret-value';
const ALGS = DPOP_ALGORITHMS.join(' ');

let issuer: TestIssuer;
let up: RecordingUpstream;
let gw: TestGateway;
let key: DpopKey;
let introspection: { url: string; answers: Map<string, Record<string, unknown>>; close: () => Promise<void> };

beforeAll(async () => {
  [issuer, up, key] = await Promise.all([startTestIssuer('RS256'), startRecordingUpstream(), dpopKey('ES256')]);
  const answers = new Map<string, Record<string, unknown>>();
  // A stand-in RFC 7662 endpoint (as in a-bearer.test.ts): answers what the test set for a token.
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const token = new URLSearchParams(Buffer.concat(chunks).toString()).get('token') ?? '';
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answers.get(token) ?? { active: false }));
    });
  });
  introspection = { url: `http://127.0.0.1:${await listen(server)}/introspect`, answers, close: () => closeServer(server) };
  const upstream = `${up.origin}/mcp`;
  gw = await startTestGateway(
    {
      'gateway.yaml': gatewayYaml(),
      'a.yaml': jwtRoute(ALLOWED, upstream, issuer),
      'req.yaml': jwtRoute(REQUIRED, upstream, issuer, { token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['RS256'] }, dpop: 'required' } }),
      'off.yaml': jwtRoute(OFF, upstream, issuer, { token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['RS256'] }, dpop: 'off' } }),
      'intro.yaml': {
        path: INTRO,
        upstream,
        authorization_servers: ['https://as.example.test'],
        token: { introspection: { endpoint: introspection.url, client_id: 'gateway', client_secret: { env: 'INTROSPECTION_SECRET' } } },
        required_scopes: ['mcp:read'],
      },
    },
    { INTROSPECTION_SECRET },
  );
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([issuer?.close(), up?.close(), introspection?.close()]);
});

const htuOf = (path: string) => `${PUBLIC_URL}${path}`;
const bound = (k: DpopKey = key, claims: Record<string, unknown> = {}, path = ALLOWED) => issuer.mint({ aud: resourceOf(path), scope: 'mcp:read', cnf: { jkt: k.jkt }, ...claims });
const proofFor = (token: string, path = ALLOWED, more: Partial<ProofOptions> = {}) => proof(key, { htm: 'POST', htu: htuOf(path), token, ...more });

async function post(target: string, headers: Record<string, string>, url = gw.url): Promise<SimpleResponse> {
  return simplify(
    await fetch(`${url}${target}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body: TOOLS_LIST,
    }),
  );
}

/** The request must be refused with nothing forwarded. */
async function refused(run: () => Promise<SimpleResponse>): Promise<SimpleResponse> {
  const before = up.requests.length;
  const res = await run();
  await new Promise((r) => setTimeout(r, 20));
  expect(up.requests.slice(before).map((r) => r.url)).toEqual([]);
  return res;
}

/** 401 with `WWW-Authenticate: DPoP error=…, algs=…` naming the route's metadata. */
function expectDpopRefusal(res: SimpleResponse, error: string, path: string, secrets: string[] = []): void {
  expectRejection(res, { status: 401, error, challenge: 'error', scheme: 'DPoP', resourceMetadata: metadataUrlOf(path) }, secrets);
  expect(parseChallenge(res.header('www-authenticate')!).params.algs).toBe(ALGS);
}

describe('a DPoP-bound token with its proof (dpop: allowed)', () => {
  it('passes, and neither Authorization nor DPoP (nor the token or proof) reaches the upstream', async () => {
    const token = await bound();
    const p = await proofFor(token);
    const before = up.requests.length;
    const res = await post(ALLOWED, { authorization: `DPoP ${token}`, dpop: p });
    expect(res.status, res.body).toBe(200);
    const seen = up.requests.slice(before);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers.filter(([n]) => ['authorization', 'dpop'].includes(n.toLowerCase()))).toEqual([]);
    expect(up.everything().includes(token) || up.everything().includes(p)).toBe(false);
  });

  it('needs a new proof on every request of a kept-alive connection, cached token or not', async () => {
    const token = await bound();
    const first = await proofFor(token);
    expect((await post(ALLOWED, { authorization: `DPoP ${token}`, dpop: first })).status).toBe(200);
    // The same connection and header: the token is recalled, the proof is still checked.
    expect((await post(ALLOWED, { authorization: `DPoP ${token}`, dpop: await proofFor(token) })).status).toBe(200);
    expectDpopRefusal(await refused(() => post(ALLOWED, { authorization: `DPoP ${token}` })), 'invalid_dpop_proof', ALLOWED, tokenSecrets(token));
    const replay = await refused(() => post(ALLOWED, { authorization: `DPoP ${token}`, dpop: first }));
    expectDpopRefusal(replay, 'invalid_dpop_proof', ALLOWED, tokenSecrets(token));
    expect(JSON.parse(replay.body).error_description).toMatch(/already used/);
  });

  it('an htu with a query or fragment is accepted (RFC 9449 §4.3 ignores them)', async () => {
    const token = await bound();
    for (const htu of [`${htuOf(ALLOWED)}?session=1`, `${htuOf(ALLOWED)}#x`, 'HTTPS://MCP.EXAMPLE.TEST:443/%6dcp']) {
      const res = await post(ALLOWED, { authorization: `DPoP ${token}`, dpop: await proofFor(token, ALLOWED, { htu }) });
      expect(res.status, htu).toBe(200);
    }
  });

  it('an unbound token still passes as Bearer on an allowed route', async () => {
    const token = await issuer.mint({ aud: resourceOf(ALLOWED), scope: 'mcp:read' });
    expect((await post(ALLOWED, { authorization: `Bearer ${token}` })).status).toBe(200);
  });
});

describe('refused proofs (RFC 9449 §4.3), nothing forwarded', () => {
  const iatOff = (seconds: number) => ({ claims: { iat: now() + seconds } });
  const cases: Array<[string, (token: string) => Promise<string>]> = [
    ['wrong method (htm GET for a POST)', (t) => proofFor(t, ALLOWED, { htm: 'GET' })],
    ['wrong path (htu of another route)', (t) => proofFor(t, ALLOWED, { htu: htuOf(REQUIRED) })],
    ['wrong origin (htu of the address connected to, not public_url)', (t) => proofFor(t, ALLOWED, { htu: `${gw.url}${ALLOWED}` })],
    ['stale iat (5 minutes old)', (t) => proofFor(t, ALLOWED, iatOff(-300))],
    ['future iat (5 minutes ahead)', (t) => proofFor(t, ALLOWED, iatOff(300))],
    ['missing ath', (t) => proofFor(t, ALLOWED, { token: undefined })],
    ['ath of another token', (t) => proofFor(t, ALLOWED, { claims: { ath: base64url.encode(new Uint8Array(32)) } })],
    ['typ JWT', (t) => proofFor(t, ALLOWED, { header: { typ: 'JWT' } })],
    ['signed by another key than its jwk', async (t) => proofFor(t, ALLOWED, { signWith: (await dpopKey()).privateKey })],
    ['alg HS256 with an oct jwk', (t) => proofFor(t, ALLOWED, { header: { alg: 'HS256', jwk: { kty: 'oct', k: base64url.encode('k'.repeat(32)) } }, signWith: new TextEncoder().encode('k'.repeat(32)) })],
    [
      'alg none',
      async (t) => {
        const [, payload] = (await proofFor(t)).split('.');
        return `${base64url.encode(JSON.stringify({ typ: 'dpop+jwt', alg: 'none', jwk: key.publicJwk }))}.${payload}.`;
      },
    ],
    [
      'a private key in jwk',
      async (t) => {
        const { privateKey } = await generateKeyPair('ES256', { extractable: true });
        return proof({ ...key, privateKey }, { htm: 'POST', htu: htuOf(ALLOWED), token: t, header: { jwk: await exportJWK(privateKey) } });
      },
    ],
    ['a valid proof by another key than cnf.jkt', async (t) => proof(await dpopKey(), { htm: 'POST', htu: htuOf(ALLOWED), token: t })],
    ['not a JWT', async () => 'not-a-proof'],
  ];
  it.each(cases)('%s: 401 invalid_dpop_proof', async (_name, make) => {
    const token = await bound();
    const p = await make(token);
    const res = await refused(() => post(ALLOWED, { authorization: `DPoP ${token}`, dpop: p }));
    expectDpopRefusal(res, 'invalid_dpop_proof', ALLOWED, tokenSecrets(token));
  });

  it('two DPoP headers: 400 invalid_request', async () => {
    const token = await bound();
    const [a, b] = [await proofFor(token), await proofFor(token)];
    const before = up.requests.length;
    const raw = await rawRequest(
      Number(new URL(gw.url).port),
      buildRequest({ method: 'POST', target: ALLOWED, host: new URL(gw.url).host, headers: [['Authorization', `DPoP ${token}`], ['DPoP', a], ['DPoP', b]], body: TOOLS_LIST }),
    );
    const res = simplifyRaw(raw);
    expectRejection(res, { status: 400, error: 'invalid_request', challenge: 'error', scheme: 'DPoP' }, tokenSecrets(token));
    expect(up.requests.length).toBe(before);
  });
});

describe('tokens and schemes', () => {
  it('a DPoP-bound token sent as Bearer: 401 invalid_token with the DPoP challenge (RFC 9449 §7.2)', async () => {
    const token = await bound();
    const res = await refused(() => post(ALLOWED, { authorization: `Bearer ${token}`, dpop: '' }));
    expectDpopRefusal(res, 'invalid_token', ALLOWED, tokenSecrets(token));
    // also with a valid proof beside it: the scheme is what binds
    const again = await refused(async () => post(ALLOWED, { authorization: `Bearer ${token}`, dpop: await proofFor(token) }));
    expectDpopRefusal(again, 'invalid_token', ALLOWED, tokenSecrets(token));
  });

  it('the DPoP scheme with an unbound token: 401 invalid_token', async () => {
    const token = await issuer.mint({ aud: resourceOf(ALLOWED), scope: 'mcp:read' });
    expectDpopRefusal(await refused(async () => post(ALLOWED, { authorization: `DPoP ${token}`, dpop: await proofFor(token) })), 'invalid_token', ALLOWED);
  });

  it.each([
    ['bound by certificate (x5t#S256), which the gateway cannot check', { 'x5t#S256': 'abc' }],
    ['cnf.jkt not a string', { jkt: 42 }],
    ['cnf a string', 'jkt'],
  ])('a token %s: refused under either scheme', async (_name, cnf) => {
    const token = await issuer.mint({ aud: resourceOf(ALLOWED), scope: 'mcp:read', cnf } as Record<string, unknown>);
    expect((await refused(() => post(ALLOWED, { authorization: `Bearer ${token}` }))).status).toBe(401);
    expect((await refused(async () => post(ALLOWED, { authorization: `DPoP ${token}`, dpop: await proofFor(token) }))).status).toBe(401);
  });

  it('a bad token under the DPoP scheme gets the DPoP challenge; missing scope is 403 with it', async () => {
    const expired = await bound(key, { exp: now() - 60 });
    expectDpopRefusal(await refused(async () => post(ALLOWED, { authorization: `DPoP ${expired}`, dpop: await proofFor(expired) })), 'invalid_token', ALLOWED);
    const narrow = await bound(key, { scope: 'mcp:write' });
    const res = await refused(async () => post(ALLOWED, { authorization: `DPoP ${narrow}`, dpop: await proofFor(narrow) }));
    expectRejection(res, { status: 403, error: 'insufficient_scope', challenge: 'error', scheme: 'DPoP', scope: 'mcp:read' });
  });
});

describe('dpop: required', () => {
  it('refuses a Bearer token with WWW-Authenticate: DPoP … algs', async () => {
    const token = await issuer.mint({ aud: resourceOf(REQUIRED), scope: 'mcp:read' });
    const res = await refused(() => post(REQUIRED, { authorization: `Bearer ${token}` }));
    expectDpopRefusal(res, 'invalid_token', REQUIRED, tokenSecrets(token));
  });

  it('no token: a bare DPoP challenge with algs', async () => {
    const res = await refused(() => post(REQUIRED, {}));
    expectRejection(res, { status: 401, error: 'unauthorized', challenge: 'bare', scheme: 'DPoP', resourceMetadata: metadataUrlOf(REQUIRED) });
    expect(res.header('www-authenticate')).toBe(`DPoP scope="mcp:read", resource_metadata="${metadataUrlOf(REQUIRED)}", algs="${ALGS}"`);
  });

  it('a bound token with its proof passes', async () => {
    const token = await bound(key, {}, REQUIRED);
    expect((await post(REQUIRED, { authorization: `DPoP ${token}`, dpop: await proofFor(token, REQUIRED) })).status).toBe(200);
  });

  it('its RFC 9728 metadata says dpop_bound_access_tokens_required', async () => {
    const required: unknown = await (await fetch(`${gw.url}/.well-known/oauth-protected-resource${REQUIRED}`)).json();
    expect(required).toMatchObject({ dpop_bound_access_tokens_required: true, dpop_signing_alg_values_supported: [...DPOP_ALGORITHMS] });
    const allowed = (await (await fetch(`${gw.url}/.well-known/oauth-protected-resource${ALLOWED}`)).json()) as Record<string, unknown>;
    expect(allowed.dpop_bound_access_tokens_required).toBeUndefined();
    expect(allowed.dpop_signing_alg_values_supported).toEqual([...DPOP_ALGORITHMS]);
  });
});

describe('dpop: off', () => {
  it('the DPoP scheme is unknown: 401 with the Bearer challenge; a bound token as Bearer is still refused', async () => {
    const token = await bound(key, {}, OFF);
    const res = await refused(async () => post(OFF, { authorization: `DPoP ${token}`, dpop: await proofFor(token, OFF) }));
    expectRejection(res, { status: 401, error: 'unauthorized', challenge: 'bare', resourceMetadata: metadataUrlOf(OFF) });
    expect((await refused(() => post(OFF, { authorization: `Bearer ${token}` }))).status).toBe(401);
    const metadata = (await (await fetch(`${gw.url}/.well-known/oauth-protected-resource${OFF}`)).json()) as Record<string, unknown>;
    expect(metadata.dpop_signing_alg_values_supported).toBeUndefined();
  });
});

describe('introspection: cnf.jkt from the introspection answer (RFC 9449 §6.2)', () => {
  const active = (extra: Record<string, unknown>) => ({ active: true, sub: 'alice', client_id: 'c', aud: resourceOf(INTRO), scope: 'mcp:read', exp: now() + 300, ...extra });

  it('a bound opaque token needs the DPoP scheme and a proof of its key', async () => {
    const token = `opaque-${Date.now()}-bound`;
    introspection.answers.set(token, active({ cnf: { jkt: key.jkt }, token_type: 'DPoP' }));
    expectDpopRefusal(await refused(() => post(INTRO, { authorization: `Bearer ${token}` })), 'invalid_token', INTRO, [token]);
    expect((await post(INTRO, { authorization: `DPoP ${token}`, dpop: await proofFor(token, INTRO) })).status).toBe(200);
    const other = await proof(await dpopKey(), { htm: 'POST', htu: htuOf(INTRO), token });
    expectDpopRefusal(await refused(() => post(INTRO, { authorization: `DPoP ${token}`, dpop: other })), 'invalid_dpop_proof', INTRO, [token]);
  });

  it('an unbound opaque token under the DPoP scheme is refused', async () => {
    const token = `opaque-${Date.now()}-unbound`;
    introspection.answers.set(token, active({}));
    expectDpopRefusal(await refused(async () => post(INTRO, { authorization: `DPoP ${token}`, dpop: await proofFor(token, INTRO) })), 'invalid_token', INTRO, [token]);
    expect((await post(INTRO, { authorization: `Bearer ${token}` })).status).toBe(200);
  });
});

describe('replay across two replicas sharing a real redis-server', () => {
  let redis: RedisServer;
  const replicas: TestGateway[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    const files = {
      'gateway.yaml': gatewayYaml({ store: { kind: 'redis', url: redis.url, key_prefix: 'dpop:' } }),
      'a.yaml': jwtRoute(ALLOWED, `${up.origin}/mcp`, issuer),
    };
    replicas.push(await startTestGateway(files), await startTestGateway(files));
  });

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await redis?.stop();
  });

  it('a proof used on replica A is refused on replica B (and again on A)', async () => {
    const [a, b] = replicas as [TestGateway, TestGateway];
    const token = await bound();
    const p = await proofFor(token);
    expect((await post(ALLOWED, { authorization: `DPoP ${token}`, dpop: p }, a.url)).status).toBe(200);
    expectDpopRefusal(await refused(() => post(ALLOWED, { authorization: `DPoP ${token}`, dpop: p }, b.url)), 'invalid_dpop_proof', ALLOWED);
    expectDpopRefusal(await refused(() => post(ALLOWED, { authorization: `DPoP ${token}`, dpop: p }, a.url)), 'invalid_dpop_proof', ALLOWED);
    expect((await post(ALLOWED, { authorization: `DPoP ${token}`, dpop: await proofFor(token) }, b.url)).status).toBe(200);
  });

  it('concurrent use of one proof on both replicas: exactly one passes', async () => {
    const [a, b] = replicas as [TestGateway, TestGateway];
    const token = await bound();
    const p = await proofFor(token);
    const results = await Promise.all([a, b, a, b].map((r) => post(ALLOWED, { authorization: `DPoP ${token}`, dpop: p }, r.url)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 401, 401, 401]);
  });
});
