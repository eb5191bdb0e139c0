// What the client of an aggregated session asked the upstreams to tell it
// (DESIGN §8.2): the resources it subscribed to, each through the upstream
// that serves it, and its logging level. An upstream's
// notifications/resources/updated reaches the client only for a URI it
// subscribed to through that upstream, so no upstream can make the client
// re-read what another serves, nor what it never asked about; an upstream
// session opened afresh (the upstream restarted) is told both again.

/** Resource URIs one client session may hold subscribed at once. */
export const MAX_SUBSCRIPTIONS = 256;

type Params = Record<string, unknown>;

export class SessionInterests {
  /** URI → the upstream that accepted its subscription. */
  private readonly subscribed = new Map<string, string>();
  private level?: string;

  /** Whether a subscribe of `uri` may go on: one held already, or room for one more (anything else is judged by the upstream). */
  admits(uri: unknown): boolean {
    return typeof uri !== 'string' || this.subscribed.has(uri) || this.subscribed.size < MAX_SUBSCRIPTIONS;
  }

  /** `upstream` accepted the client's `resources/subscribe` or `resources/unsubscribe` of `uri`. */
  accepted(method: string, uri: string, upstream: string): void {
    if (method === 'resources/subscribe' && this.admits(uri)) this.subscribed.set(uri, upstream);
    else if (method === 'resources/unsubscribe' && this.subscribed.get(uri) === upstream) this.subscribed.delete(uri);
  }

  /**
   * The client no longer wants `uri`'s updates and asked its upstream to stop (a session-less
   * session's last listen watching it ended): forgotten whatever the upstream answered, so one
   * that refuses to unsubscribe cannot keep the session's subscriptions taken.
   */
  released(uri: string): void {
    this.subscribed.delete(uri);
  }

  /** The client's logging/setLevel (each upstream was sent it). */
  setLevel(params: Params | undefined): void {
    if (typeof params?.level === 'string') this.level = params.level;
  }

  /** Whether `upstream`'s notifications/resources/updated of `uri` is one the client asked for. */
  wants(upstream: string, uri: unknown): boolean {
    return typeof uri === 'string' && this.subscribed.get(uri) === upstream;
  }

  /** What a new session with `upstream` is told again, in order: the logging level, then each subscription it had. */
  replay(upstream: string): { method: string; params: Params }[] {
    const told: { method: string; params: Params }[] = this.level === undefined ? [] : [{ method: 'logging/setLevel', params: { level: this.level } }];
    for (const [uri, owner] of this.subscribed) if (owner === upstream) told.push({ method: 'resources/subscribe', params: { uri } });
    return told;
  }
}
