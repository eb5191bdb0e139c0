/**
 * [D14] [E19] Property tests of redirect-URI rules (src/config/redirect-uri.ts): what
 * registration accepts is read identically by an RFC 3986 parser and by WHATWG URL (the browser),
 * and the authorization response goes exactly there; at /authorize only a registered string matches,
 * with the one exception of RFC 8252 §7.3 — a loopback IP literal on any (valid) port.
 */
import fc from 'fast-check';
import { describe, expect } from 'vitest';
import { checkRedirectUri, matchRedirectUri } from '../../../src/config/redirect-uri.js';
import { authorizationRedirectUrl } from '../../../src/authorization-server/authorization/authorization-response.js';
import { redirectCorpus } from '../corpora/redirect-uris.js';
import { fuzz } from './harness.js';

/** RFC 3986 Appendix B: the reference regular expression every conforming parser agrees with. */
const RFC3986 = /^(([^:/?#]+):)?(\/\/([^/?#]*))?([^?#]*)(\?([^#]*))?(#(.*))?$/;
const DANGEROUS = ['javascript', 'data', 'vbscript', 'file', 'about', 'blob', 'filesystem', 'view-source', 'jar', 'intent'];
const LOOPBACK_NAMES = ['127.0.0.1', '[::1]', 'localhost'];

const scheme = fc.constantFrom('https', 'http', 'HTTPS', 'Http', 'javascript', 'JavaScript', 'data', 'file', 'com.example.app', 'ws', 'ftp', 'intent', 'view-source', '');
const separator = fc.constantFrom('://', ':', ':/', ':///', '//', ':\\\\', ':/\\', '://\\');
const userinfo = fc.constantFrom('', '', '', 'u@', 'u:p@', '@', ':@', 'app.example@', 'a%40b@', 'app.example\\@');
const host = fc.constantFrom(
  'app.example', 'APP.example', 'app.example.', 'xn--bcher-kva.example', 'app.example%2eevil.example', 'app.example%40evil.example', 'evil.example',
  '127.0.0.1', '127.0.0.1.', '127.1', '2130706433', '0x7f000001', '0177.0.0.1', '127.000.000.001', '127.0.0.2',
  '[::1]', '[0:0:0:0:0:0:0:1]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', 'localhost', 'LOCALHOST', 'localhost.', '10.0.0.1', '*.example', '',
);
const port = fc.constantFrom('', '', '', ':443', ':80', ':8080', ':', ':0', ':65535', ':65536', ':99999', ':-1', ':0x50', ':08080');
const pathPart = fc.constantFrom('/cb', '/callback', '/', '', '/..', '/.', '/%2e%2e', '/%2f', '\\cb', '/a b', '/%00', '/%0d%0a', '/*', '/<x>', '/"', "/'", '/%63b', '/cb;x', '/é', '/a%20b');
const query = fc.constantFrom('', '', '?x=1', '?code=1', '?state=s', '?', '?"', '?next=%2F', '?a=b&c=d', '#f', '#');
const noise = fc.constantFrom('\t', '\r', '\n', '\u0000', '\u202e', '\u00a0', ' ', '\\', '%', '#', '@', '*');

const uriLike = fc.oneof(
  { weight: 4, arbitrary: fc.tuple(scheme, separator, userinfo, host, port, fc.array(pathPart, { maxLength: 3 }), query).map(([s, sep, u, h, p, path, q]) => `${s}${sep}${u}${h}${p}${path.join('')}${q}`) },
  { weight: 1, arbitrary: fc.tuple(fc.string({ maxLength: 30 }), fc.string({ unit: 'grapheme', maxLength: 10 })).map(([a, b]) => a + b) },
  { weight: 1, arbitrary: fc.constantFrom(...redirectCorpus.registration.refused.map((c) => c.uri).filter((u): u is string => typeof u === 'string')) },
);
/** A URI with one noise character inserted somewhere. */
const noisy = fc.tuple(uriLike, fc.nat(), noise).map(([u, at, ch]) => u.slice(0, at % (u.length + 1)) + ch + u.slice(at % (u.length + 1)));
const candidate = fc.oneof({ weight: 3, arbitrary: uriLike }, { weight: 1, arbitrary: noisy });

/** Well-formed registrations: the kinds real clients send. */
// Canonical form omits http's default port: `http://127.0.0.1:80/` is refused by design (a fresh seed's counterexample).
const loopbackPort = fc.integer({ min: 1, max: 65535 }).filter((p) => p !== 80);
const safePath = fc.array(fc.stringMatching(/^[a-z0-9_-]{1,8}$/), { maxLength: 3 }).map((segs) => `/${segs.join('/')}`);
const wellFormed = fc.oneof(
  fc.tuple(fc.constantFrom('app.example', 'login.app.example', 'xn--bcher-kva.example', '203.0.113.7'), fc.constantFrom('', ':8443'), safePath, fc.constantFrom('', '?tenant=1')).map(([h, p, path, q]) => `https://${h}${p}${path}${q}`),
  fc.tuple(fc.constantFrom('127.0.0.1', '[::1]', 'localhost'), fc.option(loopbackPort, { nil: undefined }), safePath).map(([h, p, path]) => `http://${h}${p === undefined ? '' : `:${p}`}${path}`),
);

describe('[D14] what registration accepts', () => {
  fuzz(
    'redirect URI: registered URIs are read the same way by RFC 3986 and WHATWG, and the code goes there',
    () =>
      fc.property(candidate, fc.boolean(), (uri, native) => {
        const verdict = checkRedirectUri(uri, { nativeSchemes: native });
        if (!verdict.ok) return;
        expect(uri).toMatch(/^[\x21-\x7E]+$/);
        expect(uri).not.toMatch(/[#\\*]/);
        const [, , rawScheme, , authority, path, , rawQuery] = RFC3986.exec(uri)!;
        const url = new URL(uri);
        const schemeName = rawScheme!.toLowerCase();
        expect(DANGEROUS).not.toContain(schemeName);
        if (schemeName !== 'http' && schemeName !== 'https') {
          expect(native, 'a private-use scheme for a web client').toBe(true);
          return;
        }
        // Both parsers agree on the host, the port, the path and the query.
        expect(rawScheme).toBe(schemeName);
        expect(authority, 'an authority for RFC 3986').toBeDefined();
        expect(authority).toBe(url.host);
        expect(authority).not.toContain('@');
        expect(path === '' ? '/' : path).toBe(url.pathname);
        // WHATWG shows an empty query (`?`) as search '' but keeps it in href.
        if (rawQuery === undefined) expect(url.search).toBe('');
        else expect(rawQuery === '' ? url.search === '' && url.href.endsWith('?') : url.search === `?${rawQuery}`).toBe(true);
        if (schemeName === 'http') expect(LOOPBACK_NAMES).toContain(url.hostname === '[::1]' ? '[::1]' : url.hostname);
        // The response goes to exactly that place, with one code, state and iss.
        const response = new URL(authorizationRedirectUrl(uri, { code: 'C' }, 's&code=x', 'https://issuer.example'));
        expect(response.origin).toBe(url.origin);
        expect(response.pathname).toBe(url.pathname);
        expect(response.searchParams.getAll('code')).toEqual(['C']);
        expect(response.searchParams.getAll('state')).toEqual(['s&code=x']);
        expect(response.searchParams.getAll('iss')).toEqual(['https://issuer.example']);
      }),
    { numRuns: 3000 },
  );

  fuzz(
    'redirect URI: well-formed registrations are accepted',
    () =>
      fc.property(wellFormed, (uri) => {
        expect(checkRedirectUri(uri, { nativeSchemes: false })).toEqual({ ok: true });
      }),
    { numRuns: 500 },
  );
});

describe('[E19] what /authorize matches', () => {
  /** Mutations of a registered URI that must never match (other than the loopback port). */
  const mutate = (uri: string) =>
    fc.oneof(
      fc.constantFrom(`${uri}/`, `${uri}?`, `${uri}#`, `${uri} `, ` ${uri}`, `${uri}%00`, uri.toUpperCase(), uri.replace('://', ':'), uri.replace('://', ':///'), uri.replace(/\/([^/]*)$/, '/./$1')),
      fc.tuple(fc.nat(), noise).map(([at, ch]) => uri.slice(0, at % (uri.length + 1)) + ch + uri.slice(at % (uri.length + 1))),
      fc.tuple(fc.nat(), fc.nat(3)).map(([at, n]) => uri.slice(0, at % uri.length) + uri.slice((at % uri.length) + 1 + n)),
      fc.tuple(loopbackPort, fc.constantFrom('', ':', ':0', ':65536', ':99999', ':123456', ':-1', ':080')).map(([p, bad]) => uri.replace(/^(http:\/\/(?:127\.0\.0\.1|\[::1\]|localhost))(:\d+)?/, (_m, h: string) => `${h}${bad || `:${p}`}`)),
    );
  const scenario = fc.array(wellFormed, { minLength: 1, maxLength: 4 }).chain((registered) =>
    fc.tuple(fc.constant(registered), fc.oneof(fc.constantFrom(...registered), fc.constantFrom(...registered).chain(mutate), candidate)),
  );

  fuzz(
    'redirect URI: only registered strings match; the port exception is only for loopback IP literals',
    () =>
      fc.property(scenario, ([registered, requested]) => {
        const matched = matchRedirectUri(requested, registered);
        if (matched === undefined) {
          expect(registered).not.toContain(requested);
          return;
        }
        expect(registered).toContain(matched);
        if (requested === matched) return;
        // The loopback exception: same IP literal, same path and query, only the port differs — and it is a real port.
        const asked = new URL(requested);
        const known = new URL(matched);
        expect(['127.0.0.1', '[::1]']).toContain(known.hostname);
        expect(asked.protocol).toBe('http:');
        expect(asked.hostname).toBe(known.hostname);
        expect(asked.pathname + asked.search).toBe(known.pathname + known.search);
        expect(asked.username + asked.password).toBe('');
        expect(requested.replace(/^http:\/\/(127\.0\.0\.1|\[::1\])(:\d+)?/, '$1')).toBe(matched.replace(/^http:\/\/(127\.0\.0\.1|\[::1\])(:\d+)?/, '$1'));
      }),
    { numRuns: 3000 },
  );
});
