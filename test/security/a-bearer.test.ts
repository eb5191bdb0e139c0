/**
 * SECURITY-CASES group A (bearer tokens, cases 1–8) against the real gateway: every rejection is
 * checked for its status, JSON `error`, `WWW-Authenticate` shape, that it never echoes the token,
 * and that the upstream received nothing. Token and presentation variants live in corpora/*.json.
 */
import { constants, KeyObject, sign as cryptoSign } from 'node:crypto';
import { Agent as HttpAgent, createServer, request as httpRequest, type Server } from 'node:http';
import { deflateRawSync } from 'node:zlib';
import {
  base64url,
  CompactSign,
  decodeProtectedHeader,
  EncryptJWT,
  exportJWK,
  exportSPKI,
  generateKeyPair,
  importJWK,
  SignJWT,
  type CryptoKey,
  type JWK,
  type JWTPayload,
} from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { closeServer, freePort, listen } from '../helpers/net.js';
import { buildRequest, rawRequest, unescapeBytes } from '../helpers/raw-http.js';
import { sleepUntil } from '../helpers/wait.js';
import { readCorpus } from './corpora/corpus.js';
import {
  expectRejection,
  gatewayYaml,
  jwtRoute,
  metadataUrlOf,
  now,
  resourceOf,
  simplify,
  simplifyRaw,
  startRecordingUpstream,
  startTestIssuer,
  tokenSecrets,
  type ExpectedRejection,
  type RecordingUpstream,
  type TestIssuer,
} from '../helpers/security-fixtures.js';

interface Expectation extends Omit<ExpectedRejection, 'status' | 'challenge'> {
  status: number | number[];
  challenge?: ExpectedRejection['challenge'];
}

interface TokenTrick {
  name: string;
  sign: 'issuer' | 'attacker' | 'attacker-ec' | 'none' | 'strip-signature' | 'hmac-public-key' | 'jwe-rsa-oaep' | 'raw' | 'deflated-payload';
  header?: Record<string, unknown>;
  claims?: Record<string, unknown>;
  omit?: string[];
  keyFormat?: 'spki-pem' | 'jwk-json' | 'modulus';
  relabel?: Record<string, unknown>;
  swapSignature?: boolean;
  /** Sign with node:crypto instead of jose (what the refused-header cases use). */
  nodeSigner?: boolean;
  scheme?: string;
  raw?: string;
  inflatedBytes?: number;
  fast?: boolean;
  expect: Expectation;
}

interface BearerTrick {
  name: string;
  method?: string;
  target?: string;
  contentType?: string;
  body?: string;
  headers: Array<[string, string]>;
  rawHeaderBytes?: string;
  expect: Expectation;
}

const corpus = <T>(name: string): T[] => readCorpus<{ cases: T[] }>(name).cases;
const tokenTricks = corpus<TokenTrick>('token-tricks.json');
const bearerTricks = corpus<BearerTrick>('bearer-tricks.json');

const PATH = '/a/mcp';
const OPEN = '/open/mcp';
const STRICT = '/strict/mcp';
const TOOLS_LIST = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';
const INTROSPECTION_SECRET = 'introspection-client-secret-value';

let issuer: TestIssuer;
let stormIssuer: TestIssuer;
let deadIssuer: TestIssuer;
let up: RecordingUpstream;
let gw: TestGateway;
let attacker: { privateKey: CryptoKey; publicJwk: JWK };
let attackerEc: CryptoKey;
let trap: { server: Server; origin: string; hits: string[] };
let hanging: { server: Server; origin: string };
let introspection: IntrospectionEndpoint;
const presented: string[] = [];

interface IntrospectionEndpoint {
  url: string;
  answers: Map<string, Record<string, unknown> | 'error'>;
  calls: Map<string, number>;
  close(): Promise<void>;
}

