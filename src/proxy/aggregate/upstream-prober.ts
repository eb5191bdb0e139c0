// The slow probing of one upstream of an aggregated route (DESIGN §8.2, issue
// 22 item 5), one per upstream per route, shared by every client session. A
// session's link whose GET stream gave up its fast reopenings (an outage of
// minutes: upstream-listener.ts) waits here instead of asking on its own: one
// waiting link at a time probes for all, every PROBE_MS (jittered, so that
// replicas and routes do not ask in step), never two probes at once. When one
// answers, the upstream is up again and every waiting link is woken (its
// stream reopened, or its session joined afresh: told again its level and
// subscriptions, the client told its lists changed), WAKE_AT_ONCE at a time;
// a link that finds no answer ends the waking, and the rest wait for the next
// probe. So 1,000 sessions cost a down upstream one request per PROBE_MS, and
// its coming back a bounded number of rejoins at once.
import type { ProbeOutcome } from './upstream-listener.js';

/** The mean wait between two probes of one upstream. */
export const PROBE_MS = 30_000;
/** Each wait is PROBE_MS × (1 ± PROBE_JITTER), drawn afresh. */
export const PROBE_JITTER = 0.25;
/** Waiting links woken at once when the upstream answers again. */
export const WAKE_AT_ONCE = 4;

export interface ProberTimings {
  probeMs: number;
  wakeAtOnce: number;
}

export const PROBER_TIMINGS: ProberTimings = { probeMs: PROBE_MS, wakeAtOnce: WAKE_AT_ONCE };

/** A waiting link: its probe does what its stream would do next, once (bounded by its upstream's timeout). */
export interface Probeable {
  probe(): Promise<ProbeOutcome>;
}

export class UpstreamProber {
  /** Waiting links, oldest first (a silent prober goes last, so one caller's broken credential cannot hold the probes). */
  private readonly waiting = new Set<Probeable>();
  private timer?: NodeJS.Timeout;
  /** A probe, or the waking after it, is under way. */
  private busy = false;
  private closed = false;

  constructor(
    /** The upstream answered a probe (its health: up). */
    private readonly answered: () => void = () => undefined,
    private readonly timings: ProberTimings = PROBER_TIMINGS,
    private readonly random: () => number = Math.random,
  ) {}

  /** A link whose stream is parked: probed for (or by) from now on. */
  enlist(link: Probeable): void {
    if (this.closed) return;
    this.waiting.add(link);
    this.schedule();
  }

  /** A link closed, or listening again: no more probing for it. */
  withdraw(link: Probeable): void {
    this.waiting.delete(link);
    if (this.waiting.size === 0) this.stopTimer();
  }

  get size(): number {
    return this.waiting.size;
  }

  close(): void {
    this.closed = true;
    this.waiting.clear();
    this.stopTimer();
  }

  private stopTimer(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.timer !== undefined || this.busy || this.closed || this.waiting.size === 0) return;
    const wait = this.timings.probeMs * (1 - PROBE_JITTER + 2 * PROBE_JITTER * this.random());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.round();
    }, wait);
    this.timer.unref();
  }

  private async round(): Promise<void> {
    this.busy = true;
    try {
      if (await this.probeOne()) {
        this.answered();
        await this.wake();
      }
    } finally {
      this.busy = false;
      this.schedule();
    }
  }

  /**
   * The oldest waiting link probes; links with nothing parked any more (gone) are passed over, and
   * so are links that could not ask (unasked: their own credential), which go last: a user whose
   * credential fails cannot make every other session wait a round per session of theirs.
   */
  private async probeOne(): Promise<boolean> {
    for (const link of [...this.waiting]) {
      if (this.closed) return false;
      if (!this.waiting.delete(link)) continue;
      const outcome = await link.probe().catch((): ProbeOutcome => 'silent');
      if (outcome === 'answered') return true;
      if (outcome === 'unasked' && !this.closed) this.waiting.add(link);
      if (outcome === 'silent') {
        this.waiting.add(link);
        return false;
      }
    }
    return false;
  }

  /** Every link waiting now, WAKE_AT_ONCE at a time; the first silent one ends the waking (the upstream is away again). */
  private async wake(): Promise<void> {
    const queue = [...this.waiting];
    let silent = false;
    const worker = async () => {
      for (let link = queue.shift(); link !== undefined && !silent && !this.closed; link = queue.shift()) {
        if (!this.waiting.delete(link)) continue; // withdrawn meanwhile
        const outcome = await link.probe().catch((): ProbeOutcome => 'silent');
        // A link that could not ask (its own credential) waits on; it says nothing of the upstream.
        if (outcome === 'unasked' && !this.closed) this.waiting.add(link);
        if (outcome === 'silent') {
          silent = true;
          if (!this.closed) this.waiting.add(link);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, this.timings.wakeAtOnce) }, worker));
  }
}
