/**
 * Enterprise-managed authorization (ID-JAG, draft-ietf-oauth-identity-assertion-authz-grant-04;
 * MCP enterprise-managed authorization): /token takes grant_type jwt-bearer (RFC 7523) with an
 * assertion signed by a configured enterprise IdP. The IdP is local (jose keys, a JWKS over
 * loopback HTTP): a cloud IdP cannot run here, and what the gateway checks is the JWT itself.
 * Shown: the happy path end to end (the token works through the gateway with the TS SDK client in
 * front of server-everything), a hand-written negative for every check, each refused with its
 * precise OAuth error and nothing stored, replay on one replica and across two sharing a real
 * redis-server, and a fast-check property over random claim sets (a token only when every check
 * passes, its scopes = asserted ∩ requested ∩ allowed).
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { decodeJwt, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JWT_BEARER_GRANT_TYPE } from '../../src/config/schema.js';
import { recordingAudit, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { dpopKey, proof } from '../helpers/dpop.js';
import { ID_JAG_TYP, startEnterpriseIdp, type EnterpriseIdp } from '../helpers/enterprise-idp.js';
import { devAuthorizationServer, originYaml } from '../helpers/gateway-config.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { connectWithToken } from '../helpers/mcp-client.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';

const AGENT_SECRET = 'agent-secret-0123456789abcdef';
const SVC_SECRET = 'svc-secret-0123456789abcdef';
const ROUTE = '/everything/mcp';
const OTHER_ROUTE = '/other/mcp';
const ID_JAG_KEY_CLASS = 'id-jag-jti';
/** Listed IdPs whose keys cannot be had: one whose jwks_uri redirects, one that is down. */
const MOVED_ISSUER = () => `${idp.issuer}/moved-keys`;
const DOWN_ISSUER = 'http://127.0.0.1:1/down';

let everything: UpstreamHandle;
let idp: EnterpriseIdp;
let gateway: AsGateway;
const audit = recordingAudit();

const now = () => Math.floor(Date.now() / 1000);
const resourceOf = (path: string, base = gateway.issuer) => `${base}${path}`;
const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;

beforeAll(async () => {
  [everything, idp] = await Promise.all([startEverythingServer(), startEnterpriseIdp()]);
  const route = { scopes_supported: ['mcp:read', 'mcp:write', 'mcp:admin'], required_scopes: ['mcp:read'] };
  gateway = await startAsGateway({
    upstream: everything.url,
    routes: { 'everything.yaml': { path: ROUTE, ...route }, 'other.yaml': { path: OTHER_ROUTE, ...route } },
    authorizationServer: {
      enterprise_idps: [
        { issuer: idp.issuer, jwks_uri: idp.jwksUri },
        { issuer: MOVED_ISSUER(), jwks_uri: idp.movedJwksUri },
        { issuer: DOWN_ISSUER, jwks_uri: 'http://127.0.0.1:1/jwks.json' },
      ],
      clients: [
        { client_id: 'agent', client_secret: { env: 'AGENT_SECRET' }, grant_types: [JWT_BEARER_GRANT_TYPE], scopes: ['mcp:read', 'mcp:write'] },
        { client_id: 'svc', client_secret: { env: 'SVC_SECRET' }, grant_types: ['client_credentials'] },
      ],
    },
    env: { AGENT_SECRET, SVC_SECRET },
    audit,
  });
}, 60_000);

afterAll(async () => {
  await gateway?.stop();
  await Promise.all([everything?.close(), idp?.close()]);
});

/** Valid claims for the agent at ROUTE, with `more` merged over them (undefined removes a claim). */
function claims(more: Record<string, unknown> = {}, base = gateway.issuer): Record<string, unknown> {
  const all: Record<string, unknown> = {
    iss: idp.issuer,
    sub: 'u-1001',
    aud: base,
    client_id: 'agent',
    jti: randomUUID(),
    iat: now(),
    exp: now() + 120,
    resource: resourceOf(ROUTE, base),
    scope: 'mcp:read mcp:write',
    ...more,
  };
  return Object.fromEntries(Object.entries(all).filter(([, value]) => value !== undefined));
}