/** RFC 7662 endpoint: client_secret_basic, answers from a table keyed by token. */
async function startIntrospection(): Promise<IntrospectionEndpoint> {
  const answers = new Map<string, Record<string, unknown> | 'error'>();
  const calls = new Map<string, number>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      // RFC 6749 §2.3.1: id and secret are form-urlencoded, then base64'd.
      const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
      const [id = '', secret = ''] = Buffer.from(basic, 'base64').toString().split(':').map((p) => decodeURIComponent(p));
      if (id !== 'gateway' || secret !== INTROSPECTION_SECRET) return res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"invalid_client"}');
      const token = new URLSearchParams(Buffer.concat(chunks).toString()).get('token') ?? '';
      calls.set(token, (calls.get(token) ?? 0) + 1);
      const answer = answers.get(token) ?? { active: false };
      if (answer === 'error') return res.writeHead(500, { 'content-type': 'text/plain' }).end('boom');
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}/introspect`, answers, calls, close: () => closeServer(server) };
}

function resolve(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(resolve);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(v)]));
  if (typeof value !== 'string') return value;
  const rel = /^\$now([+-]\d+)$/.exec(value);
  if (rel) return now() + Number(rel[1]);
  const rep = /^\$repeat:(\d+)$/.exec(value);
  if (rep) return 'a'.repeat(Number(rep[1]));
  if (value === '$attackerJwk') return attacker.publicJwk;
  return value
    .replaceAll('$ISSUER_UPPER', issuer.issuer.toUpperCase())
    .replaceAll('$issuer', issuer.issuer)
    .replaceAll('$resource', resourceOf(PATH))
    .replaceAll('$kid', issuer.kid)
    .replaceAll('$trap', trap.origin);
}

const b64json = (value: unknown) => base64url.encode(JSON.stringify(value));

/** Header for a signed trick: the issuer's defaults, then the case's (null removes a parameter). */
function headerFor(c: TokenTrick, alg: string): Record<string, unknown> {
  const header: Record<string, unknown> = { alg, kid: issuer.kid, typ: 'at+jwt', ...(resolve(c.header ?? {}) as Record<string, unknown>) };
  for (const [k, v] of Object.entries(header)) if (v === null) delete header[k];
  return header;
}

function claimsFor(c: TokenTrick): JWTPayload {
  const claims: JWTPayload = {
    iss: issuer.issuer,
    sub: 'alice',
    client_id: 'client-a',
    aud: resourceOf(PATH),
    iat: now(),
    exp: now() + 300,
    scope: 'mcp:read',
    ...(resolve(c.claims ?? {}) as JWTPayload),
  };
  for (const name of c.omit ?? []) delete claims[name];
  return claims;
}

async function buildToken(c: TokenTrick): Promise<string> {
  const claims = claimsFor(c);
  const sign = (key: CryptoKey | Uint8Array, header: Record<string, unknown>) =>
    (c.nodeSigner || joseRefuses(header)) && !(key instanceof Uint8Array)
      ? signWithoutJose(header, claims, key)
      : new SignJWT(claims).setProtectedHeader(header as { alg: string }).sign(key);
  switch (c.sign) {
    case 'issuer': {
      let token = await sign(issuer.privateKey, headerFor(c, issuer.alg));
      if (c.relabel) {
        const [, payload, signature] = token.split('.');
        token = `${b64json({ ...decodeProtectedHeader(token), ...c.relabel })}.${payload}.${signature}`;
      }
      if (c.swapSignature) {
        const other = await sign(issuer.privateKey, { ...headerFor(c, issuer.alg), typ: 'JWT' });
        token = `${token.split('.').slice(0, 2).join('.')}.${other.split('.')[2]}`;
      }
      return token;
    }
    case 'attacker':
      return sign(attacker.privateKey, headerFor(c, 'RS256'));
    case 'attacker-ec':
      return sign(attackerEc, headerFor(c, 'ES256'));
    case 'none':
      return `${b64json(headerFor(c, 'none'))}.${b64json(claims)}.`;
    case 'strip-signature': {
      const token = await sign(issuer.privateKey, headerFor(c, issuer.alg));
      return `${token.split('.').slice(0, 2).join('.')}.`;
    }
    case 'hmac-public-key': {
      const secret =
        c.keyFormat === 'spki-pem'
          ? new TextEncoder().encode(await exportSPKI(issuer.publicKey))
          : c.keyFormat === 'jwk-json'
            ? new TextEncoder().encode(JSON.stringify(issuer.publicJwk))
            : base64url.decode(issuer.publicJwk.n!);
      return sign(secret, headerFor(c, 'HS256'));
    }
    case 'jwe-rsa-oaep': {
      const { kid: _kid, alg: _alg, use: _use, ...jwk } = issuer.publicJwk;
      const key = await importJWK({ ...jwk, alg: 'RSA-OAEP-256' }, 'RSA-OAEP-256');
      return new EncryptJWT(claims).setProtectedHeader({ alg: 'RSA-OAEP-256', enc: 'A256GCM', kid: issuer.kid }).encrypt(key);
    }
    case 'deflated-payload': {
      const bomb = deflateRawSync(Buffer.alloc(c.inflatedBytes ?? 1_000_000, 0x30), { level: 9 });
      return new CompactSign(bomb).setProtectedHeader(headerFor(c, issuer.alg) as { alg: string }).sign(issuer.privateKey);
    }
    case 'raw':
      if (c.raw === '$pbes2Jwe') {
        const header = { alg: 'PBES2-HS512+A256KW', enc: 'A256GCM', p2c: 2_147_483_647, p2s: base64url.encode('saltsaltsaltsalt'), kid: issuer.kid };
        return [b64json(header), 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'AAAAAAAAAAAAAAAA', 'AAAAAAAA', 'AAAAAAAAAAAAAAAAAAAAAA'].join('.');
      }
      return resolve(c.raw) as string;
  }
}

/** Headers jose will not sign (crit, b64, an alg the key was not made for): the tricks an attacker's own tooling emits. */
const joseRefuses = (header: Record<string, unknown>) =>
  header.crit !== undefined || header.b64 !== undefined || !['RS256', 'ES256', 'HS256', 'HS512'].includes(String(header.alg));

/**
 * A genuine signature over an arbitrary header with node:crypto: RSASSA-PKCS1-v1_5 or PSS with
 * the hash the `alg` names (RS256 for any non-RSA name on an RSA key), ECDSA P-256 for EC keys.
 */
function signWithoutJose(header: Record<string, unknown>, claims: JWTPayload, key: CryptoKey): string {
  const input = `${b64json(header)}.${b64json(claims)}`;
  const keyObject = KeyObject.from(key);
  const alg = String(header.alg);
  const hash = /(384|512)$/.exec(alg)?.[1] ?? '256';
  const signature =
    keyObject.asymmetricKeyType === 'ec'
      ? cryptoSign('sha256', Buffer.from(input), { key: keyObject, dsaEncoding: 'ieee-p1363' })
      : alg.startsWith('PS')
        ? cryptoSign(`sha${hash}`, Buffer.from(input), { key: keyObject, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: Number(hash) / 8 })
        : cryptoSign(alg.startsWith('RS') ? `sha${hash}` : 'sha256', Buffer.from(input), keyObject);
  return `${input}.${base64url.encode(signature)}`;
}

const statuses = (s: number | number[]) => (Array.isArray(s) ? s : [s]);

/** A POST (tools/list) to `path` with the given Authorization value. */
async function post(path: string, authorization?: string, init: { headers?: Record<string, string>; body?: string } = {}) {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...init.headers };
  if (authorization !== undefined) headers.authorization = authorization;
  return simplify(await fetch(`${gw.url}${path}`, { method: 'POST', headers, body: init.body ?? TOOLS_LIST }));
}

/** Asserts nothing reached the upstream while `run` ran, and returns what `run` returned. */
async function nothingUpstream<T>(run: () => Promise<T>): Promise<T> {
  const before = up.requests.length;
  const result = await run();
  await new Promise((r) => setTimeout(r, 20));
  expect(up.requests.slice(before).map((r) => `${r.method} ${r.url}`)).toEqual([]);
  return result;
}

beforeAll(async () => {
  [issuer, stormIssuer, deadIssuer, up, introspection] = await Promise.all([
    startTestIssuer('RS256'),
    startTestIssuer('RS256'),
    startTestIssuer('RS256'),
    startRecordingUpstream(),
    startIntrospection(),
  ]);
  const rsa = await generateKeyPair('RS256', { extractable: true });
  attacker = { privateKey: rsa.privateKey, publicJwk: { ...(await exportJWK(rsa.publicKey)), kid: 'attacker', alg: 'RS256' } };
  attackerEc = (await generateKeyPair('ES256')).privateKey;

  const hits: string[] = [];
  const trapServer = createServer((req, res) => {
    hits.push(req.url ?? '');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: [attacker.publicJwk] }));
  });
  trap = { server: trapServer, origin: `http://127.0.0.1:${await listen(trapServer)}`, hits };
  const hangingServer = createServer(() => undefined); // accepts, never answers
  hanging = { server: hangingServer, origin: `http://127.0.0.1:${await listen(hangingServer)}` };
  const closedPort = await freePort();

  const upstream = `${up.origin}/mcp`;
  const introspectionRoute = (path: string, endpoint: string) => ({
    path,
    upstream,
    authorization_servers: ['https://as.example.test'],
    token: { introspection: { endpoint, client_id: 'gateway', client_secret: { env: 'INTROSPECTION_SECRET' }, cache_ttl: '60s' } },
    scopes_supported: ['mcp:read'],
    required_scopes: ['mcp:read'],
  });
  deadIssuer.available = false;
  gw = await startTestGateway(
    {
      'gateway.yaml': gatewayYaml(),
      'a.yaml': jwtRoute(PATH, upstream, issuer),
      'open.yaml': jwtRoute(OPEN, upstream, issuer, { required_scopes: [] }),
      'strict.yaml': jwtRoute(STRICT, upstream, issuer, {
        token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: [issuer.alg], clock_skew: '1s' } },
      }),
      'storm.yaml': jwtRoute('/storm/mcp', upstream, stormIssuer),
      'dead.yaml': jwtRoute('/dead/mcp', upstream, deadIssuer),
      'unreachable.yaml': jwtRoute('/unreachable/mcp', upstream, { ...issuer, jwksUri: `http://127.0.0.1:${closedPort}/jwks.json` }),
      'hanging.yaml': jwtRoute('/hanging/mcp', upstream, { ...issuer, jwksUri: `${hanging.origin}/jwks.json` }),
      'intro.yaml': introspectionRoute('/intro/mcp', introspection.url),
      'intro-down.yaml': introspectionRoute('/intro-down/mcp', `http://127.0.0.1:${closedPort}/introspect`),
      'intro-hanging.yaml': introspectionRoute('/intro-hanging/mcp', `${hanging.origin}/introspect`),
    },
    { INTROSPECTION_SECRET },
  );
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([issuer?.close(), stormIssuer?.close(), deadIssuer?.close(), up?.close(), introspection?.close()]);
  await Promise.all([trap && closeServer(trap.server), hanging && closeServer(hanging.server)]);
});

