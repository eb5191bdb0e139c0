// URL rules shared by resolution and the routes that serve metadata.
import { BlockList, isIP } from 'node:net';

/** Canonical form of a resource or base URL (RFC 8707, MCP): lowercase scheme and host, default port dropped, no trailing slash. */
export function canonicalUrl(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}${u.search}`;
}

/** RFC 9728 §3.1: the well-known segment goes between the host and the path of the resource. */
export function resourceMetadataUrl(resource: string): string {
  const u = new URL(resource);
  return `${u.origin}/.well-known/oauth-protected-resource${u.pathname === '/' ? '' : u.pathname.replace(/\/+$/, '')}`;
}

/** RFC 3986 §2.3 unreserved characters: a percent-encoded one means the character itself. */
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;

/**
 * An http(s) URI as RFC 9449 §4.3 compares a DPoP proof's `htu`: query and
 * fragment dropped, then RFC 3986 §6.2.2 syntax-based normalisation (case of
 * scheme, host and percent-encodings; unreserved characters decoded; dot
 * segments) and §6.2.3 scheme-based (default port, empty path is `/`).
 * undefined: not an absolute http(s) URI, or one carrying user information.
 */
export function normalizedHttpUri(value: string): string | undefined {
  if (!URL.canParse(value)) return undefined;
  const u = new URL(value);
  if ((u.protocol !== 'https:' && u.protocol !== 'http:') || u.username !== '' || u.password !== '') return undefined;
  const path = u.pathname.replace(/%[0-9A-Fa-f]{2}/g, (escape) => {
    const ch = String.fromCharCode(Number.parseInt(escape.slice(1), 16));
    return UNRESERVED.test(ch) ? ch : escape.toUpperCase();
  });
  return `${u.protocol}//${u.host}${path}`;
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');
LOOPBACK.addSubnet('::ffff:127.0.0.0', 104, 'ipv6');

/**
 * A host only this machine reaches: `localhost`, 127.0.0.0/8, ::1 (also in
 * brackets, and IPv4-mapped). `0.0.0.0` and `::` listen everywhere: not loopback.
 */
export function isLoopbackHost(host: string): boolean {
  const bare = host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  if (bare === 'localhost') return true;
  const family = isIP(bare);
  return family !== 0 && LOOPBACK.check(bare, family === 4 ? 'ipv4' : 'ipv6');
}

export function isLoopbackUrl(url: string): boolean {
  return isLoopbackHost(new URL(url).hostname);
}

/** An http: URL that leaves the machine: allowed, but worth a warning. */
export function isPlainHttpRemote(url: string): boolean {
  return new URL(url).protocol === 'http:' && !isLoopbackUrl(url);
}

/**
 * A URL as messages and `check` may print it: credentials in its userinfo
 * (`https://user:secret@host/…`) are replaced by `***` (SECURITY J62).
 */
export function redactUrl(url: string): string {
  if (!URL.canParse(url)) return '(a malformed URL)';
  const u = new URL(url);
  if (u.username === '' && u.password === '') return url;
  u.username = '***';
  u.password = '';
  return u.href;
}
