/**
 * SECURITY-CASES C.11 and C.12 against the real gateway, over raw sockets:
 * - C.11: no request header or query (CR/LF, quotes, X-Forwarded-*, …; corpora/header-tricks.json
 *   "injection") is reflected in a metadata body, a WWW-Authenticate value or any other header;
 * - C.12: the public well-known paths never open a way around authentication
 *   (corpora/path-tricks.json "wellKnown"): nothing reaches the upstream, token or not.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestGateway } from '../helpers/gateway.js';
import { startJwtStage, stopJwtStage } from '../helpers/jwt-gateway.js';
import { buildRequest, headerOf, rawRequest, unescapeBytes, type RawResponse } from '../helpers/raw-http.js';
import { readCorpus } from './corpora/corpus.js';
import {
  gatewayYaml,
  jwtRoute,
  metadataUrlOf,
  parseChallenge,
  resourceOf,
  type RecordingUpstream,
  type TestIssuer,
} from '../helpers/security-fixtures.js';
import { DPOP_ALGORITHMS } from '../../src/config/jws-algorithms.js';

interface InjectionCase {
  name: string;
  replaceHost?: boolean;
  headers?: Array<[string, string]>;
  rawHeaderBytes?: string;
  query?: string;
  /** The parser may refuse the whole request (400) instead of ignoring the header. */
  mayBeRefused?: boolean;
  /** A cross-site Origin: the protected route answers 403 before authentication. */
  originRefused?: boolean;
}

const injection = readCorpus<{ injection: InjectionCase[] }>('header-tricks.json').injection;
const wellKnown = readCorpus<{ wellKnown: string[] }>('path-tricks.json').wellKnown;

const A = '/a/mcp';
const METADATA_PATH = `/.well-known/oauth-protected-resource${A}`;
const TOOLS_LIST = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';
/** What an injection would leave behind in a response. */
const REFLECTED = /evil|injected|<script|set-cookie/i;

let issuer: TestIssuer;
let up: RecordingUpstream;
let gw: TestGateway;

const expectedMetadata = () => ({
  resource: resourceOf(A),
  authorization_servers: [issuer.issuer],
  scopes_supported: ['mcp:read', 'mcp:write'],
  bearer_methods_supported: ['header'],
  dpop_signing_alg_values_supported: [...DPOP_ALGORITHMS],
});

function send(c: InjectionCase, parts: { method: string; target: string; token?: string }): Promise<RawResponse> {
  const headers: Array<[string, string]> = [...(c.headers ?? [])];
  if (parts.token) headers.push(['Authorization', `Bearer ${parts.token}`]);
  return rawRequest(
    gw.port,
    buildRequest({
      method: parts.method,
      target: parts.target + (c.query ?? ''),
      host: c.replaceHost ? null : `127.0.0.1:${gw.port}`,
      headers,
      rawHeaderBytes: c.rawHeaderBytes ? unescapeBytes(c.rawHeaderBytes) : undefined,
      body: parts.method === 'POST' ? TOOLS_LIST : undefined,
    }),
  );
}

/** Nothing the attacker sent shows up anywhere in the response (status line, headers, body). */
function expectNotReflected(res: RawResponse): void {
  expect(res.raw.toString('latin1')).not.toMatch(REFLECTED);
  expect(headerOf(res, 'set-cookie')).toBeUndefined();
}

function expectRefusedWithoutReflection(res: RawResponse): void {
  expect(res.status).toBe(400);
  expect(JSON.parse(res.body)).toMatchObject({ error: 'invalid_request' });
  expectNotReflected(res);
}

beforeAll(async () => {
  ({ issuer, up, gw } = await startJwtStage((stage) => ({
    'gateway.yaml': gatewayYaml(),
    'a.yaml': jwtRoute(A, `${stage.up.origin}/mcp`, stage.issuer),
  })));
});

afterAll(() => stopJwtStage({ gw, issuer, up }));

