// Fetches a URL that a client chose (a Client ID Metadata Document) without
// letting it reach the gateway's own network (SSRF, SECURITY-CASES C13):
// https only; the host's addresses are resolved once, checked against every
// non-public range, and the connection goes to the checked address (no DNS
// rebinding between check and connect); redirects are followed by hand and
// re-checked, or refused where the caller must not follow any; size and time
// are bounded.
import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import { BlockList, isIP, type LookupFunction } from 'node:net';
import { Agent, request, type Dispatcher } from 'undici';

export interface SafeFetchOptions {
  timeoutMs?: number;
  maxBytes?: number;
  maxRedirects?: number;
  /**
   * Test only, never from configuration: also allow loopback addresses
   * (127.0.0.0/8, ::1), so tests can serve documents on 127.0.0.1.
   */
  allowLoopback?: boolean;
  /** Test only: an extra trusted CA certificate (PEM) for such test servers. */
  ca?: string;
}

export type SafeFetchFailure = 'not_https' | 'forbidden_address' | 'too_many_redirects' | 'redirect_refused' | 'too_large' | 'timeout' | 'network';

export class SafeFetchError extends Error {
  override readonly name = 'SafeFetchError';
  constructor(
    readonly reason: SafeFetchFailure,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface SafeResponse {
  /** The URL that answered (after redirects). */
  url: string;
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export interface FetchCallOptions {
  /** 'refuse': a redirect answer is an error (redirect_refused), its target never fetched. Default 'follow'. */
  redirects?: 'follow' | 'refuse';
}

export interface SafeFetcher {
  fetch(url: string, options?: FetchCallOptions): Promise<SafeResponse>;
  close(): Promise<void>;
}

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/** Everything that is not the public internet (RFC 6890 special-purpose registries, cloud metadata, CGNAT). */
const NON_PUBLIC: ReadonlyArray<[string, number, 'ipv4' | 'ipv6']> = [
  ['0.0.0.0', 8, 'ipv4'], // "this network"
  ['10.0.0.0', 8, 'ipv4'],
  ['100.64.0.0', 10, 'ipv4'], // CGNAT
  ['127.0.0.0', 8, 'ipv4'],
  ['169.254.0.0', 16, 'ipv4'], // link-local, cloud metadata (169.254.169.254)
  ['172.16.0.0', 12, 'ipv4'],
  ['192.0.0.0', 24, 'ipv4'],
  ['192.0.2.0', 24, 'ipv4'],
  ['192.88.99.0', 24, 'ipv4'],
  ['192.168.0.0', 16, 'ipv4'],
  ['198.18.0.0', 15, 'ipv4'],
  ['198.51.100.0', 24, 'ipv4'],
  ['203.0.113.0', 24, 'ipv4'],
  ['224.0.0.0', 4, 'ipv4'], // multicast
  ['240.0.0.0', 4, 'ipv4'], // reserved, broadcast
  ['::', 128, 'ipv6'],
  ['::1', 128, 'ipv6'],
  ['::', 96, 'ipv6'], // IPv4-compatible (deprecated): ::127.0.0.1 reaches IPv4 where automatic tunnels exist
  ['::ffff:0:0:0', 96, 'ipv6'], // IPv4-translated (SIIT): ::ffff:0:7f00:1
  ['64:ff9b::', 96, 'ipv6'], // NAT64: reaches IPv4 (incl. private) through a gateway
  ['64:ff9b:1::', 48, 'ipv6'],
  ['100::', 64, 'ipv6'],
  ['2001::', 23, 'ipv6'], // IETF protocol assignments, Teredo
  ['2001:db8::', 32, 'ipv6'],
  ['2002::', 16, 'ipv6'], // 6to4 embeds an IPv4 address
  ['fc00::', 7, 'ipv6'], // unique local (incl. fd00:ec2::254 metadata)
  ['fe80::', 10, 'ipv6'], // link-local
  ['fec0::', 10, 'ipv6'], // site-local (deprecated)
  ['ff00::', 8, 'ipv6'], // multicast
];

const nonPublic = new BlockList();
for (const [network, prefix, family] of NON_PUBLIC) nonPublic.addSubnet(network, prefix, family);
const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/**
 * Whether an IP address is outside the public internet. IPv4-mapped IPv6
 * (`::ffff:127.0.0.1`, `::ffff:7f00:1`) is judged as the IPv4 address it maps;
 * anything that is not an IP address at all counts as forbidden.
 */
export function isForbiddenAddress(address: string, options: { allowLoopback?: boolean } = {}): boolean {
  const bare = address.replace(/^\[(.*)\]$/, '$1');
  const family = isIP(bare);
  if (family === 0) return true;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (options.allowLoopback && loopback.check(bare, type)) return false;
  return nonPublic.check(bare, type);
}

export function createSafeFetcher(options: SafeFetchOptions = {}): SafeFetcher {
  const timeoutMs = options.timeoutMs ?? 5_000;
  const maxBytes = options.maxBytes ?? 64 * 1024;
  const maxRedirects = options.maxRedirects ?? 3;
  const allowLoopback = options.allowLoopback === true;
  const agent = new Agent({
    connect: { lookup: publicOnlyLookup(allowLoopback), timeout: timeoutMs, ...(options.ca && { ca: options.ca }) },
    // One connection per fetch: nothing is reused across differently-checked hosts.
    pipelining: 0,
  });

  async function fetchOnce(url: URL, signal: AbortSignal): Promise<SafeResponse> {
    refuseUnfetchableUrl(url, allowLoopback);
    const response = await request(url, {
      dispatcher: agent,
      method: 'GET',
      signal,
      headers: { accept: 'application/json', 'user-agent': 'mcp-auth-gateway' },
    });
    const body = await readBounded(response, maxBytes);
    return { url: url.href, status: response.statusCode, headers: response.headers, body };
  }

  return {
    async fetch(target, callOptions = {}) {
      const signal = AbortSignal.timeout(timeoutMs);
      let url = new URL(target);
      try {
        for (let hop = 0; ; hop++) {
          const response = await fetchOnce(url, signal);
          const location = response.headers.location;
          if (!REDIRECT_STATUSES.has(response.status) || typeof location !== 'string') return response;
          if (callOptions.redirects === 'refuse') throw new SafeFetchError('redirect_refused', `the URL answered a redirect (HTTP ${response.status}), which is not followed`);
          if (hop >= maxRedirects) throw new SafeFetchError('too_many_redirects', `more than ${maxRedirects} redirects`);
          // Every hop is checked again: scheme here, addresses at connect.
          url = new URL(location, url);
        }
      } catch (err) {
        throw asSafeFetchError(err, signal);
      }
    },
    close: () => agent.close(),
  };
}

/**
 * An undici dispatcher whose connections reach public addresses only (the
 * same lookup as the fetcher's): for callers that need more than a GET.
 */
export function publicOnlyAgent(options: { allowLoopback?: boolean; timeoutMs: number }): Agent {
  return new Agent({ connect: { lookup: publicOnlyLookup(options.allowLoopback === true), timeout: options.timeoutMs }, pipelining: 0 });
}

/** DNS lookup for the agent's connections: a host with any non-public address is refused. */
function publicOnlyLookup(allowLoopback: boolean): LookupFunction {
  return (hostname, lookupOptions, callback) => {
    dnsLookup(hostname, { all: true, family: lookupOptions.family, hints: lookupOptions.hints }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      // One bad address refuses the host: round-robin DNS must not smuggle an internal target in.
      const forbidden = addresses.find((a) => isForbiddenAddress(a.address, { allowLoopback }));
      if (forbidden || addresses.length === 0) {
        return callback(new SafeFetchError('forbidden_address', `${hostname} resolves to a non-public address`), '', 0);
      }
      if (lookupOptions.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, addresses);
      const [first] = addresses as [LookupAddress];
      callback(null, first.address, first.family);
    });
  };
}

/** https only, no user information, and an IP literal (which never goes through lookup) must be public. */
function refuseUnfetchableUrl(url: URL, allowLoopback: boolean): void {
  if (url.protocol !== 'https:') throw new SafeFetchError('not_https', 'only https URLs are fetched');
  if (url.username || url.password) throw new SafeFetchError('not_https', 'URLs with user information are not fetched');
  if (isIP(url.hostname.replace(/^\[(.*)\]$/, '$1')) !== 0 && isForbiddenAddress(url.hostname, { allowLoopback })) {
    throw new SafeFetchError('forbidden_address', `${url.hostname} is not a public address`);
  }
}

/** The body, refused past `maxBytes` whether declared by Content-Length or streamed. */
async function readBounded(response: Dispatcher.ResponseData, maxBytes: number): Promise<Buffer> {
  const declared = Number(response.headers['content-length'] ?? 0);
  if (declared > maxBytes) {
    response.body.destroy();
    throw new SafeFetchError('too_large', `the response is larger than ${maxBytes} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response.body) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) {
      response.body.destroy();
      throw new SafeFetchError('too_large', `the response is larger than ${maxBytes} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

function asSafeFetchError(err: unknown, signal: AbortSignal): SafeFetchError {
  for (let e: unknown = err; e instanceof Error; e = e.cause) if (e instanceof SafeFetchError) return e;
  if (signal.aborted) return new SafeFetchError('timeout', 'the fetch took too long', { cause: err });
  return new SafeFetchError('network', `the fetch failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
}
