// The one spelling of a resource URI the policy judges. Rules match
// `resources/read` URIs with globs over the string, and the upstream resolves
// that string again (WHATWG URL and fileURLToPath in Node, urllib + unquote +
// normpath in Python, net/url + path.Clean in Go): dot segments, percent
// escapes, scheme and host case, `file://localhost`, `file:/x`, `//`, `\`
// would let one resource be spelled so that a glob misses it. So only the
// canonical form is accepted (RFC 3986 §6.2.2, with every character spelled
// one way only); any other spelling is refused, never rewritten: the body is
// forwarded byte for byte.

/** `scheme ":" ( "//" authority path-abempty / path-rootless ) [ "?" query ]`, no fragment. */
const URI = /^([^:/?#]+):(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?$/;
const SCHEME = /^[a-z][a-z0-9+.-]*$/;

/** Characters RFC 3986 allows raw, less `#` (a fragment names no other resource) and `[` `]` (no IP literals). */
const URI_CHARACTERS = /^[A-Za-z0-9\-._~:/?@!$&'()*+,;=%]*$/;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
/** RFC 3986 pchar less `%`: spelled raw in a path, never encoded. */
const PATH_CHARACTER = /^[A-Za-z0-9\-._~!$&'()*+,;=:@]$/;

/** Schemes WHATWG URL parses specially (`file` has rules of its own below), with their default ports. */
const SPECIAL_SCHEMES: Readonly<Record<string, string>> = { http: '80', https: '443', ws: '80', wss: '443', ftp: '21' };

const HOST = /^[a-z0-9\-_~]+(?:\.[a-z0-9\-_~]+)*$/;
/** A host whose last label is a number is an IPv4 address to WHATWG URL, which also reads `127.1`, `0x7f.1`, `017.0.0.1`. */
const NUMERIC_LABEL = /(?:^|\.)(?:\d+|0x[0-9a-z]*)$/;
const DOTTED_QUAD = /^(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)$/;
const PORT = /^[1-9]\d{0,4}$/;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Why `uri` is not a resource URI in canonical form, or undefined when it is.
 * The reasons name the class, never echo the URI.
 */
export function nonCanonicalReason(uri: string): string | undefined {
  if (!URI_CHARACTERS.test(uri)) return 'it holds white space, a control, non-ASCII, `\\`, `#` or another character that must be percent-encoded';
  const parts = URI.exec(uri);
  if (!parts) return 'it is not an absolute URI';
  const [, scheme, authority, path, query] = parts as unknown as [string, string, string | undefined, string, string | undefined];
  if (!SCHEME.test(scheme)) return 'its scheme is not in lower case or not a scheme';
  const why = authority === undefined ? checkWithoutAuthority(scheme, path) : (checkAuthority(scheme, authority) ?? checkPathAfterAuthority(scheme, path));
  if (why !== undefined) return why;
  return query === undefined ? undefined : checkQuery(scheme, query);
}

function checkWithoutAuthority(scheme: string, path: string): string | undefined {
  // `file:/x`, `http:x`: WHATWG URL supplies the `//` these schemes always have.
  if (scheme === 'file' || scheme in SPECIAL_SCHEMES) return `a ${scheme}: URI without its "//"`;
  // `x:/p` is `x:///p` to readers that do not keep "no authority" apart from an empty one.
  if (path.startsWith('/')) return 'a path that starts with "/" without an authority (write "//" before it)';
  if (path === '') return 'it names nothing after the scheme';
  return checkPath(path.split('/'));
}

function checkAuthority(scheme: string, authority: string): string | undefined {
  if (scheme === 'file') return authority === '' ? undefined : 'a file: URI with a host (only file:/// is read the same everywhere)';
  if (authority.includes('@')) return 'user information in the authority';
  const colon = authority.lastIndexOf(':');
  const host = colon === -1 ? authority : authority.slice(0, colon);
  // Python's urlunsplit writes `x:///p` back as `x:/p`: only file: keeps an empty host apart.
  if (host === '') return `an empty host in a ${scheme}: URI`;
  if (!HOST.test(host)) return 'a host that is not in lower case, has empty labels or holds other characters';
  if (NUMERIC_LABEL.test(host) && !DOTTED_QUAD.test(host)) return 'a numeric host that is not a plain dotted-quad IPv4 address';
  if (colon === -1) return undefined;
  const port = authority.slice(colon + 1);
  if (!PORT.test(port) || Number(port) > 65535) return 'a port that is empty, has leading zeros or is out of range';
  if (SPECIAL_SCHEMES[scheme] === port) return `the default port of ${scheme}: spelled out`;
  return undefined;
}

function checkPathAfterAuthority(scheme: string, path: string): string | undefined {
  if (path === '') return scheme === 'file' || scheme in SPECIAL_SCHEMES ? `a ${scheme}: URI without a path (write "/")` : undefined;
  if (path === '/') return undefined;
  // path-abempty: "" or "/" segment…; the empty first item is the leading "/".
  return checkPath(path.split('/').slice(1));
}

/**
 * Segments must be what every reader resolves them to: no `.`/`..` (raw, or
 * before a `;` parameter as Tomcat reads it), no empty segment (`//`, a
 * trailing `/`: normpath and path.Clean drop them), escapes only where they
 * must be, the decoded text valid UTF-8 in NFC whose NFKC form adds no separator
 * or dot segment (`‥`, `／` are `..`, `/` to software that folds compatibility).
 */
function checkPath(segments: readonly string[]): string | undefined {
  for (const segment of segments) {
    if (segment === '') return 'an empty path segment ("//" or a trailing "/")';
    const result = decodePathSegment(segment);
    if ('why' in result) return result.why;
    const decoded = result.text;
    if (isDotSegment(decoded.split(';')[0]!)) return 'a dot segment ("." or "..")';
    if (decoded !== decoded.normalize('NFC')) return 'percent-encoded text that is not in Unicode NFC';
    const folded = decoded.normalize('NFKC');
    if (folded.includes('/') || folded.includes('\\') || isDotSegment(folded.split(';')[0]!)) {
      return 'percent-encoded text that Unicode compatibility folding turns into a separator or a dot segment';
    }
  }
  return undefined;
}

const isDotSegment = (segment: string) => segment === '.' || segment === '..';

/** Query escapes may stand for reserved characters (`%26` is not `&`), but never for unreserved ones, `%`-less garbage or controls. */
function checkQuery(scheme: string, query: string): string | undefined {
  if (scheme === 'file') return 'a query on a file: URI (file readers ignore it)';
  if (query === '') return 'an empty query (a trailing "?")';
  // WHATWG URL encodes `'` in the query of its special schemes: the readers would hold different strings.
  if (scheme in SPECIAL_SCHEMES && query.includes("'")) return `a raw "'" in the query of a ${scheme}: URI`;
  const decoded = decodeEscapes(query, (byte) => !UNRESERVED.test(String.fromCharCode(byte)) && !isControl(byte));
  return 'why' in decoded ? decoded.why : undefined;
}

/** A path segment percent-decoded, or why it cannot be. */
function decodePathSegment(segment: string): { text: string } | { why: string } {
  return decodeEscapes(segment, (byte) => {
    const char = String.fromCharCode(byte);
    // Only what may not be raw may be escaped: one spelling per character. `%25` invites a second decoding.
    return byte >= 0x80 || (!PATH_CHARACTER.test(char) && char !== '/' && char !== '\\' && char !== '%' && !isControl(byte));
  });
}

const isControl = (byte: number) => byte < 0x20 || byte === 0x7f;

/**
 * Checks every escape of `text` (two upper-case hex digits, a byte `allowed`)
 * and decodes the whole as UTF-8 (no invalid or overlong sequences).
 */
function decodeEscapes(text: string, allowed: (byte: number) => boolean): { text: string } | { why: string } {
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    if (text[i] !== '%') {
      bytes.push(text.charCodeAt(i));
      continue;
    }
    const hex = text.slice(i + 1, i + 3);
    if (!/^[0-9A-F]{2}$/.test(hex)) return { why: /^[0-9a-fA-F]{2}$/.test(hex) ? 'a percent escape in lower case' : 'a "%" that is not a percent escape' };
    const byte = parseInt(hex, 16);
    if (!allowed(byte)) return { why: 'a percent escape of a character that is written raw, of "/", "\\", "%" or a control' };
    bytes.push(byte);
    i += 2;
  }
  try {
    return { text: utf8.decode(Uint8Array.from(bytes)) };
  } catch {
    return { why: 'percent escapes that are not UTF-8' };
  }
}