describe('[C11] nothing a request sends is reflected (corpora/header-tricks.json "injection")', () => {
  it.each(injection.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const before = up.requests.length;

    // 1. the metadata document: exactly the configured one
    const prm = await send(c, { method: 'GET', target: METADATA_PATH });
    if (c.mayBeRefused && prm.status === 400) expectRefusedWithoutReflection(prm);
    else {
      expect(prm.status, prm.body).toBe(200);
      expect(JSON.parse(prm.body)).toEqual(expectedMetadata());
      expectNotReflected(prm);
    }

    // 2. the challenge without a token: exactly the configured one
    const bare = await send(c, { method: 'POST', target: A });
    if (c.mayBeRefused && bare.status === 400) expectRefusedWithoutReflection(bare);
    else if (c.originRefused) {
      expect(bare.status).toBe(403);
      expect(JSON.parse(bare.body)).toMatchObject({ error: 'forbidden_origin' });
      expectNotReflected(bare);
    } else {
      expect(bare.status).toBe(401);
      expect(headerOf(bare, 'www-authenticate')).toBe(`Bearer scope="mcp:read", resource_metadata="${metadataUrlOf(A)}"`);
      expectNotReflected(bare);
    }

    // 3. the challenge for an invalid token: error parameters only from the gateway's own words
    const expired = await issuer.mint({ aud: resourceOf(A), exp: Math.floor(Date.now() / 1000) - 600 });
    const invalid = await send(c, { method: 'POST', target: A, token: expired });
    if (c.mayBeRefused && invalid.status === 400) expectRefusedWithoutReflection(invalid);
    else if (!c.originRefused) {
      expect(invalid.status).toBe(401);
      const { scheme, params } = parseChallenge(headerOf(invalid, 'www-authenticate')!);
      expect(scheme).toBe('Bearer');
      expect(Object.keys(params).sort()).toEqual(['error', 'error_description', 'resource_metadata']);
      expect(params.error).toBe('invalid_token');
      expect(params.resource_metadata).toBe(metadataUrlOf(A));
      expectNotReflected(invalid);
      expect(invalid.raw.toString('latin1')).not.toContain(expired);
    }

    // 4. an unknown path: a constant 404, the path not echoed
    const missing = await send(c, { method: 'GET', target: '/evil/injected' });
    if (!(c.mayBeRefused && missing.status === 400)) expect(missing.status).toBe(404);
    expectNotReflected(missing);

    expect(up.requests.length).toBe(before);
  });

  it('quotes and escapes nothing it did not write: the challenge grammar holds for every route answer', async () => {
    const res = await rawRequest(gw.port, buildRequest({ method: 'POST', target: A, host: 'x"y', body: TOOLS_LIST, headers: [['Authorization', 'Bearer a.b.c']] }));
    expect(res.status).toBe(401);
    const challenge = headerOf(res, 'www-authenticate')!;
    // one challenge, every value a well-formed quoted-string (parseChallenge throws otherwise)
    expect(() => parseChallenge(challenge)).not.toThrow();
    expect(challenge).not.toMatch(/[\r\n]/);
  });
});

describe('[C12] well-known path tricks never reach the upstream (corpora/path-tricks.json "wellKnown")', () => {
  const targets = wellKnown.map((t) => t.replaceAll('$route', A));

  it.each(targets.flatMap((t) => [['GET', t] as const, ['POST', t] as const]))('%s %s', async (method, target) => {
    const token = await issuer.mint({ aud: resourceOf(A) });
    for (const withToken of [false, true]) {
      const before = up.requests.length;
      const res = await rawRequest(
        gw.port,
        buildRequest({
          method,
          target,
          host: `127.0.0.1:${gw.port}`,
          headers: withToken ? [['Authorization', `Bearer ${token}`]] : [],
          body: method === 'POST' ? TOOLS_LIST : undefined,
        }),
      );
      expect(up.requests.length, `${res.status} ${res.body}`).toBe(before);
      if (res.status === 200) {
        // only ever the metadata document itself (a query on the metadata path)
        expect(method).toBe('GET');
        expect(JSON.parse(res.body)).toEqual(expectedMetadata());
      } else {
        expect([400, 404, 405]).toContain(res.status);
        expect(Object.keys(JSON.parse(res.body) as object).sort()).toEqual(['error', 'error_description']);
      }
      expect(res.raw.toString('latin1')).not.toContain(token);
    }
  });

  it('serves the metadata at its exact path only (control)', async () => {
    const ok = await rawRequest(gw.port, buildRequest({ target: METADATA_PATH, host: `127.0.0.1:${gw.port}` }));
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.body)).toEqual(expectedMetadata());
    expect(headerOf(ok, 'content-type')).toMatch(/^application\/json/);
  });
});
