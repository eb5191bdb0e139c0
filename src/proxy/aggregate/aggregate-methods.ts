// What an aggregated route answers to each MCP request of one client session
// (DESIGN §8.2): lists merged over every page of every served upstream, names
// shown by the route's pattern; calls sent to the upstream a shown name leads
// to, with its own name; resources read from the upstream that listed the URI
// (the first in configuration order on a clash, logged once).
import type { ShownNames } from '../../config/shown-names.js';
import type { GatewaySpan } from '../../observability/tracing.js';
import type { ProxyLogger } from '../forwarder.js';
import { AggregateUpstreamError } from './captured-exchange.js';
import type { UpstreamHealth } from './upstream-health.js';
import type { JsonRpcAnswer, UpstreamLink } from './upstream-link.js';

/** A list's pages followed at most this far per upstream. */
const MAX_PAGES = 100;
/** URI clashes logged per route (once each). */
const MAX_LOGGED_CLASHES = 1_000;

export interface SessionUpstream {
  link: UpstreamLink;
  health: UpstreamHealth;
}

type Params = Record<string, unknown> | undefined;

const LISTS: Record<string, { member: string; named: boolean }> = {
  'tools/list': { member: 'tools', named: true },
  'prompts/list': { member: 'prompts', named: true },
  'resources/list': { member: 'resources', named: false },
  'resources/templates/list': { member: 'resourceTemplates', named: false },
};

export const rpcError = (code: number, message: string): JsonRpcAnswer => ({ error: { code, message } });

export class AggregateMethods {
  /** URI → upstream, learnt from resources/list answers (first in configuration order wins). */
  private readonly resourceOwners = new Map<string, string>();

  constructor(
    private readonly route: string,
    private readonly upstreams: readonly SessionUpstream[],
    private readonly names: ShownNames,
    private readonly loggedClashes: Set<string>,
    private readonly logger?: ProxyLogger,
  ) {}

  /** An upstream's resources changed: who serves a URI is learnt again from the next list. */
  forgetResources(): void {
    this.resourceOwners.clear();
  }

  /** `signal`: the client's cancellation of this request, passed to the upstream that serves it. */
  async answer(method: string, params: Params, span?: GatewaySpan, signal?: AbortSignal): Promise<JsonRpcAnswer> {
    if (method === 'ping') return { result: {} };
    const list = LISTS[method];
    if (list) return { result: await this.merged(method, list.member, list.named, span) };
    if (method === 'tools/call' || method === 'prompts/get') return this.byName(method, params, span, signal);
    if (method === 'resources/read' || method === 'resources/subscribe' || method === 'resources/unsubscribe') return this.byUri(method, params, span, signal);
    if (method === 'logging/setLevel') {
      await Promise.allSettled(this.served().map((u) => this.call(u, method, params, undefined, span)));
      return { result: {} };
    }
    return rpcError(-32601, `Method not found: ${method}`);
  }

  private served(): SessionUpstream[] {
    return this.upstreams.filter((u) => !u.health.down);
  }

  private async merged(method: string, member: string, named: boolean, span?: GatewaySpan): Promise<Record<string, unknown>> {
    const pages = await Promise.all(
      this.upstreams.map(async (u) => {
        if (u.health.down) return (u.health.leftOut(), []);
        try {
          return await this.allPages(u, method, member, span);
        } catch (err) {
          u.health.leftOut();
          if (!(err instanceof AggregateUpstreamError)) this.logger?.error({ route: this.route, upstream: u.health.name, err }, 'aggregated list failed');
          return [];
        }
      }),
    );
    const items: unknown[] = [];
    for (const [i, entries] of pages.entries()) {
      const upstream = this.upstreams[i]!.health.name;
      for (const item of entries) {
        if (!isRecord(item)) continue;
        if (named && typeof item.name === 'string') items.push({ ...item, name: this.names.shown(upstream, item.name) });
        else if (!named) {
          if (method === 'resources/list' && typeof item.uri === 'string') this.owns(item.uri, upstream);
          items.push(item);
        }
      }
    }
    // What a merged list holds depends on the caller's session: no shared cache keeps it (SEP-2549).
    return { [member]: items, cacheScope: 'private' };
  }

