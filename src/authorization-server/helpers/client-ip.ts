// The client address that rate limits key by: the socket peer, or with
// trust_proxy the address the outermost trusted hop appended to
// X-Forwarded-For (the last entry for one proxy, the n-th from the right for
// n: every earlier one is whatever the client chose to send).
// Without trust_proxy the header is never read, so a client cannot pick its
// own bucket. IPv6 clients are keyed by their /64: one host usually holds a
// whole /64 and could otherwise take a fresh bucket per request.
import { isIP } from 'node:net';
import type { Context } from 'hono';
import type { HttpBindings } from '@hono/node-server';

export function clientIp(c: Context, trustProxy: boolean | number): string {
  const peer = (c.env as Partial<HttpBindings> | undefined)?.incoming?.socket.remoteAddress;
  const hops = trustProxy === true ? 1 : trustProxy === false ? 0 : trustProxy;
  const entries = hops > 0 ? (c.req.header('x-forwarded-for')?.split(',') ?? []) : [];
  if (entries.length > 0) {
    // Fewer entries than hops: the request skipped outer proxies, and the first entry is a trusted hop's.
    const appended = parseAddress(entries.at(-Math.min(hops, entries.length))!);
    if (appended) return rateLimitAddress(appended);
  }
  const socket = peer && parseAddress(peer);
  return socket ? rateLimitAddress(socket) : 'unknown';
}

/** An IP literal as proxies write it (`1.2.3.4`, `1.2.3.4:5678`, `[2001:db8::1]:443`, `fe80::1%eth0`); undefined otherwise. */
export function parseAddress(raw: string): string | undefined {
  let address = raw.trim();
  const bracketed = /^\[([^\]]+)\](?::\d{1,5})?$/.exec(address);
  if (bracketed) address = bracketed[1]!;
  else if (/^\d{1,3}(?:\.\d{1,3}){3}:\d{1,5}$/.test(address)) address = address.slice(0, address.lastIndexOf(':'));
  address = address.split('%')[0]!;
  return isIP(address) ? address : undefined;
}

/** IPv4 as is (IPv4-mapped IPv6 included); other IPv6 addresses as their /64 prefix. */
export function rateLimitAddress(address: string): string {
  if (isIP(address) !== 6) return address;
  const groups = ipv6Groups(address);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  }
  return `${groups.slice(0, 4).map((g) => g.toString(16)).join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 literal (`::` expanded, a dotted IPv4 tail converted). */
function ipv6Groups(address: string): number[] {
  let text = address.toLowerCase();
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const middle = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill('0');
  return [...left, ...middle, ...right].map((g) => parseInt(g, 16));
}