interface TokenAnswer {
  status: number;
  json: Record<string, string>;
}

async function present(assertion: string, extra: Record<string, string> = {}, opts: { authorization?: string; headers?: Record<string, string>; issuer?: string } = {}): Promise<TokenAnswer> {
  const res = await fetch(`${opts.issuer ?? gateway.issuer}/token`, {
    method: 'POST',
    headers: { authorization: opts.authorization ?? basic('agent', AGENT_SECRET), ...opts.headers },
    body: new URLSearchParams({ grant_type: JWT_BEARER_GRANT_TYPE, assertion, ...extra }),
  });
  return { status: res.status, json: (await res.json()) as Record<string, string> };
}

/** A refusal: the status and OAuth error, no token, no-store, and no jti spent in the store. */
async function expectRefused(answer: Promise<TokenAnswer>, status: number, error: string): Promise<void> {
  const mark = gateway.recording.writes.length;
  const { status: got, json } = await answer;
  expect({ status: got, error: json.error }, json.error_description).toEqual({ status, error });
  expect(json.access_token).toBeUndefined();
  expect(gateway.recording.namespacesSince(mark)).not.toContain(ID_JAG_KEY_CLASS);
}

describe('metadata (draft-04 §7.2)', () => {
  it('lists the jwt-bearer grant and the id-jag profile, and names no IdP (§8.4)', async () => {
    const metadata = (await (await fetch(`${gateway.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(metadata.grant_types_supported).toContain(JWT_BEARER_GRANT_TYPE);
    expect(metadata.authorization_grant_profiles_supported).toEqual(['urn:ietf:params:oauth:grant-profile:id-jag']);
    const text = JSON.stringify(metadata);
    expect(text).not.toContain(`"${idp.issuer}"`);
    expect(text).not.toContain(`${idp.issuer}/`);
  });
});

describe('the happy path, end to end', () => {
  it('an ID-JAG becomes a Bearer token for the asserted resource and scopes, with no refresh token, that works through the gateway', async () => {
    const answer = await present(await idp.sign(claims()));
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    expect(answer.json).toMatchObject({ token_type: 'Bearer', scope: 'mcp:read mcp:write' });
    expect(answer.json.refresh_token).toBeUndefined();
    const token = decodeJwt(answer.json.access_token!);
    expect(token).toMatchObject({ iss: gateway.issuer, aud: resourceOf(ROUTE), client_id: 'agent', sub: `${idp.issuer}#u-1001`, scope: 'mcp:read mcp:write' });

    const client = await connectWithToken(resourceOf(ROUTE), answer.json.access_token!);
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name)).toContain('echo');
    } finally {
      await client.close();
    }
    // Audience-restricted to the asserted MCP server (MCP profile §5.1): another route refuses it.
    const elsewhere = await fetch(resourceOf(OTHER_ROUTE), { method: 'POST', headers: { authorization: `Bearer ${answer.json.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' });
    expect(elsewhere.status).toBe(401);
  });

  it('the audit line names the enterprise IdP, and the IdP keys were fetched from the configured jwks_uri', async () => {
    const sub = `u-${randomUUID()}`;
    expect((await present(await idp.sign(claims({ sub })))).status).toBe(200);
    const line = audit.events.find((e) => e.event === 'token_issued' && e.sub === `${idp.issuer}#${sub}`);
    expect(line).toMatchObject({ grant_type: JWT_BEARER_GRANT_TYPE, idp: idp.issuer, client_id: 'agent', refresh: false });
    expect(idp.jwksFetches()).toBeGreaterThan(0);
  });

  it('aud as an array of exactly this issuer, a resource array narrowed by the resource parameter, scope narrowed by the scope parameter', async () => {
    const assertion = await idp.sign(claims({ aud: [gateway.issuer], resource: [resourceOf(OTHER_ROUTE), resourceOf(ROUTE)] }));
    const answer = await present(assertion, { resource: resourceOf(ROUTE), scope: 'mcp:write' });
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    expect(answer.json.scope).toBe('mcp:write');
    expect(decodeJwt(answer.json.access_token!).aud).toBe(resourceOf(ROUTE));
  });

  it('asserted scopes the client may not have (mcp:admin) or the route does not know are left out', async () => {
    const answer = await present(await idp.sign(claims({ scope: 'mcp:admin mcp:read unknown:scope offline_access' })));
    expect(answer.status).toBe(200);
    expect(answer.json.scope).toBe('mcp:read');
  });
});

describe('DPoP (RFC 9449 §5; draft-04 §8.6.1.2)', () => {
  const tokenUrl = () => `${gateway.issuer}/token`;

  it('a proof at /token binds the token to its key', async () => {
    const key = await dpopKey();
    const answer = await present(await idp.sign(claims()), {}, { headers: { dpop: await proof(key, { htm: 'POST', htu: tokenUrl() }) } });
    expect(answer.status, JSON.stringify(answer.json)).toBe(200);
    expect(answer.json.token_type).toBe('DPoP');
    expect(decodeJwt(answer.json.access_token!).cnf).toEqual({ jkt: key.jkt });
  });

  it('an assertion bound to a key (cnf.jkt) needs a proof of that key: none, or another key, is invalid_grant', async () => {
    const key = await dpopKey();
    const bound = () => idp.sign(claims({ cnf: { jkt: key.jkt } }));
    await expectRefused(present(await bound()), 400, 'invalid_grant');
    await expectRefused(present(await bound(), {}, { headers: { dpop: await proof(await dpopKey(), { htm: 'POST', htu: tokenUrl() }) } }), 400, 'invalid_grant');
    const answer = await present(await bound(), {}, { headers: { dpop: await proof(key, { htm: 'POST', htu: tokenUrl() }) } });
    expect(answer.status).toBe(200);
    expect(decodeJwt(answer.json.access_token!).cnf).toEqual({ jkt: key.jkt });
  });
});

describe('every check, with its negative', () => {
  it('the request: no assertion is invalid_request; a wrong secret is invalid_client (401)', async () => {
    const res = await fetch(`${gateway.issuer}/token`, { method: 'POST', headers: { authorization: basic('agent', AGENT_SECRET) }, body: new URLSearchParams({ grant_type: JWT_BEARER_GRANT_TYPE }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
    await expectRefused(present(await idp.sign(claims()), {}, { authorization: basic('agent', 'wrong-secret-0123456789') }), 401, 'invalid_client');
  });

  it('the client: a configured client without the grant, and a dynamic client even with a secret, are unauthorized_client', async () => {
    await expectRefused(present(await idp.sign(claims({ client_id: 'svc' })), {}, { authorization: basic('svc', SVC_SECRET) }), 400, 'unauthorized_client');
    const registered = await fetch(`${gateway.issuer}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'dyn', redirect_uris: ['http://127.0.0.1:9/cb'], token_endpoint_auth_method: 'client_secret_basic' }),
    });
    expect(registered.status).toBe(201);
    const dyn = (await registered.json()) as { client_id: string; client_secret: string };
    await expectRefused(present(await idp.sign(claims({ client_id: dyn.client_id })), {}, { authorization: basic(dyn.client_id, dyn.client_secret) }), 400, 'unauthorized_client');
    const asking = await fetch(`${gateway.issuer}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: ['http://127.0.0.1:9/cb'], grant_types: ['authorization_code', JWT_BEARER_GRANT_TYPE] }),
    });
    expect(asking.status).toBe(400);
  });

  const structural: Array<[string, () => Promise<string>]> = [
    ['not a JWT', async () => 'not-a-jwt'],
    ['five parts (a JWE)', async () => 'a.b.c.d.e'],
    ['alg none (no signature)', async () => `${Buffer.from(JSON.stringify({ alg: 'none', typ: ID_JAG_TYP })).toString('base64url')}.${Buffer.from(JSON.stringify(claims())).toString('base64url')}.`],
    ['alg none with a signature part', async () => `${Buffer.from(JSON.stringify({ alg: 'none', typ: ID_JAG_TYP })).toString('base64url')}.${Buffer.from(JSON.stringify(claims())).toString('base64url')}.AAAA`],
    ['HS256', async () => new SignJWT(claims()).setProtectedHeader({ alg: 'HS256', typ: ID_JAG_TYP }).sign(new TextEncoder().encode('a-shared-secret-of-thirty-two-bytes!'))],
    ['typ missing', () => idp.sign(claims(), { header: { typ: undefined } })],
    ['typ JWT', () => idp.sign(claims(), { header: { typ: 'JWT' } })],
    ['typ at+jwt', () => idp.sign(claims(), { header: { typ: 'at+jwt' } })],
    ['typ in another case', () => idp.sign(claims(), { header: { typ: 'OAuth-ID-JAG+JWT' } })],
    ['jku header', () => idp.sign(claims(), { header: { jku: 'https://evil.example/jwks' } })],
    ['x5u header', () => idp.sign(claims(), { header: { x5u: 'https://evil.example/cert' } })],
    ['jwk header', () => idp.sign(claims(), { header: { jwk: { kty: 'EC', crv: 'P-256', x: 'x', y: 'y' } } })],
    ['crit header', () => idp.signRaw(JSON.stringify({ alg: 'ES256', typ: ID_JAG_TYP, crit: ['exp'], exp: 1 }), JSON.stringify(claims()))],
    ['a key not in the IdP\'s JWKS', () => idp.sign(claims(), { key: 'unpublished' })],
    ['a key not in the JWKS, under an unknown kid', () => idp.sign(claims(), { key: 'unpublished', header: { kid: 'no-such-kid' } })],
    ['a tampered payload', async () => {
      const [h, , s] = (await idp.sign(claims())).split('.');
      return `${h}.${Buffer.from(JSON.stringify(claims({ sub: 'admin' }))).toString('base64url')}.${s}`;
    }],
    ['duplicate sub in the payload', () => idp.signRaw(JSON.stringify({ alg: 'ES256', typ: ID_JAG_TYP }), JSON.stringify(claims()).replace('{', '{"sub":"admin",'))],
    ['duplicate typ in the header', () => idp.signRaw(`{"alg":"ES256","typ":"JWT","typ":"${ID_JAG_TYP}"}`, JSON.stringify(claims()))],
    ['a payload that is not an object', () => idp.signRaw(JSON.stringify({ alg: 'ES256', typ: ID_JAG_TYP }), '["not", "claims"]')],
  ];
  it.each(structural)('the JWT: %s is invalid_grant', async (_name, make) => {
    await expectRefused(present(await make()), 400, 'invalid_grant');
  });

  const claimCases: Array<[string, () => Record<string, unknown>]> = [
    ['an unlisted issuer', () => claims({ iss: 'https://evil.example' })],
    ['no issuer', () => claims({ iss: undefined })],
    ['aud another AS', () => claims({ aud: 'https://other-as.example' })],
    ['aud this issuer with a trailing slash', () => claims({ aud: `${gateway.issuer}/` })],
    ['aud an array of two', () => claims({ aud: [gateway.issuer, 'https://other-as.example'] })],
    ['aud missing', () => claims({ aud: undefined })],
    ['client_id another client', () => claims({ client_id: 'svc' })],
    ['client_id missing', () => claims({ client_id: undefined })],
    ['resource not a route here', () => claims({ resource: 'https://elsewhere.example/mcp' })],
    ['resource missing', () => claims({ resource: undefined })],
    ['resource an empty array', () => claims({ resource: [] })],
    ['expired', () => claims({ iat: now() - 200, exp: now() - 60 })],
    ['exp missing', () => claims({ exp: undefined })],
    ['exp not a number', () => claims({ exp: String(now() + 60) })],
    ['lifetime too long (1 h)', () => claims({ exp: now() + 3600 })],
    ['lifetime too long (exp - iat = 10 min, exp near)', () => claims({ iat: now() - 540, exp: now() + 60 })],
    ['iat in the future', () => claims({ iat: now() + 120, exp: now() + 240 })],
    ['iat missing', () => claims({ iat: undefined })],
    ['nbf in the future', () => claims({ nbf: now() + 120 })],
    ['jti missing', () => claims({ jti: undefined })],
    ['jti empty', () => claims({ jti: '' })],
    ['sub missing', () => claims({ sub: undefined })],
    ['sub not a string', () => claims({ sub: 1001 })],
    ['sub empty', () => claims({ sub: '' })],
    ['scope not a string', () => claims({ scope: ['mcp:read'] })],
    ['cnf without jkt', () => claims({ cnf: {} })],
  ];
  it.each(claimCases)('the claims: %s is invalid_grant', async (_name, make) => {
    await expectRefused(present(await idp.sign(make())), 400, 'invalid_grant');
  });

  it('an unlisted issuer makes the gateway fetch nothing', async () => {
    const before = idp.jwksFetches();
    await expectRefused(present(await idp.sign(claims({ iss: `${idp.issuer}/other` }))), 400, 'invalid_grant');
    expect(idp.jwksFetches()).toBe(before);
  });

  it('keys that cannot be fetched are 503 with Retry-After: an IdP that is down, and a jwks_uri that redirects (never followed)', async () => {
    const before = idp.jwksFetches();
    for (const iss of [DOWN_ISSUER, MOVED_ISSUER()]) {
      const res = await fetch(`${gateway.issuer}/token`, {
        method: 'POST',
        headers: { authorization: basic('agent', AGENT_SECRET) },
        body: new URLSearchParams({ grant_type: JWT_BEARER_GRANT_TYPE, assertion: await idp.sign(claims({ iss })) }),
      });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(((await res.json()) as { error: string }).error).toBe('temporarily_unavailable');
    }
    expect(idp.jwksFetches()).toBe(before);
  });

  it('the key set is cached: ten redemptions fetch it no more', async () => {
    expect((await present(await idp.sign(claims()))).status).toBe(200);
    const before = idp.jwksFetches();
    for (let i = 0; i < 10; i++) expect((await present(await idp.sign(claims()))).status).toBe(200);
    expect(idp.jwksFetches()).toBe(before);
  });

  it('resource: a parameter the assertion does not name, or none when it names several, is invalid_target', async () => {
    await expectRefused(present(await idp.sign(claims()), { resource: resourceOf(OTHER_ROUTE) }), 400, 'invalid_target');
    await expectRefused(present(await idp.sign(claims({ resource: [resourceOf(ROUTE), resourceOf(OTHER_ROUTE)] }))), 400, 'invalid_target');
  });

  it('scope: an empty intersection is invalid_scope (asserted none, none the client may have, none requested among the asserted)', async () => {
    await expectRefused(present(await idp.sign(claims({ scope: undefined }))), 400, 'invalid_scope');
    await expectRefused(present(await idp.sign(claims({ scope: 'mcp:admin' }))), 400, 'invalid_scope');
    await expectRefused(present(await idp.sign(claims({ scope: 'mcp:read' })), { scope: 'mcp:write' }), 400, 'invalid_scope');
  });

  it('jti: an assertion is redeemed once; the replay is invalid_grant', async () => {
    const assertion = await idp.sign(claims());
    expect((await present(assertion)).status).toBe(200);
    await expectRefusedAfterUse(present(assertion));
    // Concurrent redemptions of one assertion: exactly one token.
    const fresh = await idp.sign(claims());
    const answers = await Promise.all(Array.from({ length: 8 }, () => present(fresh)));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.json.error === 'invalid_grant')).toHaveLength(7);
  });

  it('the jti is kept until the assertion expires (plus the skew), never longer', async () => {
    const exp = now() + 100;
    const mark = gateway.recording.writes.length;
    expect(await present(await idp.sign(claims({ exp }))), 'one redemption').toMatchObject({ status: 200 });
    const written = gateway.recording.writes.slice(mark).filter((w) => w.key.startsWith(`${ID_JAG_KEY_CLASS}:`));
    expect(written).toHaveLength(1);
    expect(written[0]!.ttlMs).toBeGreaterThan(100_000);
    expect(written[0]!.ttlMs).toBeLessThanOrEqual(131_000);
  });
});

/** A replay: refused, and no token (the key was written by the first use). */
async function expectRefusedAfterUse(answer: Promise<TokenAnswer>): Promise<void> {
  const { status, json } = await answer;
  expect({ status, error: json.error }).toEqual({ status: 400, error: 'invalid_grant' });
  expect(json.access_token).toBeUndefined();
}

describe('a gateway without enterprise_idps', () => {
  it('does not offer the grant: unsupported_grant_type, and the metadata leaves it out', async () => {
    const plain = await startTestGateway((origin) => ({
      'gateway.yaml': originYaml(origin, { log_level: 'warn', authorization_server: devAuthorizationServer({ clients: [{ client_id: 'agent', client_secret: { env: 'AGENT_SECRET' }, grant_types: ['client_credentials'] }] }) }),
      'r.yaml': { path: ROUTE, upstream: everything.url, scopes_supported: ['mcp:read'] },
    }), { AGENT_SECRET });
    try {
      const metadata = (await (await fetch(`${plain.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
      expect(metadata.grant_types_supported).not.toContain(JWT_BEARER_GRANT_TYPE);
      expect(metadata.authorization_grant_profiles_supported).toBeUndefined();
      const answer = await present(await idp.sign(claims({}, plain.url)), {}, { issuer: plain.url });
      expect({ status: answer.status, error: answer.json.error }).toEqual({ status: 400, error: 'unsupported_grant_type' });
    } finally {
      await plain.stop();
    }
  });
});

describe('replay across two replicas sharing a real redis-server', () => {
  const SHARED_ISSUER = 'https://as.example.test';
  const SHARED_RESOURCE = 'https://mcp.example.test/everything/mcp';
  let redis: RedisServer;
  const replicas: TestGateway[] = [];

  beforeAll(async () => {
    redis = await startRedisServer();
    const files = (origin: { port: number; url: string }) => ({
      'gateway.yaml': originYaml(origin, {
        log_level: 'warn',
        store: { kind: 'redis', url: redis.url, key_prefix: 'idjag:' },
        authorization_server: devAuthorizationServer({
          issuer: SHARED_ISSUER,
          enterprise_idps: [{ issuer: idp.issuer, jwks_uri: idp.jwksUri }],
          clients: [{ client_id: 'agent', client_secret: { env: 'AGENT_SECRET' }, grant_types: [JWT_BEARER_GRANT_TYPE] }],
        }),
      }),
      'r.yaml': { path: ROUTE, resource: SHARED_RESOURCE, upstream: everything.url, scopes_supported: ['mcp:read'] },
    });
    replicas.push(await startTestGateway(files, { AGENT_SECRET }), await startTestGateway(files, { AGENT_SECRET }));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.stop()));
    await redis?.stop();
  });

  const shared = (more: Record<string, unknown> = {}) => claims({ aud: SHARED_ISSUER, resource: SHARED_RESOURCE, scope: 'mcp:read', ...more });

  it('an assertion redeemed on replica A is refused on replica B', async () => {
    const [a, b] = replicas as [TestGateway, TestGateway];
    const assertion = await idp.sign(shared());
    const first = await present(assertion, {}, { issuer: a.url });
    expect(first.status, JSON.stringify(first.json)).toBe(200);
    await expectRefusedAfterUse(present(assertion, {}, { issuer: b.url }));
    await expectRefusedAfterUse(present(assertion, {}, { issuer: a.url }));
  });

  it('concurrent redemptions of one assertion on both replicas: exactly one token', async () => {
    const assertion = await idp.sign(shared());
    const answers = await Promise.all(replicas.flatMap((r) => [present(assertion, {}, { issuer: r.url }), present(assertion, {}, { issuer: r.url })]));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
  });
});

describe('property: a token only when every check passes', () => {
  const SCOPES = ['mcp:read', 'mcp:write', 'mcp:admin', 'unknown:x'];
  /** What the agent may have at ROUTE: its configured scopes the route knows. */
  const ALLOWED = new Set(['mcp:read', 'mcp:write']);
  /** One way each check can fail; a claim set carries none, one or two of them. */
  const FAULTS = [
    'typ-missing', 'typ-JWT', 'unpublished-key', 'unlisted-iss', 'aud-other', 'aud-two', 'client-other', 'client-missing',
    'resource-unknown', 'resource-missing', 'expired', 'too-long', 'iat-future', 'sub-missing', 'jti-missing',
  ] as const;
  type Fault = (typeof FAULTS)[number];

  const claimSet = fc.record({
    faults: fc.oneof(
      { weight: 2, arbitrary: fc.constant<Fault[]>([]) },
      { weight: 2, arbitrary: fc.constantFrom(...FAULTS).map((f) => [f]) },
      { weight: 1, arbitrary: fc.uniqueArray(fc.constantFrom(...FAULTS), { minLength: 2, maxLength: 2 }) },
    ),
    audArray: fc.boolean(),
    resourceArray: fc.boolean(),
    expIn: fc.integer({ min: 10, max: 250 }),
    iatAgo: fc.integer({ min: 0, max: 40 }),
    asserted: fc.subarray(SCOPES),
    requested: fc.option(fc.subarray(SCOPES, { minLength: 1 }), { nil: undefined }),
  });
  type ClaimSet = typeof claimSet extends fc.Arbitrary<infer T> ? T : never;

  /** The claims (valid variations: aud and resource as arrays, any short lifetime), then each fault applied. */
  function build(c: ClaimSet): Record<string, unknown> {
    const t = now();
    const has = (f: Fault) => c.faults.includes(f);
    const aud = has('aud-other') ? 'https://other-as.example' : has('aud-two') ? [gateway.issuer, 'https://x.example'] : c.audArray ? [gateway.issuer] : gateway.issuer;
    const resource = has('resource-unknown') ? 'https://elsewhere.example/mcp' : has('resource-missing') ? undefined : c.resourceArray ? [resourceOf(ROUTE)] : resourceOf(ROUTE);
    const iat = has('iat-future') ? t + 200 : t - c.iatAgo;
    const exp = has('expired') ? t - 100 : has('too-long') ? t + 900 : has('iat-future') ? t + 250 : t + c.expIn;
    return claims({
      iss: has('unlisted-iss') ? 'https://evil.example' : idp.issuer,
      aud,
      client_id: has('client-other') ? 'svc' : has('client-missing') ? undefined : 'agent',
      resource,
      iat,
      exp,
      sub: has('sub-missing') ? undefined : 'u-7',
      jti: has('jti-missing') ? undefined : randomUUID(),
      scope: c.asserted.length === 0 ? undefined : c.asserted.join(' '),
    });
  }

  it('issued iff every check passes and a scope is left; the scopes are asserted ∩ requested ∩ allowed', async () => {
    await fc.assert(
      fc.asyncProperty(claimSet, async (c) => {
        const header = c.faults.includes('typ-missing') ? { typ: undefined } : c.faults.includes('typ-JWT') ? { typ: 'JWT' } : {};
        const assertion = await idp.sign(build(c), { header, key: c.faults.includes('unpublished-key') ? 'unpublished' : 'published' });
        const answer = await present(assertion, c.requested ? { scope: c.requested.join(' ') } : {});
        const expected = c.asserted.filter((s) => ALLOWED.has(s) && (!c.requested || c.requested.includes(s)));
        if (c.faults.length > 0) {
          expect(answer.status, c.faults.join()).toBe(400);
          expect(['invalid_grant', 'invalid_scope']).toContain(answer.json.error);
          expect(answer.json.access_token).toBeUndefined();
        } else if (expected.length === 0) {
          expect({ status: answer.status, error: answer.json.error }).toEqual({ status: 400, error: 'invalid_scope' });
        } else {
          expect(answer.status, JSON.stringify(answer.json)).toBe(200);
          const scopes = (decodeJwt(answer.json.access_token!).scope as string).split(' ');
          expect(new Set(scopes)).toEqual(new Set(expected));
        }
      }),
      { numRuns: 80 },
    );
  }, 120_000);
});
