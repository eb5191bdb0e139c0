import { describe, expect, it, vi } from 'vitest';
import fc from 'fast-check';
import { hasBodyAccessToken } from '../../src/auth/bearer.js';
import { authenticate } from '../../src/auth/authenticate.js';
import type { AuthContext } from '../../src/auth/principal.js';
import type { TokenVerifier } from '../../src/auth/verifier.js';
import type { RouteConfig } from '../../src/config/types.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { TokenCache } from '../../src/auth/token-cache.js';
import { tokenFromRequest } from '../helpers/bearer.js';
import { thrownBy } from '../helpers/rejection.js';

const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

const auth = (...values: string[]) => values.flatMap((v) => ['Authorization', v]);

describe('the bearer token authenticate reads', () => {
  it('returns the token of a well-formed header', () => {
    expect(tokenFromRequest(['Host', 'x', ...auth('Bearer abc.DEF-_~+/=')], '')).toBe('abc.DEF-_~+/=');
    expect(tokenFromRequest(auth('Bearer abc=='), '?x=1')).toBe('abc==');
  });

  it('treats the scheme case-insensitively and the header name too', () => {
    expect(tokenFromRequest(auth('bearer t'), '')).toBe('t');
    expect(tokenFromRequest(auth('BEARER t'), '')).toBe('t');
    expect(tokenFromRequest(['aUtHoRiZaTiOn', 'BeArEr t'], '')).toBe('t');
  });

  it('accepts one or more spaces after the scheme (RFC 6750 1*SP)', () => {
    expect(tokenFromRequest(auth('Bearer   t'), '')).toBe('t');
  });

  it('returns undefined without an Authorization header or with another scheme', () => {
    expect(tokenFromRequest([], '')).toBeUndefined();
    expect(tokenFromRequest(['Host', 'x'], '?a=b')).toBeUndefined();
    expect(tokenFromRequest(auth('Basic dXNlcjpwYXNz'), '')).toBeUndefined();
    expect(tokenFromRequest(auth('DPoP abc'), '')).toBeUndefined();
    expect(tokenFromRequest(auth('Bearerx abc'), '')).toBeUndefined();
    expect(tokenFromRequest(auth('Negotiate'), '')).toBeUndefined();
  });

  it.each([
    ['two tokens', 'Bearer a b'],
    ['a comma list', 'Bearer a, Bearer b'],
    ['trailing junk', 'Bearer abc='.concat('x')],
    ['padding in the middle', 'Bearer ab=c'],
    ['an empty token', 'Bearer'],
    ['only spaces', 'Bearer   '],
    ['a tab separator', 'Bearer\tabc'],
    ['a quoted token', 'Bearer "abc"'],
    ['non-ASCII', 'Bearer abcé'],
    ['a control character', 'Bearer abc\u0000'],
    ['an empty header', ''],
    ['a leading space', ' Bearer abc'],
  ])('refuses %s with invalid_request', (_name, value) => {
    const err = thrownBy(() => tokenFromRequest(auth(value), ''));
    expect(err.status).toBe(400);
    expect(err.code).toBe('invalid_request');
    expect(err.description).not.toContain('abc');
  });

  it('refuses two Authorization headers, whatever their schemes', () => {
    expect(thrownBy(() => tokenFromRequest(auth('Bearer a', 'Bearer a'), '')).code).toBe('invalid_request');
    expect(thrownBy(() => tokenFromRequest(auth('Basic x', 'Bearer a'), '')).code).toBe('invalid_request');
    expect(thrownBy(() => tokenFromRequest(['authorization', 'Bearer a', 'AUTHORIZATION', 'Bearer b'], '')).code).toBe('invalid_request');
  });

  it('refuses a header over 8 KiB before parsing it', () => {
    const err = thrownBy(() => tokenFromRequest(auth(`Bearer ${'a'.repeat(64 * 1024)}`), ''));
    expect(err.code).toBe('invalid_request');
    expect(thrownBy(() => tokenFromRequest(auth(`Basic ${'a'.repeat(9000)}`), '')).code).toBe('invalid_request');
    expect(tokenFromRequest(auth(`Bearer ${'a'.repeat(8000)}`), '')).toHaveLength(8000);
  });

  it.each(['?access_token=abc', 'access_token=abc', '?a=1&access_token=', '?access%5Ftoken=abc', '?%61ccess_token=x', '?ACCESS_TOKEN=x', '?access_token'])(
    'refuses a query token %s, even with a valid header',
    (search) => {
      expect(thrownBy(() => tokenFromRequest(auth('Bearer good'), search)).code).toBe('invalid_request');
      expect(thrownBy(() => tokenFromRequest([], search)).code).toBe('invalid_request');
    },
  );

  it('leaves other query parameters alone', () => {
    expect(tokenFromRequest(auth('Bearer t'), '?access_tokens=1&token=2&x_access_token=3')).toBe('t');
  });

  it('never throws anything but a GatewayError, and accepts only b64token values (property)', () => {
    const headerValue = fc.oneof(
      fc.string({ maxLength: 40 }),
      fc.string({ unit: 'binary', maxLength: 40 }),
      fc.string({ maxLength: 40 }).map((s) => `Bearer ${s}`),
      fc.tuple(fc.constantFrom('Bearer', 'bearer', 'BEARER', 'Basic'), fc.stringMatching(/^ {0,3}$/), fc.stringMatching(/^[A-Za-z0-9\-._~+/= ,"]{0,30}$/)).map(([s, sp, t]) => s + sp + t),
    );
    const headers = fc.array(fc.tuple(fc.constantFrom('Authorization', 'authorization', 'Host', 'X-Other'), headerValue), { maxLength: 4 });
    fc.assert(
      fc.property(headers, fc.string({ maxLength: 30 }), (pairs, search) => {
        try {
          const token = tokenFromRequest(pairs.flat(), search);
          if (token !== undefined) expect(token).toMatch(B64TOKEN);
        } catch (err) {
          expect(err).toBeInstanceOf(GatewayError);
          expect((err as GatewayError).status).toBe(400);
        }
      }),
      { numRuns: 2000 },
    );
  });
});

describe('hasBodyAccessToken', () => {
  const body = (s: string) => Buffer.from(s);

  it('finds access_token in a form body, in any spelling', () => {
    expect(hasBodyAccessToken('application/x-www-form-urlencoded', body('a=1&access_token=x'))).toBe(true);
    expect(hasBodyAccessToken('Application/X-WWW-Form-Urlencoded; charset=utf-8', body('access%5Ftoken=x'))).toBe(true);
  });

  it('ignores other bodies and forms without it', () => {
    expect(hasBodyAccessToken('application/x-www-form-urlencoded', body('a=1'))).toBe(false);
    expect(hasBodyAccessToken('application/json', body('{"access_token":"x"}'))).toBe(false);
    expect(hasBodyAccessToken(undefined, body('access_token=x'))).toBe(false);
  });
});

describe('authenticate', () => {
  const route = { resource: 'https://mcp.example.com/r', requiredScopes: ['mcp:read'] } as RouteConfig;
  const context = (scopes: string[]): AuthContext => ({
    issuer: 'https://idp',
    subject: 's',
    clientId: 'c',
    scopes,
    expiresAt: 0,
    claims: {},
    token: 't',
    tokenHash: 'h',
  });
  const verifierFor = (scopes: string[]) => ({ verify: vi.fn(async () => context(scopes)) }) satisfies TokenVerifier;

  // A request on a connection of its own: nothing to recall.
  const request = (rawHeaders: string[]) => ({ rawHeaders, socket: {} });
  const run = (...args: Parameters<typeof authenticate>) => Promise.resolve().then(() => authenticate(...args));

  async function rejected(promise: Promise<unknown>): Promise<GatewayError> {
    const err = await promise.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(GatewayError);
    return err as GatewayError;
  }

  it('returns the context when the token has the required scopes', async () => {
    const verifier = verifierFor(['mcp:read', 'mcp:write']);
    await expect(run(route, verifier, request(auth('Bearer tok')), '')).resolves.toMatchObject({ subject: 's' });
    expect(verifier.verify).toHaveBeenCalledWith('tok', expect.objectContaining({ header: 'Bearer tok' }));
  });

  it('answers a missing or non-bearer token with a bare 401 challenge naming the scopes', async () => {
    for (const headers of [[], auth('Basic eDp5')]) {
      const err = await rejected(run(route, verifierFor([]), request(headers), ''));
      expect(err).toMatchObject({ status: 401, bareChallenge: true, challenge: true, scope: ['mcp:read'] });
    }
  });

  it('says in the description whether the token is missing or another scheme was used', async () => {
    expect((await rejected(run(route, verifierFor([]), request([]), ''))).description).toBe('A bearer token is required');
    expect((await rejected(run(route, verifierFor([]), request(auth('token ghp_x')), ''))).description).toBe(
      'A bearer token is required; the Authorization header uses another scheme',
    );
  });

  it('answers a token without the route scopes with 403 insufficient_scope', async () => {
    const err = await rejected(run(route, verifierFor(['mcp:write']), request(auth('Bearer tok')), ''));
    expect(err).toMatchObject({ status: 403, code: 'insufficient_scope', scope: ['mcp:read'] });
  });

  it('never verifies a malformed request', async () => {
    const verifier = verifierFor(['mcp:read']);
    expect((await rejected(run(route, verifier, request(auth('Bearer a b')), ''))).status).toBe(400);
    expect((await rejected(run(route, verifier, request(auth('Bearer tok')), '?access_token=tok'))).status).toBe(400);
    expect(verifier.verify).not.toHaveBeenCalled();
  });

  describe('on a keep-alive connection', () => {
    // A verifier behind the real cache, counting the verifications it does.
    function cachedVerifier(scopes: string[]) {
      const cache = new TokenCache();
      const inner = vi.fn(async (token: string) => ({ ...context(scopes), token, expiresAt: Math.floor(Date.now() / 1000) + 300 }));
      const verifier: TokenVerifier = {
        verify: (token, seenOn) => cache.verify(token, route.resource, 60_000, inner, {}, seenOn),
        verifyCached: (token, seenOn) => cache.get(token, route.resource, 60_000, inner, {}, seenOn),
        recall: (connection, header) => cache.recall(connection, header, route.resource),
      };
      return { verifier, inner };
    }

    it('answers the same header on the same connection synchronously, without verifying again', async () => {
      const { verifier, inner } = cachedVerifier(['mcp:read']);
      const socket = {};
      const first = await authenticate(route, verifier, { rawHeaders: auth('Bearer tok'), socket }, '');
      const second = authenticate(route, verifier, { rawHeaders: auth('Bearer tok'), socket }, '');
      expect(second).not.toBeInstanceOf(Promise);
      expect(second).toBe(first);
      expect(inner).toHaveBeenCalledTimes(1);
    });

    it('answers a token verified on another connection synchronously too, and still checks the route scopes', async () => {
      const { verifier, inner } = cachedVerifier(['mcp:read']);
      const first = await authenticate(route, verifier, { rawHeaders: auth('Bearer tok'), socket: {} }, '');
      const elsewhere = authenticate(route, verifier, { rawHeaders: auth('Bearer tok'), socket: {} }, '');
      expect(elsewhere).not.toBeInstanceOf(Promise);
      expect(elsewhere).toBe(first);
      expect(inner).toHaveBeenCalledTimes(1);
      const narrow = cachedVerifier(['mcp:write']).verifier;
      await rejected(run(route, narrow, { rawHeaders: auth('Bearer tok'), socket: {} }, ''));
      expect(() => authenticate(route, narrow, { rawHeaders: auth('Bearer tok'), socket: {} }, '')).toThrow(expect.objectContaining({ status: 403 }));
    });

    it('still refuses what is wrong with the request itself', async () => {
      const { verifier } = cachedVerifier(['mcp:read']);
      const socket = {};
      await authenticate(route, verifier, { rawHeaders: auth('Bearer tok'), socket }, '');
      expect((await rejected(run(route, verifier, { rawHeaders: auth('Bearer tok', 'Bearer tok'), socket }, ''))).status).toBe(400);
      expect((await rejected(run(route, verifier, { rawHeaders: auth('Bearer tok'), socket }, '?access_token=tok'))).status).toBe(400);
      expect((await rejected(run(route, verifier, { rawHeaders: [], socket }, ''))).status).toBe(401);
    });

    it('recalls only the same header, and still checks the route scopes', async () => {
      const { verifier, inner } = cachedVerifier(['mcp:write']);
      const socket = {};
      expect((await rejected(run(route, verifier, { rawHeaders: auth('Bearer tok'), socket }, ''))).status).toBe(403);
      expect((await rejected(run(route, verifier, { rawHeaders: auth('Bearer tok'), socket }, ''))).status).toBe(403);
      await rejected(run(route, verifier, { rawHeaders: auth('bearer tok'), socket }, ''));
      await rejected(run(route, verifier, { rawHeaders: auth('Bearer tok'), socket: {} }, ''));
      // Each new header or connection goes through the shared cache: one verification in all.
      expect(inner).toHaveBeenCalledTimes(1);
    });
  });
});