describe('[A1] no token: 401 with a bare challenge', () => {
  it('names resource_metadata and the required scope, no error parameter', async () => {
    const res = await nothingUpstream(() => post(PATH));
    expectRejection(res, { status: 401, error: 'unauthorized', challenge: 'bare', resourceMetadata: metadataUrlOf(PATH), scope: 'mcp:read' });
    expect(res.header('www-authenticate')).toBe(`Bearer scope="mcp:read", resource_metadata="${metadataUrlOf(PATH)}"`);
  });

  it('has no scope parameter on a route without required scopes', async () => {
    const res = await nothingUpstream(() => post(OPEN));
    expectRejection(res, { status: 401, error: 'unauthorized', challenge: 'bare', resourceMetadata: metadataUrlOf(OPEN), scope: null });
    expect(res.header('www-authenticate')).toBe(`Bearer resource_metadata="${metadataUrlOf(OPEN)}"`);
  });

  it.each(['GET', 'DELETE'])('answers %s the same way', async (method) => {
    const res = await nothingUpstream(async () => simplify(await fetch(`${gw.url}${PATH}`, { method, headers: { 'mcp-session-id': 'x' } })));
    expectRejection(res, { status: 401, error: 'unauthorized', challenge: 'bare', resourceMetadata: metadataUrlOf(PATH), scope: 'mcp:read' });
  });
});

