// Redirect URI rules (OAuth 2.1 §2.3.1 and §7.5, RFC 8252, RFC 9700 §4.1):
// what may be registered, and whether a requested redirect_uri is one of them.
// Here, below the AS, because config checks its static clients' URIs by them too.

const MAX_REDIRECT_URI_LENGTH = 2000;

/** Schemes that run code or read local data in a browser: never a redirect target. */
const DANGEROUS_SCHEMES = new Set(['javascript', 'data', 'vbscript', 'file', 'about', 'blob', 'filesystem', 'view-source', 'jar', 'intent']);

/** Loopback hosts on which plain http is allowed (RFC 8252 §7.3, §8.3). */
const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** Parameters the AS adds to the redirect: a registered URI that already holds one would make the response ambiguous. */
const RESPONSE_PARAMETERS = ['code', 'state', 'iss', 'error', 'error_description', 'error_uri'];

export type RedirectUriVerdict = { ok: true } | { ok: false; reason: string };

/**
 * What a registration may name. `nativeSchemes`: private-use schemes
 * (`com.example.app:/cb`) are allowed, as native apps need them. `only`: the
 * registration's `application_type` (when it states one): `web` takes https
 * only; `native` takes loopback http or a private-use scheme only (OpenID
 * Connect Registration 1.0 §2, MCP 2026-07-28 client registration).
 */
export interface RedirectUriOptions {
  nativeSchemes: boolean;
  only?: 'web' | 'native';
}

/**
 * A private-use scheme is a domain name its app controls, in reverse order
 * (RFC 8252 §7.1: `com.example.app`), so no app can claim another's by chance
 * and no browser's own scheme (`microsoft-edge:`, `googlechrome:`: no dot) passes.
 */
const REVERSE_DNS_SCHEME = /^[a-z][a-z0-9]*(?:-[a-z0-9]+)*(?:\.[a-z0-9]+(?:-[a-z0-9]+)*)+$/;

/** A web address inside the rest of a private-use URI (`x.y:http://…`, encoded too): a scheme that would open it in a browser. */
const EMBEDDED_WEB_ADDRESS = /(?:https?|wss?|ftp)(?::|%3a)/i;

/** Whether `uri` may be registered under `options`. */
export function checkRedirectUri(uri: unknown, options: RedirectUriOptions): RedirectUriVerdict {
  const verdict = checkRedirectUriForm(uri, options.nativeSchemes);
  if (!verdict.ok || options.only === undefined) return verdict;
  const scheme = (uri as string).slice(0, (uri as string).indexOf(':')).toLowerCase();
  if (options.only === 'web' && scheme !== 'https') return bad('a web application (application_type: web) registers https redirect URIs only');
  if (options.only === 'native' && scheme === 'https') {
    return bad('a native application (application_type: native) registers loopback http or private-use scheme redirect URIs only');
  }
  return verdict;
}

function checkRedirectUriForm(uri: unknown, nativeSchemes: boolean): RedirectUriVerdict {
  if (typeof uri !== 'string' || uri === '') return bad('a redirect URI must be a non-empty string');
  if (uri.length > MAX_REDIRECT_URI_LENGTH) return bad('a redirect URI is limited to 2000 characters');
  // Printable ASCII only: no whitespace, no control or bidi characters, no backslash (parsers disagree on it).
  if (!/^[\x21-\x7E]+$/.test(uri)) return bad('a redirect URI holds only printable ASCII characters, without spaces');
  if (uri.includes('\\')) return bad('a redirect URI must not contain a backslash');
  if (uri.includes('#')) return bad('a redirect URI must not contain a fragment');
  if (uri.includes('*')) return bad('a redirect URI must not contain wildcards');
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(uri)?.[1]?.toLowerCase();
  if (!scheme) return bad('a redirect URI must be absolute');
  if (DANGEROUS_SCHEMES.has(scheme)) return bad(`the ${scheme}: scheme is not allowed`);
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return bad('a redirect URI must be a valid absolute URI');
  }
  if (url.username || url.password || /^[^/?]*\/\/[^/?]*@/.test(uri)) return bad('a redirect URI must not contain user information');
  for (const name of RESPONSE_PARAMETERS) if (url.searchParams.has(name)) return bad(`a redirect URI must not already carry the ${name} parameter`);
  // Parsers disagree on non-canonical web URIs (`https:host/cb` has no authority for RFC 3986,
  // `http://2130706433/` or `%2e` in a host is another host to some): keep only what the browser will request.
  if ((scheme === 'https' || scheme === 'http') && withRootPath(uri) !== url.href) {
    return bad('an http(s) redirect URI must be in canonical form: scheme://host, lower case, no default port, no dot segments or encodable characters');
  }
  if (scheme === 'https') return url.hostname ? { ok: true } : bad('an https redirect URI needs a host');
  if (scheme === 'http') {
    return LOOPBACK_HOSTS.has(url.hostname) ? { ok: true } : bad('http redirect URIs are allowed only on loopback hosts (127.0.0.1, [::1], localhost)');
  }
  if (scheme === 'ws' || scheme === 'wss' || scheme === 'ftp') return bad(`the ${scheme}: scheme is not allowed`);
  if (!nativeSchemes) return bad('private-use URI schemes are allowed only for native applications (application_type: native)');
  return checkPrivateUseScheme(scheme, uri);
}

/** RFC 8252 §7.1: a reverse-DNS scheme, opening the app that claims it, never a web address. */
function checkPrivateUseScheme(scheme: string, uri: string): RedirectUriVerdict {
  if (!REVERSE_DNS_SCHEME.test(scheme)) {
    return bad(`a private-use URI scheme is a domain name in reverse order (RFC 8252 §7.1, e.g. com.example.app:/callback); ${scheme}: is not`);
  }
  if (EMBEDDED_WEB_ADDRESS.test(uri.slice(scheme.length + 1))) return bad('a private-use redirect URI must not carry a web address');
  return { ok: true };
}

const LOOPBACK_IP_LITERAL = /^http:\/\/(127\.0\.0\.1|\[::1\])(?::(\d{1,5}))?([/?].*)?$/;

/**
 * Whether `requested` names one of `registered`: byte for byte, except that a
 * loopback IP literal matches on any port (RFC 8252 §7.3; `localhost` gets no
 * such exception). Returns the registered entry, or undefined.
 */
export function matchRedirectUri(requested: string, registered: readonly string[]): string | undefined {
  if (registered.includes(requested)) return requested;
  const asked = LOOPBACK_IP_LITERAL.exec(requested);
  if (!asked || Number(asked[2] ?? 0) > 65535) return undefined;
  for (const candidate of registered) {
    const known = LOOPBACK_IP_LITERAL.exec(candidate);
    if (known && known[1] === asked[1] && (known[3] ?? '') === (asked[3] ?? '')) return candidate;
  }
  return undefined;
}

/** `https://host?q` → `https://host/?q`: an empty path is the root path (what URL.href shows). */
const withRootPath = (uri: string) => uri.replace(/^([a-z]+:\/\/[^/?]*)(?=\?|$)/, '$1/');

function bad(reason: string): RedirectUriVerdict {
  return { ok: false, reason };
}
