/**
 * [A6] Property tests of the Authorization parser (src/auth/bearer.ts): whatever headers and query a
 * client sends, the answer is a token from exactly one Bearer header, "no token", or a typed 400.
 */
import fc from 'fast-check';
import { describe, expect } from 'vitest';
import { hasBodyAccessToken } from '../../../src/auth/bearer.js';
import { GatewayError } from '../../../src/errors/gateway-error.js';
import { tokenFromRequest } from '../../helpers/bearer.js';
import { fuzz } from './harness.js';

const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;
const b64token = fc.stringMatching(/^[A-Za-z0-9\-._~+/]{1,80}={0,2}$/);
/** `bearer` in a random letter case. */
const bearerSpelling = fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }).map((upper) => [...'bearer'].map((ch, i) => (upper[i] ? ch.toUpperCase() : ch)).join(''));
const authorizationName = fc.constantFrom('Authorization', 'authorization', 'AUTHORIZATION', 'aUTHORIZATION', 'AuThOrIzAtIoN');
const otherName = fc.constantFrom('Proxy-Authorization', 'X-Authorization', 'Authorization-X', 'Content-Type', 'Cookie', 'X-Access-Token');
const hostile = fc.constantFrom(' ', '  ', '\t', '\r', '\n', '\u0000', '"', ',', '=', 'é', '\u202e', '\u00a0', 'Bearer ', 'Basic ', '%20', '\\');

/** Authorization values: well-formed, almost well-formed, hostile, huge. */
const authorizationValue = fc.oneof(
  fc.tuple(bearerSpelling, fc.integer({ min: 1, max: 3 }), b64token).map(([s, n, t]) => `${s}${' '.repeat(n)}${t}`),
  fc.tuple(bearerSpelling, b64token, hostile, b64token).map(([s, a, h, b]) => `${s} ${a}${h}${b}`),
  fc.tuple(hostile, bearerSpelling, b64token).map(([h, s, t]) => `${h}${s} ${t}`),
  fc.tuple(fc.constantFrom('Basic', 'Digest', 'DPoP', 'Token', 'MAC', 'Bearer-X', 'Bearer:'), b64token).map(([s, t]) => `${s} ${t}`),
  fc.string({ maxLength: 60 }),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.constantFrom('', 'Bearer', 'Bearer ', 'bearer\t token', 'Bearer token token', 'Bearer ===', 'Bearer a=b', 'Bearer a,Bearer b'),
  fc.integer({ min: 8_000, max: 70_000 }).map((n) => `Bearer ${'a'.repeat(n)}`),
);

const rawHeaders = fc
  .array(fc.oneof(fc.tuple(authorizationName, authorizationValue), fc.tuple(otherName, authorizationValue)), { maxLength: 4 })
  .map((pairs) => pairs.flat());

const accessTokenName = fc.constantFrom('access_token', 'ACCESS_TOKEN', 'Access_Token', 'access%5Ftoken', 'access%5ftoken', '%61ccess_token', 'access_%74oken', '%41CCESS_TOKEN');
const query = fc.oneof(
  fc.constant(''),
  fc.string({ maxLength: 40 }).map((q) => `?${q}`),
  fc.tuple(accessTokenName, b64token).map(([n, t]) => `?${n}=${t}`),
  fc.tuple(fc.string({ maxLength: 10 }), accessTokenName, b64token).map(([a, n, t]) => `?x=${encodeURIComponent(a)}&${n}=${t}`),
);

/** Runs the parser; a throw must be the typed 400. */
function parse(headers: string[], search: string): { token?: string; refused: boolean } {
  try {
    return { token: tokenFromRequest(headers, search), refused: false };
  } catch (err) {
    expect(err).toBeInstanceOf(GatewayError);
    expect((err as GatewayError).status).toBe(400);
    expect((err as GatewayError).code).toBe('invalid_request');
    return { refused: true };
  }
}

/** The values of every Authorization header, in any letter case. */
const authorizationValues = (headers: string[]) => headers.flatMap((name, i) => (i % 2 === 0 && name.toLowerCase() === 'authorization' ? [headers[i + 1]!] : []));

describe('[A6] the Authorization parser', () => {
  fuzz(
    'bearer: any Authorization headers and query → a b64token from exactly one Bearer header, undefined, or 400 invalid_request',
    () =>
      fc.property(rawHeaders, query, (headers, search) => {
        const { token, refused } = parse(headers, search);
        const values = authorizationValues(headers);
        if (refused) return;
        // Accepted: no access_token in the query, at most one Authorization header.
        expect([...new URLSearchParams(search.replace(/^\?/, '')).keys()].some((k) => k.toLowerCase() === 'access_token')).toBe(false);
        expect(values.length).toBeLessThanOrEqual(1);
        if (token === undefined) {
          // No token: no header, or a header whose scheme is not Bearer.
          if (values.length === 1) expect(values[0]!.split(' ')[0]!.toLowerCase()).not.toBe('bearer');
          return;
        }
        const value = values[0]!;
        expect(token).toMatch(B64TOKEN);
        expect(token.length).toBeLessThanOrEqual(8 * 1024);
        expect(value.toLowerCase().startsWith('bearer ')).toBe(true);
        expect(value.slice(6).trimStart()).toBe(token);
      }),
    { numRuns: 600 },
  );

  fuzz(
    'bearer: Bearer <b64token> in any scheme case and spacing round-trips',
    () =>
      fc.property(authorizationName, bearerSpelling, fc.integer({ min: 1, max: 5 }), b64token, (name, scheme, spaces, token) => {
        expect(tokenFromRequest([name, `${scheme}${' '.repeat(spaces)}${token}`, 'accept', '*/*'], '')).toBe(token);
      }),
    { numRuns: 400 },
  );

  fuzz(
    'bearer: two Authorization headers are always 400',
    () =>
      fc.property(authorizationName, authorizationName, authorizationValue, authorizationValue, fc.nat(3), (n1, n2, v1, v2, gap) => {
        const between = Array.from({ length: gap }, (_, i) => [`x-filler-${i}`, 'y']).flat();
        expect(() => tokenFromRequest([n1, v1, ...between, n2, v2], '')).toThrow(GatewayError);
      }),
    { numRuns: 300 },
  );

  fuzz(
    'bearer: access_token in the query or a form body, in any spelling, is always refused',
    () =>
      fc.property(accessTokenName, b64token, fc.string({ maxLength: 20 }), fc.boolean(), (name, token, other, first) => {
        const params = first ? `${name}=${token}&q=${encodeURIComponent(other)}` : `q=${encodeURIComponent(other)}&${name}=${token}`;
        expect(() => tokenFromRequest([], `?${params}`)).toThrow(GatewayError);
        expect(() => tokenFromRequest(['Authorization', `Bearer ${token}`], `?${params}`)).toThrow(GatewayError);
        expect(hasBodyAccessToken('application/x-www-form-urlencoded; charset=utf-8', Buffer.from(params))).toBe(true);
        expect(hasBodyAccessToken('application/json', Buffer.from(params))).toBe(false);
      }),
    { numRuns: 300 },
  );

  fuzz(
    'bearer: another auth scheme is no bearer token',
    () =>
      fc.property(
        fc.stringMatching(/^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,12}$/).filter((s) => s.toLowerCase() !== 'bearer'),
        fc.stringMatching(/^[\x20-\x7E]{0,60}$/),
        (scheme, credentials) => {
          expect(tokenFromRequest(['Authorization', `${scheme} ${credentials}`], '')).toBeUndefined();
        },
      ),
    { numRuns: 300 },
  );
});