  /** Every page of one upstream's list; its error answer (a list it does not offer) ends it, as it would end a direct client's. */
  private async allPages(u: SessionUpstream, method: string, member: string, span?: GatewaySpan): Promise<unknown[]> {
    const items: unknown[] = [];
    let cursor: unknown;
    for (let page = 0; page < MAX_PAGES; page++) {
      const answer = await this.call(u, method, cursor === undefined ? undefined : { cursor }, undefined, span);
      if (!answer.result) break;
      const entries = answer.result[member];
      if (Array.isArray(entries)) items.push(...(entries as unknown[]));
      cursor = answer.result.nextCursor;
      if (typeof cursor !== 'string' || cursor === '') break;
    }
    return items;
  }

  private owns(uri: string, upstream: string): void {
    const owner = this.resourceOwners.get(uri);
    if (owner === undefined) this.resourceOwners.set(uri, upstream);
    else if (owner !== upstream && !this.loggedClashes.has(uri) && this.loggedClashes.size < MAX_LOGGED_CLASHES) {
      this.loggedClashes.add(uri);
      this.logger?.warn({ route: this.route, uri, served_by: owner, also: upstream }, 'two upstreams list one resource URI: the first in configuration order serves it');
    }
  }

  private async byName(method: string, params: Params, span?: GatewaySpan, signal?: AbortSignal): Promise<JsonRpcAnswer> {
    const shown = params?.name;
    const owner = typeof shown === 'string' ? this.names.owner(shown) : undefined;
    const u = owner && this.upstreams.find((x) => x.health.name === owner.upstream);
    if (!owner || !u) return rpcError(-32602, `Unknown ${method === 'tools/call' ? 'tool' : 'prompt'}: ${String(shown)}`);
    return this.callServed(u, method, { ...params, name: owner.name }, owner.name, span, signal);
  }

  private async byUri(method: string, params: Params, span?: GatewaySpan, signal?: AbortSignal): Promise<JsonRpcAnswer> {
    const uri = params?.uri;
    if (typeof uri !== 'string') return rpcError(-32602, 'params.uri is required');
    if (!this.resourceOwners.has(uri)) await this.merged('resources/list', 'resources', false, span);
    const owner = this.resourceOwners.get(uri);
    const u = owner === undefined ? undefined : this.upstreams.find((x) => x.health.name === owner);
    if (!u) return rpcError(-32002, `Resource not found: ${uri}`);
    return this.callServed(u, method, params, uri, span, signal);
  }

  /** A call to one upstream: failed at once while it is down. */
  private async callServed(u: SessionUpstream, method: string, params: Params, name: string, span?: GatewaySpan, signal?: AbortSignal): Promise<JsonRpcAnswer> {
    if (u.health.down) return rpcError(-32603, `Upstream ${u.health.name} is unavailable`);
    try {
      return await this.call(u, method, params, name, span, signal);
    } catch (err) {
      if (err instanceof AggregateUpstreamError && err.reason === 'cancelled') return rpcError(-32800, 'Request cancelled');
      if (err instanceof AggregateUpstreamError) return rpcError(-32603, `Upstream ${u.health.name} is unavailable`);
      throw err;
    }
  }

  /** One request to one upstream, its health told of the outcome. */
  private async call(u: SessionUpstream, method: string, params: Params, name: string | undefined, span?: GatewaySpan, signal?: AbortSignal): Promise<JsonRpcAnswer> {
    try {
      const answer = await u.link.request(method, params, name, span, signal);
      u.health.served();
      return answer;
    } catch (err) {
      if (saysUpstreamIsDown(method, err)) u.health.failed(err);
      throw err;
    }
  }
}

/**
 * A call that outlives its timeout may be one caller's slow tool: it fails
 * alone, lest any caller could take an upstream from everyone by calling
 * something slow. Lists, and every other failure, say the upstream is down.
 */
function saysUpstreamIsDown(method: string, err: unknown): boolean {
  if (!(err instanceof AggregateUpstreamError)) return true;
  if (err.reason === 'cancelled') return false; // the client's doing, never the upstream's
  if (method in LISTS) return true;
  return err.reason !== 'timeout' && err.status !== 504;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