describe('[A2] [A4] [A5] token tricks (corpora/token-tricks.json)', () => {
  it.each(tokenTricks.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const token = await buildToken(c);
    presented.push(token);
    const before = up.requests.length;
    const started = performance.now();
    const res = await post(PATH, `${c.scheme ?? 'Bearer'} ${token}`);
    const elapsed = performance.now() - started;
    const want = statuses(c.expect.status);
    expect(want, res.body).toContain(res.status);
    const seen = up.requests.slice(before);
    if (res.status === 200) {
      expect(seen).toHaveLength(1);
      expect(seen[0]!.headers.filter(([n]) => n.toLowerCase() === 'authorization')).toEqual([]);
      expect(up.everything().includes(token)).toBe(false);
    } else {
      expect(seen).toEqual([]);
      const challenge = res.status === 401 || (res.status === 400 && c.expect.error !== undefined) ? 'error' : undefined;
      expectRejection(res, { status: res.status, error: c.expect.error, challenge, resourceMetadata: metadataUrlOf(PATH) }, tokenSecrets(token));
    }
    // Refused before any key work (a PBES2 p2c of 2^31 would take hours), with room for a loaded machine.
    if (c.fast) expect(elapsed).toBeLessThan(5_000);
    expect(trap.hits).toEqual([]);
  });

  it('never fetched a jku / x5u URL, even later', async () => {
    await new Promise((r) => setTimeout(r, 300));
    expect(trap.hits).toEqual([]);
  });

  it('fetched the trusted JWKS once for the whole table (cooldown)', () => {
    expect(issuer.jwksFetches).toBeGreaterThanOrEqual(1);
    expect(issuer.jwksFetches).toBeLessThanOrEqual(2);
  });
});

