// What an aggregated route answers to each MCP request of one client session
// (DESIGN §8.2): lists merged over every page of every served upstream, names
// shown by the route's pattern; calls sent to the upstream a shown name leads
// to, with its own name; resources read from the upstream that listed the URI
// or whose template matches it (resource-owners.ts); completions sent where
// their prompt or resource leads. A merged list is bounded per request and per
// upstream (bytes and pages read): beyond, it is cut at a page and the cut
// logged. Who serves which URI is kept per session: an unknown URI is answered
// from it, the lists read again at most once per REFRESH_MS.
import type { AuthContext } from '../../auth/principal.js';
import type { ShownNames } from '../../config/shown-names.js';
import type { GatewaySpan } from '../../observability/tracing.js';
import type { ProxyLogger } from '../forwarder.js';
import { AggregateUpstreamError } from './captured-exchange.js';
import { CallerAnswerError, isCallersOwn } from './caller-answer.js';
import { ResourceOwners } from './resource-owners.js';
import { SessionTasks } from './session-tasks.js';
import { shownCreation } from './shown-task-ids.js';
import { TaskRouting } from './task-routing.js';
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
  /** URI → upstream as the policy judged the request: what was judged is where it goes. */
  servedBy?: ReadonlyMap<string, string>;
  /** Told the upstream a single request is routed to (its span's attribute). */
  routed?: (upstream: string) => void;
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
  /** Who serves which URI, learnt from resources/list and resources/templates/list answers. */
  private readonly owners: ResourceOwners;
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
  /** The MCP tasks the upstreams created for this session, by the ids the client is shown. */
  readonly tasks = new SessionTasks();
  private readonly taskRouting: TaskRouting<SessionUpstream, RequestContext>;

  constructor(
    private readonly route: string,
    private readonly upstreams: readonly SessionUpstream[],
    private readonly names: ShownNames,
    loggedClashes: Set<string>,
    private readonly logger?: ProxyLogger,
    private readonly now: () => number = Date.now,
    /** The client speaks 2026-07-28 (a session-less session): its revision's tasks methods. */
    modernClient = false,
  ) {
    this.owners = new ResourceOwners(route, upstreams.map((u) => u.health.name), loggedClashes, logger);
    const calls = {
      served: () => this.served(),
      named: (upstream: string) => this.named(upstream),
      call: (u: SessionUpstream, method: string, params: Params, name: string | undefined, ctx: RequestContext) => this.callServed(u, method, params, name, ctx),
      pages: (u: SessionUpstream, method: string, member: string, ctx: RequestContext) => this.allPages(u, method, member, { bytes: MAX_LIST_BYTES, pages: MAX_PAGES_PER_LIST, cut: false }, ctx),
    };
    this.taskRouting = new TaskRouting(this.tasks, calls, modernClient);
  }

  /** An upstream's resources changed: who serves a URI is learnt again from the next lists (at once). */
  forgetResources(): void {
    this.owners.clear();
    // A list read before the change is not handed to requests made after it.
    this.listing.delete('resources/list');
    this.listing.delete('resources/templates/list');
    this.refreshedAt = -Infinity;
  }

  async answer(method: string, params: Params, ctx: RequestContext): Promise<JsonRpcAnswer> {
    if (method === 'ping') return { result: {} };
    const list = LISTS[method];
    if (list) return { result: await this.shared(method, list.member, list.named, ctx) };
    if (method === 'tools/call' || method === 'prompts/get') return this.byName(method, params, ctx);
    if (method === 'resources/read' || method === 'resources/subscribe' || method === 'resources/unsubscribe') return this.byUri(method, params, ctx);
    if (method === 'completion/complete') return this.complete(params, ctx);
    if (method.startsWith('tasks/')) return this.taskRouting.answer(method, params, ctx);
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
          const entries = await this.allPages(u, method, member, budget, ctx);
          if (method === 'resources/templates/list') this.owners.templatesOf(u.health.name, entries);
          // Its latest list replaces what it listed before (an upstream left out keeps what it had).
          if (method === 'resources/list') this.owners.listedAt(u.health.name, urisOf(entries));
          return entries;
        } catch (err) {
          u.health.leftOut();
          if (!(err instanceof AggregateUpstreamError) && !isCallersOwn(err)) this.logger?.error({ route: this.route, upstream: u.health.name, err }, 'aggregated list failed');
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
    const first = seen.get(item.uri);
    if (first === undefined) seen.set(item.uri, upstream);
    else if (first !== upstream) this.owners.clash(item.uri, first, upstream);
    return (first ?? upstream) === upstream;
  }

  private async byName(method: string, params: Params, ctx: RequestContext): Promise<JsonRpcAnswer> {
    const shown = params?.name;
    const owner = typeof shown === 'string' ? this.names.owner(shown) : undefined;
    const u = owner && this.named(owner.upstream);
    if (!owner || !u) return rpcError(-32602, `Unknown ${method === 'tools/call' ? 'tool' : 'prompt'}: ${String(shown)}`);
    const answer = await this.callServed(u, method, { ...params, name: owner.name }, owner.name, ctx);
    // A task the call created is this session's, shown to the client by an id of the gateway's.
    return method === 'tools/call' ? shownCreation(answer, u.health.name, this.tasks) : answer;
  }

  private async byUri(method: string, params: Params, ctx: RequestContext): Promise<JsonRpcAnswer> {
    const uri = params?.uri;
    if (typeof uri !== 'string') return rpcError(-32602, 'params.uri is required');
    const u = this.named(await this.judgedOwner(uri, ctx));
    if (!u) return rpcError(-32002, `Resource not found: ${uri}`);
    const answer = await this.callServed(u, method, params, uri, ctx);
    if (answer.result && method !== 'resources/read') this.onSubscription?.(method, uri, u.health.name);
    return answer;
  }

  /** The upstream serving `uri` in this session, placed as a read is (a listen's watched URIs); undefined when none does. */
  async ownerOf(uri: string, ctx: Pick<RequestContext, 'auth' | 'span' | 'servedBy'>): Promise<SessionUpstream | undefined> {
    return this.named(await this.judgedOwner(uri, ctx));
  }

  /**
   * completion/complete: a `ref/prompt` by shown name goes to its upstream with the upstream's own
   * name; a `ref/resource` (a URI, or a template as listed) to the upstream that serves it.
   */
  private async complete(params: Params, ctx: RequestContext): Promise<JsonRpcAnswer> {
    const ref = isRecord(params?.ref) ? params.ref : undefined;
    if (ref?.type === 'ref/prompt') {
      const owner = typeof ref.name === 'string' ? this.names.owner(ref.name) : undefined;
      const u = owner && this.named(owner.upstream);
      if (!owner || !u) return rpcError(-32602, `Unknown prompt: ${String(ref.name)}`);
      return this.callServed(u, 'completion/complete', { ...params, ref: { ...ref, name: owner.name } }, undefined, ctx);
    }
    if (ref?.type !== 'ref/resource' || typeof ref.uri !== 'string') return rpcError(-32602, 'params.ref must be a ref/prompt with a name or a ref/resource with a uri');
    const u = this.named(await this.judgedOwner(ref.uri, ctx));
    if (!u) return rpcError(-32602, `Unknown resource: ${ref.uri}`);
    return this.callServed(u, 'completion/complete', params, undefined, ctx);
  }

  /**
   * The upstream that serves `uri` (a URI, or a template as listed) in this session, as a read
   * would be routed: from the lists read so far, else from lists read again (at most once per
   * REFRESH_MS). The policy asks this too, before it judges a rule's `match.upstream`.
   */
  async upstreamOf(uri: string, ctx: Pick<RequestContext, 'auth' | 'span'>): Promise<string | undefined> {
    const known = this.owners.owner(uri);
    if (known !== undefined) return known;
    await this.refreshOwners(ctx);
    return this.owners.owner(uri);
  }

  /** Where the policy judged `uri` to be served (none: it could not place it), else where the session serves it. */
  private async judgedOwner(uri: string, ctx: Pick<RequestContext, 'auth' | 'span' | 'servedBy'>): Promise<string | undefined> {
    return ctx.servedBy ? ctx.servedBy.get(uri) : this.upstreamOf(uri, ctx);
  }

  private named(upstream: string | undefined): SessionUpstream | undefined {
    return upstream === undefined ? undefined : this.upstreams.find((x) => x.health.name === upstream);
  }

  /**
   * Lists resources and templates again for a URI the session cannot place: one reading at a
   * time (concurrent reads wait for it), at most once per REFRESH_MS; otherwise what the last
   * lists said answers.
   */
  private async refreshOwners(ctx: Pick<RequestContext, 'auth' | 'span'>): Promise<void> {
    if (this.refreshing === undefined && this.now() - this.refreshedAt >= REFRESH_MS) {
      this.refreshedAt = this.now();
      const lists = [this.shared('resources/list', 'resources', false, ctx), this.shared('resources/templates/list', 'resourceTemplates', false, ctx)];
      this.refreshing = Promise.allSettled(lists).finally(() => (this.refreshing = undefined));
    }
    await this.refreshing;
  }

  /** A call to one upstream: failed at once while it is down. */
  private async callServed(u: SessionUpstream, method: string, params: Params, name: string | undefined, ctx: RequestContext): Promise<JsonRpcAnswer> {
    ctx.routed?.(u.health.name);
    if (u.health.down) return (u.health.measured(0, 'unavailable'), rpcError(-32603, `Upstream ${u.health.name} is unavailable`));
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

  /**
   * One request to one upstream, its health told of the outcome, timed and counted per upstream,
   * in a span of its own that names the upstream (the upstream exchange's span is its child).
   */
  private async call(u: SessionUpstream, method: string, params: Params, name: string | undefined, ctx: RequestContext): Promise<MeasuredAnswer> {
    const span = ctx.span?.child(method, 'internal', { 'mag.upstream.name': u.health.name, 'mcp.method.name': method });
    const started = performance.now();
    try {
      const answer = await u.link.request(method, params, name, ctx.auth, span, ctx.signal, ctx.related);
      u.health.served();
      const failure = answer.answer.error ? 'rpc_error' : undefined;
      u.health.measured((performance.now() - started) / 1000, failure);
      if (failure) span?.fail(failure);
      return answer;
    } catch (err) {
      u.health.failedWith(method, err);
      const failure = failureOf(err);
      u.health.measured((performance.now() - started) / 1000, failure);
      span?.fail(failure ?? 'cancelled');
      throw err;
    } finally {
      span?.end();
    }
  }
}

/** Why a request to an upstream failed, as the errors metric counts it; undefined: not the upstream's failure (the client cancelled). */
function failureOf(err: unknown): string | undefined {
  if (err instanceof AggregateUpstreamError) return err.reason === 'cancelled' ? undefined : err.reason;
  if (err instanceof CallerAnswerError) return 'account';
  return isCallersOwn(err) ? 'credential' : 'error';
}

/** The URIs a resources/list's entries name. */
function urisOf(entries: readonly unknown[]): string[] {
  const uris: string[] = [];
  for (const item of entries) if (isRecord(item) && typeof item.uri === 'string') uris.push(item.uri);
  return uris;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
