// The resource URIs a principal's listens (2026-07-28, without a session)
// watch at upstreams of a session-based revision (DESIGN §8.2). Such an
// upstream has no listen: it tells of a resource's change on the session that
// subscribed to it. So the principal's session-less session subscribes there
// (`resources/subscribe` on its upstream session, routed as a read of that URI
// would be, within the session's MAX_SUBSCRIPTIONS), once however many of its
// listens watch the URI, and unsubscribes when the last of them ends; the
// upstream's `notifications/resources/updated` then reaches those listens from
// that session's streams (aggregate-forwarder.ts). An upstream session opened
// afresh is told its subscriptions again, as any session's are. A URI's
// subscribe and unsubscribe go one after the other: a listen watching a URI
// whose unsubscribe is under way waits for its answer before subscribing again,
// so an unsubscribe answered late (a slow or hostile upstream) never undoes the
// newer subscription, at the upstream or in SessionInterests. A URI no listen
// watches any more is given back to SessionInterests whatever the upstream
// answers its unsubscribe, so a refusing upstream cannot fill the session's
// subscriptions.
import type { AggregateMethods, RequestContext } from './aggregate-methods.js';
import type { SessionInterests } from './session-interests.js';

/** Subscriptions asked of the upstreams at once for one listen: a listen of 256 URIs is not 256 requests at once. */
const AT_ONCE = 4;

export class ListenWatches {
  /** URI → the listens watching it through the session's subscription. */
  private readonly watching = new Map<string, number>();
  /** URI → its subscribe or unsubscribe under way (the next waits for it). */
  private readonly underway = new Map<string, Promise<unknown>>();

  constructor(
    private readonly methods: AggregateMethods,
    private readonly interests: SessionInterests,
  ) {}

  /** Watches each of `uris` (subscribing those the session does not hold yet): the URIs the upstreams accepted. */
  async watch(uris: readonly string[], ctx: RequestContext): Promise<string[]> {
    const held: string[] = [];
    const queue = [...uris];
    const worker = async () => {
      for (let uri = queue.shift(); uri !== undefined; uri = queue.shift()) if (await this.hold(uri, ctx)) held.push(uri);
    };
    await Promise.all(Array.from({ length: Math.min(AT_ONCE, queue.length) }, worker));
    return held;
  }

  /** A listen that watched `uris` ended: a URI no other listen watches is unsubscribed (never throws). */
  unwatch(uris: readonly string[], ctx: RequestContext): void {
    for (const uri of uris) {
      const left = (this.watching.get(uri) ?? 1) - 1;
      if (left > 0) {
        this.watching.set(uri, left);
        continue;
      }
      this.watching.delete(uri);
      // Whatever the upstream answers, the session no longer wants the URI (a refusal must not keep it counted).
      const unsubscribed = this.methods.answer('resources/unsubscribe', { uri }, { auth: ctx.auth, span: ctx.span }).catch(() => undefined);
      this.settle(uri, unsubscribed.then(() => this.interests.released(uri)));
    }
  }

  private async hold(uri: string, ctx: RequestContext): Promise<boolean> {
    // An exchange of this URI's under way (an unsubscribe, another listen's subscribe): its answer first.
    for (let before = this.underway.get(uri); !this.watching.has(uri) && before !== undefined; before = this.underway.get(uri)) await before;
    if (!this.watching.has(uri)) {
      if (!this.interests.admits(uri)) return false;
      const answer = await this.settle(uri, this.methods.answer('resources/subscribe', { uri }, ctx).catch(() => undefined));
      if (answer?.result === undefined) return false;
    }
    this.watching.set(uri, (this.watching.get(uri) ?? 0) + 1);
    return true;
  }

  /** `exchange` is `uri`'s under way until it settles (it never rejects). */
  private settle<T>(uri: string, exchange: Promise<T>): Promise<T> {
    this.underway.set(uri, exchange);
    void exchange.then(() => {
      if (this.underway.get(uri) === exchange) this.underway.delete(uri);
    });
    return exchange;
  }
}
