// One client's `subscriptions/listen` stream on an aggregated route (2026-07-28,
// without a session): the POST's answer, an event stream held open. It is
// acknowledged once every upstream listens for it (listen-fanout.ts), then
// carries the notifications its filter asked for, from every upstream, each
// stamped with the client's listen id as its subscription id; nothing before
// the acknowledgement. The upstreams' own listens it holds are stopped with it.
// Bounded like the client's GET stream: what the client leaves unread beyond
// MAX_UNREAD_BYTES is dropped; a keep-alive comment every KEEP_ALIVE_MS. It ends
// when the client leaves, when its token expires (protected-route.ts), or with
// its session.
import type { ServerResponse } from 'node:http';
import { acknowledged, LIST_CHANGES, notificationFor, RESOURCE_UPDATED, type ListenFilter } from './subscription-filter.js';

const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';
/** What the client may leave unread before notifications to it are dropped (as on its GET stream). */
const MAX_UNREAD_BYTES = 256 * 1024;
/** A quiet stream gets a comment this often, so proxies between do not cut it as idle. */
export const KEEP_ALIVE_MS = 15_000;
const NONE: ReadonlySet<string> = new Set();

export class ListenStream {
  private readonly held: { stop(): void }[] = [];
  /** Per upstream name: the watched URIs it serves (its updates of them are passed on). */
  private readonly watchedAt = new Map<string, ReadonlySet<string>>();
  private keepAlive?: NodeJS.Timeout;
  private acknowledgedYet = false;
  private over = false;
  private readonly endings: (() => void)[] = [];

  constructor(
    private readonly res: ServerResponse,
    /** The client's listen request id: the subscription id of every frame. */
    private readonly id: string | number,
    readonly filter: ListenFilter,
  ) {
    res.once('close', () => this.end());
  }

  get ended(): boolean {
    return this.over;
  }

  /** The answer's head, at once: the client knows its listen was taken while the upstreams are asked. */
  begin(): void {
    this.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
    this.res.flushHeaders();
  }

  /** The upstreams listen: the acknowledgement, naming what is honoured, then notifications. */
  acknowledge(honouredUris: readonly string[]): void {
    if (this.over) return;
    this.acknowledgedYet = true;
    this.write('notifications/subscriptions/acknowledged', { notifications: acknowledged(this.filter, honouredUris) });
    this.keepAlive = setInterval(() => this.res.write(': keep-alive\n\n'), KEEP_ALIVE_MS).unref();
  }

  /** The watched URIs `upstream` serves (it alone was asked for their updates). */
  watch(upstream: string, uris: readonly string[]): void {
    this.watchedAt.set(upstream, new Set(uris));
  }

  /** An upstream listen of this stream's: stopped when the stream ends (at once, if it has). */
  hold(listen: { stop(): void }): void {
    if (this.over) return listen.stop();
    this.held.push(listen);
  }

  /** Runs `ending` when the stream ends (at once, if it has). */
  onEnd(ending: () => void): void {
    if (this.over) ending();
    else this.endings.push(ending);
  }

  /**
   * `upstream`'s listen was opened again after it ended: what it announced meanwhile is lost, so
   * the client is told that each list it asked for, and each URI it watches there, may have changed.
   */
  missed(upstream: string): void {
    for (const kind of this.filter.changes) this.deliver(upstream, LIST_CHANGES[kind], undefined);
    for (const uri of this.watchedAt.get(upstream) ?? NONE) this.deliver(upstream, RESOURCE_UPDATED, { uri });
  }

  /** An upstream's notification: written when the filter asked for it; false when not (or the client reads too slowly). */
  deliver(upstream: string, method: string, params: Record<string, unknown> | undefined): boolean {
    if (!this.acknowledgedYet || this.over || this.res.writableLength >= MAX_UNREAD_BYTES) return false;
    const notification = notificationFor(this.filter, method, params, this.watchedAt.get(upstream) ?? NONE);
    if (notification === undefined) return false;
    this.write(notification.method, notification.params);
    return true;
  }

  /** Ends the stream and every upstream listen it holds; never throws. */
  end(): void {
    if (this.over) return;
    this.over = true;
    clearInterval(this.keepAlive);
    for (const listen of this.held.splice(0)) listen.stop();
    if (!this.res.writableEnded) this.res.end();
    for (const ending of this.endings.splice(0)) ending();
  }

  private write(method: string, params: Record<string, unknown>): void {
    const message = { jsonrpc: '2.0', method, params: { ...params, _meta: { [SUBSCRIPTION_ID]: this.id } } };
    this.res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);
  }
}
