/**
 * SECURITY-CASES group B (audience) against the real gateway: the expected audience is the
 * route's configured canonical resource, compared byte for byte (corpora/audience-variants.json),
 * and no request header (Host, X-Forwarded-*, Forwarded…; corpora/header-tricks.json "authority")
 * changes it, the metadata's `resource`, or the `resource_metadata` URL while trust_proxy is false.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestGateway } from '../helpers/gateway.js';
import { startJwtStage, stopJwtStage } from '../helpers/jwt-gateway.js';
import { buildRequest, headerOf, rawRequest, unescapeBytes } from '../helpers/raw-http.js';
import { readCorpus } from './corpora/corpus.js';
import {
  expectRejection,
  gatewayYaml,
  jwtRoute,
  metadataUrlOf,
  PUBLIC_URL,
  resourceOf,
  simplify,
  simplifyRaw,
  tokenSecrets,
  type RecordingUpstream,
  type TestIssuer,
} from '../helpers/security-fixtures.js';
import { DPOP_ALGORITHMS } from '../../src/config/jws-algorithms.js';

interface AudienceCase {
  name: string;
  aud: unknown;
  accept?: boolean;
}
interface HeaderCase {
  name: string;
  replaceHost?: boolean;
  headers?: Array<[string, string]>;
  rawHeaderBytes?: string;
  spoofedOrigin: string;
}

const audiences = readCorpus<{ cases: AudienceCase[] }>('audience-variants.json').cases;
const authority = readCorpus<{ authority: HeaderCase[] }>('header-tricks.json').authority;

const A = '/a/mcp';
const B = '/b/mcp';
const TOOLS_LIST = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';

let issuer: TestIssuer;
let up: RecordingUpstream;
let gw: TestGateway;

function resolveAud(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(resolveAud);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveAud(v)]));
  if (typeof value !== 'string') return value;
  return value
    .replaceAll('$resource', resourceOf(A))
    .replaceAll('$other', resourceOf(B))
    .replaceAll('$gateway', gw.url)
    .replaceAll('$issuer', issuer.issuer);
}

async function post(path: string, token?: string) {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  return simplify(await fetch(`${gw.url}${path}`, { method: 'POST', headers, body: TOOLS_LIST }));
}

async function expectNothingUpstream<T>(run: () => Promise<T>): Promise<T> {
  const before = up.requests.length;
  const result = await run();
  expect(up.requests.slice(before).map((r) => `${r.method} ${r.url}`)).toEqual([]);
  return result;
}

beforeAll(async () => {
  ({ issuer, up, gw } = await startJwtStage((stage) => ({
    'gateway.yaml': gatewayYaml({ trust_proxy: false }),
    'a.yaml': jwtRoute(A, `${stage.up.origin}/mcp`, stage.issuer),
    'b.yaml': jwtRoute(B, `${stage.up.origin}/mcp`, stage.issuer),
  })));
});

afterAll(() => stopJwtStage({ gw, issuer, up }));

describe('[B9] exact audience (corpora/audience-variants.json)', () => {
  it.each(audiences.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const token = await issuer.mint({ aud: resolveAud(c.aud) as string });
    const before = up.requests.length;
    const res = await post(A, token);
    if (c.accept) {
      expect(res.status, res.body).toBe(200);
      expect(up.requests.length).toBe(before + 1);
      return;
    }
    expect(up.requests.length).toBe(before);
    expectRejection(res, { status: 401, error: 'invalid_token', challenge: 'error', resourceMetadata: metadataUrlOf(A), scope: null }, tokenSecrets(token));
  });

  it("refuses route A's token at route B and B's at A, while each works at its own route", async () => {
    const forA = await issuer.mint({ aud: resourceOf(A) });
    const forB = await issuer.mint({ aud: resourceOf(B) });
    expect((await post(A, forA)).status).toBe(200);
    expect((await post(B, forB)).status).toBe(200);
    const atB = await expectNothingUpstream(() => post(B, forA));
    expectRejection(atB, { status: 401, error: 'invalid_token', challenge: 'error', resourceMetadata: metadataUrlOf(B) }, tokenSecrets(forA));
    const atA = await expectNothingUpstream(() => post(A, forB));
    expectRejection(atA, { status: 401, error: 'invalid_token', challenge: 'error', resourceMetadata: metadataUrlOf(A) }, tokenSecrets(forB));
  });

  it('keeps refusing after the right token warmed the cache (the cache is keyed per resource)', async () => {
    const forA = await issuer.mint({ aud: resourceOf(A) });
    for (let i = 0; i < 3; i++) expect((await post(A, forA)).status).toBe(200);
    for (let i = 0; i < 3; i++) expect((await expectNothingUpstream(() => post(B, forA))).status).toBe(401);
  });
});

describe('[B10] request headers never move the audience or the metadata (trust_proxy: false)', () => {
  const expectedMetadata = () => ({
    resource: resourceOf(A),
    authorization_servers: [issuer.issuer],
    scopes_supported: ['mcp:read', 'mcp:write'],
    bearer_methods_supported: ['header'],
    dpop_signing_alg_values_supported: [...DPOP_ALGORITHMS],
  });
  const challenge = `Bearer scope="mcp:read", resource_metadata="${metadataUrlOf(A)}"`;

  function send(c: HeaderCase, parts: { method: string; target: string; token?: string }) {
    const headers: Array<[string, string]> = [...(c.headers ?? [])];
    if (parts.token) headers.push(['Authorization', `Bearer ${parts.token}`]);
    return rawRequest(
      gw.port,
      buildRequest({
        method: parts.method,
        target: parts.target,
        host: c.replaceHost ? null : `127.0.0.1:${gw.port}`,
        headers,
        rawHeaderBytes: c.rawHeaderBytes ? unescapeBytes(c.rawHeaderBytes) : undefined,
        body: parts.method === 'POST' ? TOOLS_LIST : undefined,
      }),
    );
  }

  it.each(authority.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    // metadata: the configured resource, byte for byte
    const prm = await expectNothingUpstream(() => send(c, { method: 'GET', target: `/.well-known/oauth-protected-resource${A}` }));
    expect(prm.status).toBe(200);
    expect(JSON.parse(prm.body)).toEqual(expectedMetadata());
    expect(prm.raw.toString('latin1')).not.toMatch(/evil/i);

    // challenge: the configured resource_metadata URL
    const noToken = await expectNothingUpstream(() => send(c, { method: 'POST', target: A }));
    expect(noToken.status).toBe(401);
    expect(headerOf(noToken, 'www-authenticate')).toBe(challenge);
    expect(noToken.raw.toString('latin1')).not.toMatch(/evil/i);

    // a token minted for the spoofed authority is still refused
    const spoofed = await issuer.mint({ aud: `${c.spoofedOrigin}${A}` });
    const refused = await expectNothingUpstream(() => send(c, { method: 'POST', target: A, token: spoofed }));
    expectRejection(simplifyRaw(refused), { status: 401, error: 'invalid_token', challenge: 'error', resourceMetadata: metadataUrlOf(A) }, tokenSecrets(spoofed));

    // and the token for the configured resource still works, whatever the headers say
    const good = await issuer.mint({ aud: resourceOf(A) });
    const before = up.requests.length;
    const ok = await send(c, { method: 'POST', target: A, token: good });
    expect(ok.status, ok.body).toBe(200);
    expect(up.requests.length).toBe(before + 1);
    // the upstream gets its own Host, not the client's spoofed authority
    const forwarded = up.requests.at(-1)!;
    expect(forwarded.headers.filter(([n]) => n.toLowerCase() === 'host').map(([, v]) => v)).toEqual([new URL(up.origin).host]);
    expect(forwarded.headers.some(([n]) => /^(x-forwarded-host|forwarded|x-original-host)$/i.test(n))).toBe(false);
  });

  it('serves the same metadata bytes to every spoofing variant', async () => {
    const bodies = new Set<string>();
    for (const c of authority) bodies.add((await send(c, { method: 'GET', target: `/.well-known/oauth-protected-resource${A}` })).body);
    bodies.add(await (await fetch(`${gw.url}/.well-known/oauth-protected-resource${A}`)).text());
    expect([...bodies]).toHaveLength(1);
    expect(PUBLIC_URL).not.toContain('127.0.0.1');
  });
});
