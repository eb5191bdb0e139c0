// What an aggregated route answers to each MCP request of one client session
// (DESIGN §8.2): lists merged over every page of every served upstream, names
// shown by the route's pattern; calls sent to the upstream a shown name leads
// to, with its own name; resources read from the upstream that listed the URI
// (the first in configuration order on a clash, logged once). A merged list is
// bounded per request and per upstream (bytes and pages read): beyond, it is
// cut at a page and the cut logged. The URI map is kept per session: an
// unknown URI is answered from it, refreshed at most once per REFRESH_MS.
import type { AuthContext } from '../../auth/principal.js';
import type { ShownNames } from '../../config/shown-names.js';
import type { GatewaySpan } from '../../observability/tracing.js';
import type { ProxyLogger } from '../forwarder.js';
import { AggregateUpstreamError } from './captured-exchange.js';
import { CallerAnswerError } from './caller-answer.js';
import type { MessageChannel } from './session-streams.js';
import type { UpstreamHealth } from './upstream-health.js';
import type { JsonRpcAnswer, MeasuredAnswer, UpstreamLink } from './upstream-link.js';

/** A list's pages followed at most this far per upstream, and over all upstreams of one merged list. */
export const MAX_PAGES_PER_UPSTREAM = 100;
export const MAX_PAGES_PER_LIST = 200;
/** Bytes of upstream answers one merged list reads, per upstream and in all (one page more may be in flight per upstream). */
export const MAX_LIST_BYTES_PER_UPSTREAM = 8 * 1024 * 1024;
export const MAX_LIST_BYTES = 16 * 1024 * 1024;
/** An unknown URI re-lists resources at most this often per session; otherwise it is answered from the last list. */
export const REFRESH_MS = 30_000;
/** URI clashes logged per route (once each). */
const MAX_LOGGED_CLASHES = 1_000;

export interface SessionUpstream {
  link: UpstreamLink;
  health: UpstreamHealth;
}

type Params = Record<string, unknown> | undefined;

/** What one client request brings: its own auth (credentials may be per request) and span. */
export interface RequestContext {
  auth: AuthContext;
  span?: GatewaySpan;
  /** The client's cancellation of this request, passed to the upstream that serves it. */
  signal?: AbortSignal;
  /** The stream of the client's POST: what the upstream sends with its answer (progress, requests) goes there. */
  related?: MessageChannel;
}