describe('[A3] unknown-kid storms and an unreachable JWKS', () => {
  it('refetches the JWKS at most once per cooldown under a storm of unknown kids', async () => {
    const good = await stormIssuer.mint({ aud: resourceOf('/storm/mcp') });
    expect((await post('/storm/mcp', `Bearer ${good}`)).status).toBe(200);
    const fetchesBefore = stormIssuer.jwksFetches;
    const storm = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        new SignJWT({ iss: stormIssuer.issuer, sub: 'mallory', aud: resourceOf('/storm/mcp'), exp: now() + 60, scope: 'mcp:read' })
          .setProtectedHeader({ alg: 'RS256', kid: `storm-${i}-${Math.random()}` })
          .sign(attacker.privateKey),
      ),
    );
    const answers = await nothingUpstream(() => Promise.all(storm.map((t) => post('/storm/mcp', `Bearer ${t}`))));
    for (const [i, res] of answers.entries()) {
      expectRejection(res, { status: 401, error: 'invalid_token', challenge: 'error', resourceMetadata: metadataUrlOf('/storm/mcp') }, tokenSecrets(storm[i]!));
    }
    expect(stormIssuer.jwksFetches - fetchesBefore).toBeLessThanOrEqual(1);
    // the legitimate token still works during the cooldown
    expect((await post('/storm/mcp', `Bearer ${good}`)).status).toBe(200);
  });

  it('answers 503 (never 200) while the JWKS endpoint fails, and recovers without a restart', async () => {
    const token = await deadIssuer.mint({ aud: resourceOf('/dead/mcp') });
    for (let i = 0; i < 3; i++) {
      const res = await nothingUpstream(() => post('/dead/mcp', `Bearer ${token}`));
      expect([401, 503]).toContain(res.status);
      expectRejection(res, { status: res.status, error: res.status === 503 ? 'temporarily_unavailable' : 'invalid_token' }, tokenSecrets(token));
    }
    expect(deadIssuer.jwksFetches).toBeGreaterThanOrEqual(1);
    deadIssuer.available = true;
    await vi.waitFor(async () => expect((await post('/dead/mcp', `Bearer ${token}`)).status).toBe(200), { timeout: 20_000, interval: 250 });
  });

  it('answers 503 when the JWKS port is closed', async () => {
    const token = await issuer.mint({ aud: resourceOf('/unreachable/mcp') });
    const res = await nothingUpstream(() => post('/unreachable/mcp', `Bearer ${token}`));
    expect([401, 503]).toContain(res.status);
    expectRejection(res, { status: res.status, error: res.status === 503 ? 'temporarily_unavailable' : 'invalid_token' }, tokenSecrets(token));
  });

  it('answers a hanging JWKS within its timeout instead of hanging too', async () => {
    const token = await issuer.mint({ aud: resourceOf('/hanging/mcp') });
    const started = Date.now();
    const res = await nothingUpstream(() => post('/hanging/mcp', `Bearer ${token}`));
    expect([401, 503]).toContain(res.status);
    expect(Date.now() - started).toBeLessThan(8_000);
  });
});

