/**
 * [J47] Property tests of resource URIs (src/policy/resource-uri.ts), in
 * process: URIs built from segments with `.`/`..`, escaped variants, case,
 * file: forms, `//`, `\`, escapes of characters that are also written raw.
 * Accepted ⇒ WHATWG URL writes it back unchanged, fileURLToPath and
 * posix normalisation resolve its path to the raw path decoded (what the glob
 * judged), and no two accepted URIs name the same resource even to a
 * forgiving reader (case-folding, decoding, NFKC, `\` as `/`, dot segments
 * and `;` parameters resolved): one resource, one spelling.
 */
import { posix } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { nonCanonicalReason } from '../../../src/policy/resource-uri.js';
import { judgedResource, nodeReading } from '../../helpers/uri-readers.js';
import { fuzz } from './harness.js';

const scheme = fc.oneof({ weight: 4, arbitrary: fc.constantFrom('file', 'test', 'secret', 'https', 'urn') }, { weight: 1, arbitrary: fc.constantFrom('FILE', 'File', 'Secret', 'HTTPS') });
const authority = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom('//', '//db', '//static', '//db:5432') },
  { weight: 1, arbitrary: fc.constantFrom('//localhost', '//LOCALHOST', '//Db', '//x@db', '//db:', '//db:05432', '//127.1', '///', '/', '', '\\\\') },
);
/** Names a legitimate URI holds, and spellings of the same names (or of separators) an attacker would try. */
const cleanSegment = fc.constantFrom('public', 'etc', 'passwd', 'resource', '1', '...', '.hidden', 'a%20b', 'caf%C3%A9', 'a;b', "o'x", '@x', '%3F', '%23');
const trickySegment = fc.constantFrom(
  '.', '..', '%2e', '%2E', '%2e%2e', '%2E%2E', '.%2E', '..;', '..;x', '%65tc', 'etc%2Fpasswd', '..%2f', '..%5C', '..\\etc', '', 'a b', 'caf%c3%a9', 'cafe%CC%81', 'café',
  '%E2%80%A5', '%EF%BC%8F', '%EF%BC%8E%EF%BC%8E', '%C0%AE', '%FF', '%25', '%252e', 'a%3Bb', 'o%27x', '%40x', '%00', 'x%7F', '%', '%zz', 'ETC', 'Public',
);
const segment = fc.oneof({ weight: 4, arbitrary: cleanSegment }, { weight: 1, arbitrary: trickySegment });
const tail = fc.oneof({ weight: 6, arbitrary: fc.constant('') }, { weight: 1, arbitrary: fc.constantFrom('/', '?x=1', '?', '#f', '?q=%61', '?q=%26') });
const candidate = fc
  .tuple(scheme, fc.constantFrom(':', ':', ':', '://'), authority, fc.array(segment, { minLength: 0, maxLength: 4 }), tail)
  .map(([s, colon, a, segs, t]) => (colon === '://' ? `${s}://${segs.join('/')}${t}` : `${s}:${a}${segs.length ? '/' : ''}${segs.join('/')}${t}`));