/** What is left of one merged list's bounds. */
interface ListBudget {
  bytes: number;
  pages: number;
  cut: boolean;
}

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
  /**
   * Merged lists under way, by method: concurrent requests of this session for one list share one
   * reading, so a batch of 100 (or 100 POSTs at once) costs the upstreams and memory one list.
   */
  private readonly listing = new Map<string, Promise<Record<string, unknown>>>();
  /** The resources/list under way for unknown URIs (one at a time), and when the last one started. */
  private refreshing?: Promise<unknown>;
  private refreshedAt = -Infinity;
  /** An upstream accepted a `resources/subscribe` or `resources/unsubscribe` of the client's (session-interests.ts). */
  onSubscription?: (method: string, uri: string, upstream: string) => void;

  constructor(
    private readonly route: string,
    private readonly upstreams: readonly SessionUpstream[],
    private readonly names: ShownNames,
    private readonly loggedClashes: Set<string>,
    private readonly logger?: ProxyLogger,
    private readonly now: () => number = Date.now,
  ) {}

  /** An upstream's resources changed: who serves a URI is learnt again from the next list (at once). */
  forgetResources(): void {
    this.resourceOwners.clear();
    // A list read before the change is not handed to requests made after it.
    this.listing.delete('resources/list');
    this.refreshedAt = -Infinity;
  }

  async answer(method: string, params: Params, ctx: RequestContext): Promise<JsonRpcAnswer> {
    if (method === 'ping') return { result: {} };
    const list = LISTS[method];
    if (list) return { result: await this.shared(method, list.member, list.named, ctx) };
    if (method === 'tools/call' || method === 'prompts/get') return this.byName(method, params, ctx);
    if (method === 'resources/read' || method === 'resources/subscribe' || method === 'resources/unsubscribe') return this.byUri(method, params, ctx);
    if (method === 'logging/setLevel') {
      await Promise.allSettled(this.served().map((u) => this.call(u, method, params, undefined, ctx)));
      return { result: {} };
    }
    return rpcError(-32601, `Method not found: ${method}`);
  }

  private served(): SessionUpstream[] {
    return this.upstreams.filter((u) => !u.health.down);
  }

  /** The session's merged list under way for `method`, or a new one. Shared, it is not cancelled by one request's cancellation. */
  private shared(method: string, member: string, named: boolean, ctx: RequestContext): Promise<Record<string, unknown>> {
    let reading = this.listing.get(method);
    if (reading === undefined) {
      const started = this.merged(method, member, named, { auth: ctx.auth, span: ctx.span }).finally(() => {
        if (this.listing.get(method) === started) this.listing.delete(method);
      });
      reading = started;
      this.listing.set(method, started);
    }
    return reading;
  }

  private async merged(method: string, member: string, named: boolean, ctx: RequestContext): Promise<Record<string, unknown>> {
    const budget: ListBudget = { bytes: MAX_LIST_BYTES, pages: MAX_PAGES_PER_LIST, cut: false };
    const pages = await Promise.all(
      this.upstreams.map(async (u) => {
        if (u.health.down) return (u.health.leftOut(), []);
        try {
          return await this.allPages(u, method, member, budget, ctx);
        } catch (err) {
          u.health.leftOut();
          if (!(err instanceof AggregateUpstreamError) && !(err instanceof CallerAnswerError)) this.logger?.error({ route: this.route, upstream: u.health.name, err }, 'aggregated list failed');
          return [];
        }
      }),
    );
    const items: unknown[] = [];
    const seen = new Map<string, string>();
    for (const [i, entries] of pages.entries()) {
      const upstream = this.upstreams[i]!.health.name;
      for (const item of entries) {
        if (!isRecord(item)) continue;
        if (named && typeof item.name === 'string') items.push({ ...item, name: this.names.shown(upstream, item.name) });
        else if (!named && this.listed(method, item, upstream, seen)) items.push(item);
      }
    }
    // What a merged list holds depends on the caller's session: no shared cache keeps it (SEP-2549).
    return { [member]: items, cacheScope: 'private' };
  }

  /**
   * The pages of one upstream's list, while the bounds allow; its error answer (a list it does not
   * offer) ends it, as it would end a direct client's. A list cut by the bounds is logged.
   */
  private async allPages(u: SessionUpstream, method: string, member: string, budget: ListBudget, ctx: RequestContext): Promise<unknown[]> {
    const items: unknown[] = [];
    let cursor: unknown;
    let bytes = 0;
    for (let page = 0; ; page++) {
      if (page >= MAX_PAGES_PER_UPSTREAM || bytes >= MAX_LIST_BYTES_PER_UPSTREAM || budget.pages <= 0 || budget.bytes <= 0) {
        this.logger?.warn({ route: this.route, upstream: u.health.name, method, pages: page, bytes }, 'aggregated list cut: its bounds per request and per upstream reached');
        budget.cut = true;
        break;
      }
      budget.pages--;
      const measured = await this.call(u, method, cursor === undefined ? undefined : { cursor }, undefined, ctx);
      bytes += measured.bytes;
      budget.bytes -= measured.bytes;
      const result = measured.answer.result;
      if (!result) break;
      const entries = result[member];
      if (Array.isArray(entries)) items.push(...(entries as unknown[]));
      cursor = result.nextCursor;
      if (typeof cursor !== 'string' || cursor === '') break;
    }
    return items;
  }

  /**
   * Whether a resource or template is shown: a resource URI once, as the upstream that serves it
   * (the first in configuration order) lists it; a later upstream's entry would not be what a read gets.
   */
  private listed(method: string, item: Record<string, unknown>, upstream: string, seen: Map<string, string>): boolean {
    if (method !== 'resources/list' || typeof item.uri !== 'string') return true;
    this.owns(item.uri, upstream);
    const first = seen.get(item.uri);
    if (first === undefined) seen.set(item.uri, upstream);
    return (first ?? upstream) === upstream;
  }

  private owns(uri: string, upstream: string): void {
    const owner = this.resourceOwners.get(uri);
    if (owner === undefined) this.resourceOwners.set(uri, upstream);
    else if (owner !== upstream && !this.loggedClashes.has(uri) && this.loggedClashes.size < MAX_LOGGED_CLASHES) {
      this.loggedClashes.add(uri);
      this.logger?.warn({ route: this.route, uri, served_by: owner, also: upstream }, 'two upstreams list one resource URI: the first in configuration order serves it');
    }
  }

  private async byName(method: string, params: Params, ctx: RequestContext): Promise<JsonRpcAnswer> {
    const shown = params?.name;
    const owner = typeof shown === 'string' ? this.names.owner(shown) : undefined;
    const u = owner && this.upstreams.find((x) => x.health.name === owner.upstream);
    if (!owner || !u) return rpcError(-32602, `Unknown ${method === 'tools/call' ? 'tool' : 'prompt'}: ${String(shown)}`);
    return this.callServed(u, method, { ...params, name: owner.name }, owner.name, ctx);
  }

  private async byUri(method: string, params: Params, ctx: RequestContext): Promise<JsonRpcAnswer> {
    const uri = params?.uri;
    if (typeof uri !== 'string') return rpcError(-32602, 'params.uri is required');
    if (!this.resourceOwners.has(uri)) await this.refreshOwners(ctx);
    const owner = this.resourceOwners.get(uri);
    const u = owner === undefined ? undefined : this.upstreams.find((x) => x.health.name === owner);
    if (!u) return rpcError(-32002, `Resource not found: ${uri}`);
    const answer = await this.callServed(u, method, params, uri, ctx);
    if (answer.result && method !== 'resources/read') this.onSubscription?.(method, uri, u.health.name);
    return answer;
  }

  /**
   * Lists resources again for a URI the map lacks: one list at a time (concurrent reads wait for
   * it), at most once per REFRESH_MS; otherwise the map as the last list left it answers.
   */
  private async refreshOwners(ctx: RequestContext): Promise<void> {
    if (this.refreshing === undefined && this.now() - this.refreshedAt >= REFRESH_MS) {
      this.refreshedAt = this.now();
      this.refreshing = this.shared('resources/list', 'resources', false, ctx).finally(() => (this.refreshing = undefined));
    }
    await this.refreshing?.catch(() => undefined);
  }

  /** A call to one upstream: failed at once while it is down. */
  private async callServed(u: SessionUpstream, method: string, params: Params, name: string, ctx: RequestContext): Promise<JsonRpcAnswer> {
    if (u.health.down) return rpcError(-32603, `Upstream ${u.health.name} is unavailable`);
    try {
      return (await this.call(u, method, params, name, ctx)).answer;
    } catch (err) {
      if (err instanceof CallerAnswerError) return err.answerFor(u.link.clientVersion); // e.g. the link to connect the caller's account there
      if (err instanceof AggregateUpstreamError && err.reason === 'cancelled') return rpcError(-32800, 'Request cancelled');
      if (err instanceof AggregateUpstreamError && err.status !== undefined && err.status < 500 && err.status !== 404) return rpcError(-32603, `Upstream ${u.health.name} refused the call (HTTP ${err.status})`);
      if (err instanceof AggregateUpstreamError) return rpcError(-32603, `Upstream ${u.health.name} is unavailable`);
      throw err;
    }
  }

  /** One request to one upstream, its health told of the outcome. */
  private async call(u: SessionUpstream, method: string, params: Params, name: string | undefined, ctx: RequestContext): Promise<MeasuredAnswer> {
    try {
      const answer = await u.link.request(method, params, name, ctx.auth, ctx.span, ctx.signal, ctx.related);
      u.health.served();
      return answer;
    } catch (err) {
      u.health.failedWith(method, err);
      throw err;
    }
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