describe('[A1] [A6] presenting the credential (corpora/bearer-tricks.json, raw socket)', () => {
  it.each(bearerTricks.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const token = await issuer.mint({ aud: resourceOf(PATH), scope: 'mcp:read' });
    presented.push(token);
    const fill = (s: string) => resolve(s.replaceAll('$token', token).replaceAll('$path', PATH)) as string;
    const method = c.method ?? 'POST';
    const body = Buffer.from(fill(c.body ?? TOOLS_LIST));
    const bytes = buildRequest({
      method,
      target: fill(c.target ?? PATH),
      host: `127.0.0.1:${gw.port}`,
      headers: c.headers.map(([n, v]) => [n, fill(v)] as const),
      rawHeaderBytes: c.rawHeaderBytes ? unescapeBytes(fill(c.rawHeaderBytes)) : undefined,
      body,
      contentType: c.contentType,
    });
    const before = up.requests.length;
    const res = simplifyRaw(await rawRequest(gw.port, bytes));
    expect(statuses(c.expect.status), res.body).toContain(res.status);
    const seen = up.requests.slice(before);
    if (res.status === 200) {
      expect(seen).toHaveLength(1);
      expect(seen[0]!.headers.some(([n]) => n.toLowerCase() === 'authorization')).toBe(false);
      expect(up.everything().includes(token)).toBe(false);
      return;
    }
    expect(seen).toEqual([]);
    expectRejection(
      res,
      {
        status: res.status,
        error: c.expect.error,
        challenge: c.expect.challenge,
        scheme: c.expect.scheme,
        resourceMetadata: metadataUrlOf(PATH),
        ...(c.expect.challenge === 'bare' && { scope: 'mcp:read' }),
      },
      tokenSecrets(token),
    );
  });
});

