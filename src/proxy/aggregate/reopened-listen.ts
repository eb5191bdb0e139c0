// A `subscriptions/listen` of the gateway's own at an upstream of 2026-07-28
// (upstream-listen.ts), held for as long as what it serves lasts (a client's
// listen, a client session's GET stream; DESIGN §8.2). One that ends (the
// upstream, or a proxy in front of it, recycling long-lived connections; the
// upstream going down) is opened again after the waits of a session's GET
// stream (upstream-listener.ts): 0.5 s, doubling up to 30 s; after 12
// reopenings in a row without a listen that lasted 30 s it is given up, so an
// upstream that ends its listens in a loop costs a request per wait, never a
// spin. A refusal (a 4xx other than 408, 409, 425, 429: the method unknown, the
// credential refused) is not asked again. What the upstream announced while no
// listen was open is lost: once a reopened listen is acknowledged, `reopened`
// is called (the client is told to look again).
import type { UpstreamListen } from './upstream-listen.js';
import type { ListenerTimings } from './upstream-listener.js';

/** Statuses after which the listen is asked again: the server is busy, limited or away, not refusing it. */
const TRY_AGAIN = new Set([408, 409, 425, 429]);

/** `open()` once (its failure is the caller's), then held: reopened as above until stopped or given up. */
export async function reopenedListen(open: () => Promise<UpstreamListen>, timings: ListenerTimings, reopened: () => void, now: () => number = Date.now): Promise<UpstreamListen> {
  const first = await open();
  const held = new HeldListen(first, open, timings, reopened, now);
  return { ready: first.ready, status: first.status, ended: held.ended, stop: () => held.stop() };
}

class HeldListen {
  readonly ended: Promise<void>;
  private finish!: () => void;
  private current: UpstreamListen;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  /** Reopenings in a row since the last listen that lasted `stableMs`. */
  private reopenings = 0;

  constructor(
    first: UpstreamListen,
    private readonly open: () => Promise<UpstreamListen>,
    private readonly timings: ListenerTimings,
    private readonly reopened: () => void,
    private readonly now: () => number,
  ) {
    this.ended = new Promise<void>((resolve) => (this.finish = resolve));
    this.current = first;
    this.follow(first, now());
  }

  /** Ends the listen and every reopening to come; never throws. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    clearTimeout(this.timer);
    this.current.stop();
    this.finish();
  }

  private follow(listen: UpstreamListen, since: number): void {
    void listen.ended.then(async () => {
      if (this.stopped || listen !== this.current) return;
      const status = await listen.status;
      if (status !== undefined && status >= 400 && status < 500 && !TRY_AGAIN.has(status)) return this.stop();
      if (this.now() - since >= this.timings.stableMs) this.reopenings = 0;
      this.later();
    });
  }

  private later(): void {
    if (this.stopped) return;
    if (this.reopenings >= this.timings.maxReopens) return this.stop();
    const wait = Math.min(this.timings.reopenMaxMs, this.timings.reopenFirstMs * 2 ** this.reopenings++);
    this.timer = setTimeout(() => void this.reopen(), wait);
    this.timer.unref();
  }

  private async reopen(): Promise<void> {
    const since = this.now();
    const next = await this.open().catch(() => undefined);
    if (this.stopped) return next?.stop();
    if (next === undefined) return this.later();
    this.current = next;
    this.follow(next, since);
    if ((await next.ready) && !this.stopped && this.current === next) this.reopened();
  }
}
