// Where user_oauth may send requests that the upstream's answers chose (SSRF,
// SECURITY-CASES C13, as for Client ID Metadata Documents): the upstream's
// 401 names its RFC 9728 metadata, which names the AS, whose RFC 8414
// metadata names the endpoints the gateway then POSTs to. A URL on an origin
// the operator configured (the upstream's, the resource's, a configured
// issuer's or endpoint's) is trusted as the configuration is; any other is
// fetched only over https from public addresses (checked at connect, so DNS
// cannot swap the address after the check). A refused URL is never fetched.
import { isIP } from 'node:net';
import { fetch as undiciFetch, type Agent } from 'undici';
import type { UserOAuthConfig } from '../../config/types.js';
import { isLoopbackHost } from '../../config/urls.js';
import { isForbiddenAddress, publicOnlyAgent, SafeFetchError } from '../helpers/safe-fetch.js';
import { bounded } from './upstream-answers.js';
import { UpstreamAsError } from './upstream-as-error.js';

/** A discovered URL the gateway will not reach; the message says which and why, and is safe to show. */
export class DiscoveredUrlRefused extends UpstreamAsError {}

export interface DiscoveryGuardOptions {
  /** The route's upstream URL. */
  upstream: string;
  config: UserOAuthConfig;
  timeoutMs: number;
  /** Test only, never from configuration: loopback addresses (and http to them) count as public. */
  allowLoopback?: boolean;
}

/** One agent per kind: connections are not reused across differently-checked hosts anyway (pipelining 0). */
const agents = new Map<string, Agent>();

export class DiscoveryGuard {
  readonly #configured: Set<string>;
  readonly #agent: Agent;

  constructor(private readonly o: DiscoveryGuardOptions) {
    const { config } = o;
    const urls = [o.upstream, config.resource, config.issuer, config.endpoints?.authorization, config.endpoints?.token, config.revocationEndpoint];
    this.#configured = new Set(urls.filter((u): u is string => u !== undefined && URL.canParse(u)).map((u) => new URL(u).origin));
    const kind = `${o.allowLoopback === true}:${o.timeoutMs}`;
    this.#agent = agents.get(kind) ?? publicOnlyAgent({ allowLoopback: o.allowLoopback, timeoutMs: o.timeoutMs });
    agents.set(kind, this.#agent);
  }

  /** The endpoints of a configured AS's metadata: trusted as that AS is. */
  trust(urls: Record<string, string>): void {
    for (const url of Object.values(urls)) if (URL.canParse(url)) this.#configured.add(new URL(url).origin);
  }

  /** Whether `url` is on an origin the operator configured. */
  configured(url: string): boolean {
    return URL.canParse(url) && this.#configured.has(new URL(url).origin);
  }

  /** Refuses, before any request, a discovered `url` that is not https or names a non-public address; `what` names it in the error. */
  check(url: string, what: string): void {
    if (!URL.canParse(url)) throw new DiscoveredUrlRefused(`${what} is not a URL`);
    if (this.configured(url)) return;
    const parsed = new URL(url);
    const loopbackAllowed = this.o.allowLoopback === true && isLoopbackHost(parsed.hostname);
    if (parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && loopbackAllowed)) {
      throw new DiscoveredUrlRefused(`${what} ${parsed.origin} is not https (only a configured origin may be http)`);
    }
    if (parsed.username || parsed.password) throw new DiscoveredUrlRefused(`${what} carries user information`);
    const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(host) !== 0 && isForbiddenAddress(host, { allowLoopback: this.o.allowLoopback })) {
      throw new DiscoveredUrlRefused(`${what} ${parsed.origin} is a non-public address`);
    }
  }

  /** oauth4webapi's customFetch: configured origins as configured, any other checked and connected to public addresses only; answers bounded. */
  readonly fetch = async (url: string, init: RequestInit): Promise<Response> => {
    if (this.configured(url)) return bounded(await fetch(url, init));
    this.check(url, 'the endpoint');
    let response: Response;
    try {
      response = (await undiciFetch(url, { ...(init as object), dispatcher: this.#agent })) as unknown as Response;
    } catch (err) {
      if (forbiddenAddress(err)) throw new DiscoveredUrlRefused(`the endpoint ${new URL(url).origin} resolves to a non-public address`);
      throw err;
    }
    return bounded(response);
  };
}

function forbiddenAddress(err: unknown): boolean {
  for (let e: unknown = err; e instanceof Error; e = e.cause) if (e instanceof SafeFetchError && e.reason === 'forbidden_address') return true;
  return false;
}