/** A reader that forgives everything a lenient server might: the identity of a resource to it. */
function forgivingResource(uri: string): string {
  const m = /^([^:/?#]+):(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?/.exec(uri.replaceAll('\\', '/'));
  if (!m) return `raw:${uri}`;
  const schemeName = m[1]!.toLowerCase();
  let host = (m[2] ?? '').toLowerCase().replace(/^.*@/, '').replace(/:$/, '');
  if (schemeName === 'file' && host === 'localhost') host = '';
  let path = m[3]!;
  try {
    path = decodeURIComponent(path);
  } catch {
    // left as it is: nothing decodes it
  }
  path = path.normalize('NFKC').replaceAll('\\', '/').split('/').map((s) => s.replace(/;.*$/, '')).join('/');
  const resolved = path === '' ? '' : posix.normalize(`/${path}`).replace(/(.)\/$/, '$1');
  return `${schemeName}://${host}${resolved}?${m[4] ?? ''}`;
}

/** The path's slashes (after the authority), by index. */
function pathSlashes(uri: string): number[] {
  const start = uri.indexOf('/', /^[a-z]+:\/\//i.test(uri) ? uri.indexOf('//') + 2 : 0);
  const query = uri.indexOf('?');
  const end = query === -1 ? uri.length : query;
  const at: number[] = [];
  for (let i = start; i !== -1 && i < end; i = uri.indexOf('/', i + 1)) at.push(i);
  return at;
}
function insertAtSlash(uri: string, at: number, text: string): string {
  const slashes = pathSlashes(uri);
  if (slashes.length === 0) return uri;
  const i = slashes[at % slashes.length]!;
  return uri.slice(0, i) + text + uri.slice(i);
}
function replaceSlash(uri: string, at: number, text: string): string {
  const slashes = pathSlashes(uri).slice(1);
  if (slashes.length === 0) return uri;
  const i = slashes[at % slashes.length]!;
  return uri.slice(0, i) + text + uri.slice(i + 1);
}
/** Percent-escapes one path character that `which` selects (upper-case hex, or lower-case). */
function escapeAt(uri: string, at: number, which: (c: string) => boolean, lower = false): string {
  const first = pathSlashes(uri)[0];
  if (first === undefined) return uri;
  const end = uri.includes('?') ? uri.indexOf('?') : uri.length;
  const positions = uri.slice(first, end).split('').map((c, i) => (which(c) ? first + i : -1)).filter((i) => i >= 0);
  if (positions.length === 0) return uri;
  const i = positions[at % positions.length]!;
  const hex = uri.charCodeAt(i).toString(16).padStart(2, '0');
  return `${uri.slice(0, i)}%${lower ? hex.toLowerCase() : hex.toUpperCase()}${uri.slice(i + 1)}`;
}

describe('[J47] accepted resource URIs mean one resource, spelled one way', () => {
  const tally = { accepted: 0, refused: 0 };
  fuzz(
    'resource URI: accepted ⇒ WHATWG URL writes it back, its path resolves to the raw path decoded',
    () =>
      fc.property(candidate, (uri) => {
        if (nonCanonicalReason(uri) !== undefined) {
          tally.refused++;
          return;
        }
        tally.accepted++;
        const node = nodeReading(uri);
        expect(node.ok, uri).toBe(true);
        expect(node.serialized).toBe(uri);
        expect(node.normalized).toBe(node.path);
        expect(node.resource).toBe(judgedResource(uri));
      }),
    { numRuns: 5000 },
  );
  it('the generator makes both kinds of URI (the property is not vacuous)', () => {
    expect(tally.accepted).toBeGreaterThan(100);
    expect(tally.refused).toBeGreaterThan(1000);
  });

  /** Respellings of one resource that some reader resolves back to it: each must be refused (or be the URI itself). */
  const respell = fc.constantFrom<(uri: string, at: number) => string>(
    (u) => u.replace(/^[a-z]+/, (x) => x.toUpperCase()),
    (u) => u.replace(/^[a-z]/, (x) => x.toUpperCase()),
    (u, at) => escapeAt(u, at, (c) => /[A-Za-z0-9\-._~;@'!$&()*+,=:]/.test(c)),
    (u, at) => escapeAt(u, at, (c) => /[A-Za-z0-9]/.test(c), true),
    (u, at) => insertAtSlash(u, at, '/.'),
    (u, at) => insertAtSlash(u, at, '/x/..'),
    (u, at) => insertAtSlash(u, at, '/%2e%2e/x'),
    (u, at) => insertAtSlash(u, at, '/'),
    (u, at) => insertAtSlash(u, at, '/..;/x'),
    (u) => `${u}/`,
    (u) => u.replace(/^file:\/\//, 'file://localhost'),
    (u) => u.replace(/^file:\/\//, 'file:'),
    (u, at) => replaceSlash(u, at, '\\'),
    (u, at) => replaceSlash(u, at, '%2F'),
    (u) => u.replace('%C3%A9', 'e%CC%81'),
    (u) => u.replace(/%[0-9A-F]{2}/, (x) => x.toLowerCase()),
    (u) => u.replace(/^([a-z]+:\/\/)([a-z])/, (_, p: string, c: string) => p + c.toUpperCase()),
  );
  const pairs = { compared: 0 };
  fuzz(
    'resource URI: every other spelling of an accepted URI’s resource is refused',
    () =>
      fc.property(candidate, respell, fc.nat(), (uri, change, at) => {
        if (nonCanonicalReason(uri) !== undefined) return;
        const variant = change(uri, at);
        if (variant === uri || forgivingResource(variant) !== forgivingResource(uri)) return;
        pairs.compared++;
        expect(nonCanonicalReason(variant), `${variant} is another spelling of ${uri}`).toBeDefined();
      }),
    { numRuns: 5000 },
  );
  it('the respelling property compares real respellings (it is not vacuous)', () => {
    expect(pairs.compared).toBeGreaterThan(500);
  });
});
