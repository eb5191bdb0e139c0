import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { createIntrospectionVerifier } from '../../src/auth/introspection-verifier.js';
import { JwksRegistry } from '../../src/auth/jwks.js';
import { createTokenVerifier } from '../../src/auth/create-token-verifier.js';
import type { IntrospectionTokenConfig, RouteConfig } from '../../src/config/types.js';
import { rejection } from '../helpers/rejection.js';

const RESOURCE = 'https://mcp.example.com/github/mcp';
const ISSUER = 'https://idp.example.com';

type Answer = { status?: number; body?: unknown; hang?: boolean };

/** An RFC 7662 endpoint: answers per token, records requests. */
let server: Server;
let endpoint = '';
const answers = new Map<string, Answer>();
const requests: { token: string | null; authorization: string | undefined; hint: string | null }[] = [];

beforeAll(async () => {
  server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      const form = new URLSearchParams(body);
      const token = form.get('token');
      requests.push({ token, authorization: req.headers.authorization, hint: form.get('token_type_hint') });
      const answer = answers.get(token ?? '') ?? { body: { active: false } };
      if (answer.hang) return;
      res.writeHead(answer.status ?? 200, { 'content-type': 'application/json' }).end(JSON.stringify(answer.body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}/introspect`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});
afterEach(() => {
  answers.clear();
  requests.length = 0;
  vi.useRealTimers();
});

const now = () => Math.floor(Date.now() / 1000);

function active(overrides: Record<string, unknown> = {}): Answer {
  return { body: { active: true, iss: ISSUER, sub: 'user-1', client_id: 'client-1', aud: RESOURCE, scope: 'mcp:read mcp:write', exp: now() + 300, ...overrides } };
}

function config(overrides: Partial<IntrospectionTokenConfig> = {}): IntrospectionTokenConfig {
  return { kind: 'introspection', endpoint, clientId: 'gateway', clientSecret: 's3cret:/+', issuer: ISSUER, cacheTtlMs: 60_000, ...overrides };
}

describe('introspection verifier', () => {
  it('accepts an active token for this resource and authenticates with client_secret_basic', async () => {
    answers.set('tok', active());
    const auth = await createIntrospectionVerifier(RESOURCE, config()).verify('tok');
    expect(auth).toMatchObject({ issuer: ISSUER, subject: 'user-1', clientId: 'client-1', scopes: ['mcp:read', 'mcp:write'], token: 'tok' });
    const [request] = requests;
    expect(request?.token).toBe('tok');
    expect(request?.hint).toBe('access_token');
    // RFC 6749 §2.3.1: id and secret form-encoded, then Basic.
    const decoded = Buffer.from(request?.authorization?.replace(/^Basic /, '') ?? '', 'base64').toString();
    expect(decoded).toBe(`gateway:${encodeURIComponent('s3cret:/+')}`);
  });

  it('accepts an aud array containing the resource; without a configured issuer, takes iss from the answer', async () => {
    answers.set('tok', active({ aud: ['x', RESOURCE], iss: 'https://other-idp' }));
    await expect(createIntrospectionVerifier(RESOURCE, config({ issuer: undefined })).verify('tok')).resolves.toMatchObject({ issuer: 'https://other-idp' });
  });

  it.each([
    ['inactive', { body: { active: false } }],
    ['inactive with claims', active({ active: false })],
    ['missing exp', active({ exp: undefined })],
    ['expired exp', active({ exp: now() - 5 })],
    ['foreign aud', active({ aud: 'https://mcp.example.com/other/mcp' })],
    ['aud with trailing slash', active({ aud: `${RESOURCE}/` })],
    ['aud in another case', active({ aud: RESOURCE.toUpperCase() })],
    ['missing aud', active({ aud: undefined })],
    ['wrong iss', active({ iss: `${ISSUER}/` })],
    ['missing sub', active({ sub: undefined })],
  ])('refuses %s with 401 invalid_token', async (_name, answer) => {
    answers.set('Zq9x7Secret', answer);
    const err = await rejection(createIntrospectionVerifier(RESOURCE, config()).verify('Zq9x7Secret'));
    expect(err).toMatchObject({ status: 401, code: 'invalid_token' });
    expect(err.description).not.toContain('Zq9x7');
  });

  it('fails closed with 503 on an error status or a malformed answer', async () => {
    answers.set('500', { status: 500, body: { error: 'server_error' } });
    answers.set('401', { status: 401, body: { error: 'invalid_client' } });
    answers.set('junk', { body: { activ: true } });
    for (const token of ['500', '401', 'junk']) {
      expect(await rejection(createIntrospectionVerifier(RESOURCE, config()).verify(token))).toMatchObject({ status: 503, code: 'temporarily_unavailable' });
    }
  });

  it('fails closed with 503 when the endpoint is down or too slow', async () => {
    const down = createIntrospectionVerifier(RESOURCE, config({ endpoint: 'http://127.0.0.1:1/introspect' }));
    expect((await rejection(down.verify('tok'))).status).toBe(503);
    answers.set('slow', { hang: true });
    const started = Date.now();
    const slow = createIntrospectionVerifier(RESOURCE, config(), { timeoutMs: 200 });
    expect((await rejection(slow.verify('slow'))).status).toBe(503);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});

describe('introspection behind the token cache', () => {
  const route = (token: IntrospectionTokenConfig) => ({ file: 'r.yaml', path: '/github/mcp', resource: RESOURCE, token }) as RouteConfig;

  it('caches positive answers', async () => {
    answers.set('tok', active());
    const v = createTokenVerifier(route(config()), { jwksSources: new JwksRegistry() });
    await v.verify('tok');
    await v.verify('tok');
    expect(requests).toHaveLength(1);
  });

  it('does not cache negative answers or outages', async () => {
    const v = createTokenVerifier(route(config()), { jwksSources: new JwksRegistry() });
    answers.set('tok', { status: 500, body: {} });
    expect((await rejection(v.verify('tok'))).status).toBe(503);
    answers.set('tok', { body: { active: false } });
    expect((await rejection(v.verify('tok'))).status).toBe(401);
    answers.set('tok', active());
    await expect(v.verify('tok')).resolves.toBeDefined();
    expect(requests).toHaveLength(3);
  });

  it('never keeps a cached answer past the token exp', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    answers.set('tok', active({ exp: now() + 2 }));
    const v = createTokenVerifier(route(config({ cacheTtlMs: 3_600_000 })), { jwksSources: new JwksRegistry() });
    await v.verify('tok');
    await v.verify('tok');
    expect(requests).toHaveLength(1);
    vi.setSystemTime(Date.now() + 3_000);
    answers.set('tok', { body: { active: false } });
    expect((await rejection(v.verify('tok'))).status).toBe(401);
    expect(requests).toHaveLength(2);
  });

  it('honours a cacheTtlMs shorter than the token life, and 0 disables caching', async () => {
    answers.set('tok', active());
    const short = createTokenVerifier(route(config({ cacheTtlMs: 50 })), { jwksSources: new JwksRegistry() });
    await short.verify('tok');
    await new Promise((resolve) => setTimeout(resolve, 80));
    await short.verify('tok');
    expect(requests).toHaveLength(2);
    const none = createTokenVerifier(route(config({ cacheTtlMs: 0 })), { jwksSources: new JwksRegistry() });
    await none.verify('tok');
    await none.verify('tok');
    expect(requests).toHaveLength(4);
  });
});

describe('introspection verifier: audience and issuer refusals are reported with the expected value', () => {
  it.each([
    ['aud', { aud: ['https://mcp.example.com/other/mcp'] }, RESOURCE, ['https://mcp.example.com/other/mcp']],
    ['iss', { iss: 'https://other-idp' }, ISSUER, 'https://other-idp'],
  ] as const)('%s', async (claim, overrides, expected, received) => {
    answers.set('tok', active(overrides));
    const mismatches: unknown[] = [];
    const err = await rejection(createIntrospectionVerifier(RESOURCE, config(), { onClaimMismatch: (m) => mismatches.push(m) }).verify('tok'));
    expect(err).toMatchObject({ status: 401, code: 'invalid_token' });
    expect(mismatches).toEqual([{ claim, expected, received }]);
  });
});