describe('[A7] introspection (opaque tokens)', () => {
  const INTRO = '/intro/mcp';
  const active = (extra: Record<string, unknown> = {}) => ({
    active: true,
    sub: 'alice',
    client_id: 'client-a',
    aud: resourceOf(INTRO),
    scope: 'mcp:read',
    exp: now() + 300,
    ...extra,
  });
  const opaque = () => `opaque-${Math.random().toString(36).slice(2)}-${Date.now()}`;

  it('accepts an active token for this resource and caches the answer', async () => {
    const token = opaque();
    introspection.answers.set(token, active());
    expect((await post(INTRO, `Bearer ${token}`)).status).toBe(200);
    expect((await post(INTRO, `Bearer ${token}`)).status).toBe(200);
    expect(introspection.calls.get(token)).toBe(1);
    expect(up.everything().includes(token)).toBe(false);
  });

  const refusals: Array<[string, Record<string, unknown> | 'error', Expectation]> = [
    ['active: false', { active: false }, { status: 401, error: 'invalid_token' }],
    ['active: "true" (a string)', { ...active(), active: 'true' }, { status: [401, 503] }],
    ['foreign aud', active({ aud: 'https://other.example/mcp' }), { status: 401, error: 'invalid_token' }],
    ['aud of another route on this gateway', active({ aud: resourceOf('/a/mcp') }), { status: 401, error: 'invalid_token' }],
    ['aud with a trailing slash', active({ aud: `${resourceOf(INTRO)}/` }), { status: 401, error: 'invalid_token' }],
    ['no aud', { ...active(), aud: undefined }, { status: 401, error: 'invalid_token' }],
    ['missing exp', { ...active(), exp: undefined }, { status: 401, error: 'invalid_token' }],
    ['expired', active({ exp: now() - 10 }), { status: 401, error: 'invalid_token' }],
    ['missing sub', { ...active(), sub: undefined }, { status: 401, error: 'invalid_token' }],
    ['without the required scope', active({ scope: 'mcp:write' }), { status: 403, error: 'insufficient_scope', scope: 'mcp:read' }],
    ['endpoint answers 500', 'error', { status: 503, error: 'temporarily_unavailable' }],
  ];
  it.each(refusals)('refuses %s', async (_name, answer, want) => {
    const token = opaque();
    introspection.answers.set(token, answer);
    const res = await nothingUpstream(() => post(INTRO, `Bearer ${token}`));
    expect(statuses(want.status)).toContain(res.status);
    const challenge = res.status === 401 || res.status === 403 ? 'error' : 'none';
    expectRejection(res, { ...want, status: res.status, challenge, resourceMetadata: metadataUrlOf(INTRO) }, [token]);
    // a refusal is not cached as a success: asking again asks the endpoint again
    if (res.status === 503) {
      await nothingUpstream(() => post(INTRO, `Bearer ${token}`));
      expect(introspection.calls.get(token)).toBe(2);
    }
  });

  it.each([
    ['down (closed port)', '/intro-down/mcp', 6_000],
    ['hanging', '/intro-hanging/mcp', 8_000],
  ])('fails closed with 503 when the endpoint is %s', async (_name, path, within) => {
    const token = opaque();
    const started = Date.now();
    const res = await nothingUpstream(() => post(path, `Bearer ${token}`));
    expectRejection(res, { status: 503, error: 'temporarily_unavailable' }, [token]);
    expect(Date.now() - started).toBeLessThan(within);
  });

  it("never serves a cached answer past the token's exp", async () => {
    const token = opaque();
    // A misbehaving endpoint keeps saying "active" with the same exp even after it.
    const exp = now() + 2;
    introspection.answers.set(token, active({ exp }));
    expect((await post(INTRO, `Bearer ${token}`)).status).toBe(200);
    expect((await post(INTRO, `Bearer ${token}`)).status).toBe(200);
    expect(introspection.calls.get(token)).toBe(1);
    await new Promise((r) => setTimeout(r, exp * 1000 - Date.now() + 100));
    const res = await nothingUpstream(() => post(INTRO, `Bearer ${token}`));
    expectRejection(res, { status: 401, error: 'invalid_token', challenge: 'error' }, [token]);
  });
});

describe('[A2] [A8] one keep-alive connection: a token verified on it is recalled, never trusted blindly', () => {
  // One socket for every request of a test, as a client's keep-alive connection.
  async function onOneConnection(run: (send: (path: string, authorization: string | string[]) => Promise<{ status: number; reused: boolean }>) => Promise<void>) {
    const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
    const send = (path: string, authorization: string | string[]) =>
      new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
        // A flat list, so that two Authorization headers can be sent.
        const credentials = (Array.isArray(authorization) ? authorization : [authorization]).flatMap((value) => ['authorization', value]);
        const headers = ['host', new URL(gw.url).host, 'content-type', 'application/json', 'accept', 'application/json, text/event-stream', ...credentials];
        const req = httpRequest(`${gw.url}${path}`, { method: 'POST', agent, headers }, (res) => {
          res.resume().once('end', () => resolve({ status: res.statusCode!, reused: req.reusedSocket }));
        });
        req.once('error', reject);
        req.end(TOOLS_LIST);
      });
    try {
      await run(send);
    } finally {
      agent.destroy();
    }
  }

  it('refuses whatever else comes on the connection after a good token, and takes the good one again', async () => {
    const good = `Bearer ${await issuer.mint({ aud: resourceOf(PATH) })}`;
    const forged = `Bearer ${await issuer.mint({ aud: resourceOf(PATH) }, { key: attacker.privateKey })}`;
    const otherAudience = `Bearer ${await issuer.mint({ aud: resourceOf(OPEN) })}`;
    const noScope = `Bearer ${await issuer.mint({ aud: resourceOf(PATH), scope: 'mcp:write' })}`;
    await onOneConnection(async (send) => {
      expect(await send(PATH, good)).toEqual({ status: 200, reused: false });
      const before = up.requests.length;
      expect(await send(PATH, forged)).toEqual({ status: 401, reused: true });
      expect(await send(PATH, otherAudience)).toEqual({ status: 401, reused: true });
      expect(await send(PATH, noScope)).toEqual({ status: 403, reused: true });
      expect(await send(PATH, [good, good])).toEqual({ status: 400, reused: true });
      // The same token at a route whose resource it does not name.
      expect(await send(OPEN, good)).toEqual({ status: 401, reused: true });
      expect(up.requests.length).toBe(before);
      expect(await send(PATH, good)).toEqual({ status: 200, reused: true });
    });
  });

  it('stops taking a recalled token once it expires', async () => {
    const exp = now() + 2;
    const shortLived = `Bearer ${await issuer.mint({ aud: resourceOf(STRICT), exp })}`;
    await onOneConnection(async (send) => {
      expect((await send(STRICT, shortLived)).status).toBe(200);
      expect((await send(STRICT, shortLived)).status).toBe(200);
      // Past exp and the route's 1 s clock skew (refused from (exp + 1) s on), with half a second to spare.
      await sleepUntil((exp + 1) * 1000 + 500);
      expect(await send(STRICT, shortLived)).toEqual({ status: 401, reused: true });
    });
  });
});

describe('[A8] valid token without the scope', () => {
  it.each([
    ['no scope claim', { scope: undefined }],
    ['empty scope', { scope: '' }],
    ['only mcp:write', { scope: 'mcp:write' }],
    ['a longer scope with the prefix', { scope: 'mcp:readx' }],
    ['upper-cased scope', { scope: 'MCP:READ' }],
    ['comma-separated', { scope: 'mcp:write,mcp:read' }],
  ])('403 insufficient_scope with scope and resource_metadata: %s', async (_name, claims) => {
    const token = await issuer.mint({ aud: resourceOf(PATH), ...claims });
    const res = await nothingUpstream(() => post(PATH, `Bearer ${token}`));
    expectRejection(res, { status: 403, error: 'insufficient_scope', challenge: 'error', scope: 'mcp:read', resourceMetadata: metadataUrlOf(PATH) }, tokenSecrets(token));
  });

  it.each([
    ['scope among others', { scope: 'openid mcp:write mcp:read' }],
    ['scp array (Entra-style)', { scope: undefined, scp: ['mcp:read'] }],
  ])('accepts %s (control)', async (_name, claims) => {
    const token = await issuer.mint({ aud: resourceOf(PATH), ...claims });
    expect((await post(PATH, `Bearer ${token}`)).status).toBe(200);
  });
});

describe('[A1] [I45] no token in the logs', () => {
  it('never logged any presented token', () => {
    const logs = gw.logs.join('');
    expect(logs.length).toBeGreaterThan(0);
    for (const token of presented) {
      for (const secret of tokenSecrets(token).filter((s) => s.length > 40)) expect(logs.includes(secret)).toBe(false);
    }
  });
});
