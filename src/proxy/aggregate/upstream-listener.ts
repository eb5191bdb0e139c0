// An upstream session's GET stream, where a server sends what no request
// asked (list_changed, logging, its own requests), kept open for as long as
// the client session lasts (DESIGN §8.2). A stream that ends is opened again
// after a wait that doubles from REOPEN_FIRST_MS up to REOPEN_MAX_MS; after
// MAX_REOPENS in a row without one that lasted STABLE_MS, no more: an
// upstream that ends its stream in a loop costs one request per wait, never a
// spin. An upstream that forgot the session (404: it restarted; or 400 where
// the same stream opened before, as servers that answer an unknown session id
// 400 do) is joined afresh, after the same wait, and the new session's stream
// is opened then. 405 (no such stream) and other refusals end it: that is all
// the server has. After MAX_REOPENS the stream is parked: what it would do
// next (reopen or rejoin) waits for probe(), which the route's one prober of
// that upstream calls at its slow rate (upstream-prober.ts), so a long outage
// heals too without every session asking.

import { isCallersOwn } from './caller-answer.js';

/** The first wait before a stream is opened again, doubled at each reopening in a row, up to REOPEN_MAX_MS. */
export const REOPEN_FIRST_MS = 500;
export const REOPEN_MAX_MS = 30_000;
/** Reopenings (or rejoins) in a row before the listener gives up. */
export const MAX_REOPENS = 12;
/** A stream that lasted this long was a working one: the count of reopenings in a row starts again. */
export const STABLE_MS = 30_000;

/** The waits above, shortened only by tests (StartOptions.aggregateRecovery), never by configuration. */
export interface ListenerTimings {
  reopenFirstMs: number;
  reopenMaxMs: number;
  maxReopens: number;
  stableMs: number;
}

export const LISTENER_TIMINGS: ListenerTimings = { reopenFirstMs: REOPEN_FIRST_MS, reopenMaxMs: REOPEN_MAX_MS, maxReopens: MAX_REOPENS, stableMs: STABLE_MS };

/**
 * What one probe of a parked stream learnt: `answered` (the upstream answered: a stream is open
 * again, a session opened afresh, or the stream refused for good), `silent` (no answer, 5xx, or
 * busy: still parked), `gone` (nothing parked here any more: closed, or a new session listens),
 * `unasked` (still parked, and nothing was sent: this link's own credential could not be made, so
 * it says nothing of the upstream).
 */
export type ProbeOutcome = 'answered' | 'silent' | 'gone' | 'unasked';

/** One GET stream: `started` resolves with its status (undefined: it ended without a head). */
export interface ListenerStream {
  started: Promise<number | undefined>;
  ended: Promise<void>;
  stop(): void;
}

export interface ListenerHooks {
  /** Opens the GET stream of the upstream session as it is now. */
  connect(): Promise<ListenerStream>;
  /** The upstream forgot the session (404): opens it afresh (whose opening calls `listen` again), or rejects. */
  rejoin(): Promise<void>;
  /** MAX_REOPENS reached: the stream is parked until probe() (or a session opened afresh). */
  gaveUp?(): void;
}

/** Statuses after which the stream is tried again: the server is busy, limited or away, not refusing it. */
const TRY_AGAIN = new Set([408, 409, 425, 429]);
/** Statuses of a probe that say the upstream is not serving yet: busy, limited, or a proxy in front of a server that is away. */
const NOT_YET = new Set([408, 425, 429]);

export class UpstreamListener {
  private stream?: ListenerStream;
  private timer?: NodeJS.Timeout;
  /** Reopenings in a row since the last stream that lasted STABLE_MS. */
  private reopened = 0;
  /** Bumped by every listen and close: what an older attempt learns later is ignored. */
  private generation = 0;
  /** This session's stream was opened once (a 400 now says the session is forgotten, not that there is no stream). */
  private served = false;
  private closed = false;
  /** MAX_REOPENS spent: what the next probe does. */
  private parked?: 'reopen' | 'rejoin';

  constructor(
    private readonly hooks: ListenerHooks,
    private readonly now: () => number = Date.now,
    private readonly timings: ListenerTimings = LISTENER_TIMINGS,
  ) {}

  /** Whether the stream waits for a probe. */
  get waiting(): boolean {
    return this.parked !== undefined && !this.closed;
  }

  /** Opens the stream of a session just opened; resolves once the upstream answered its head, or after `waitMs`. */
  async listen(waitMs: number): Promise<void> {
    if (this.closed) return;
    this.halt();
    this.served = false;
    this.parked = undefined;
    const generation = ++this.generation;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.attempt(generation), new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
  }

  /** Ends the stream and every reopening to come; never throws. */
  close(): void {
    this.closed = true;
    this.parked = undefined;
    this.generation++;
    this.halt();
  }

  private halt(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.stream?.stop();
    this.stream = undefined;
  }

  /** One opening: resolves once the upstream answered its head (or the stream ended); what follows is handled as it comes. */
  private async attempt(generation: number): Promise<void> {
    const since = this.now();
    let stream: ListenerStream;
    try {
      stream = await this.hooks.connect();
    } catch {
      return this.later(generation, 'reopen');
    }
    if (generation !== this.generation) return stream.stop();
    this.stream = stream;
    const status = await stream.started;
    if (generation === this.generation && status !== undefined && status >= 200 && status < 300) this.served = true;
    void stream.ended.then(() => this.ended(generation, status, since));
  }

  private ended(generation: number, status: number | undefined, since: number): void {
    if (generation !== this.generation) return; // stopped from here, or replaced by a newer session's stream
    this.stream = undefined;
    if (status === 404 || (status === 400 && this.served)) return this.later(generation, 'rejoin');
    if (status !== undefined && status >= 400 && status < 500 && !TRY_AGAIN.has(status)) return;
    if (this.now() - since >= this.timings.stableMs) this.reopened = 0;
    this.later(generation, 'reopen');
  }

  /** The next reopening (or rejoin) after its wait, unless MAX_REOPENS in a row were made. */
  private later(generation: number, what: 'reopen' | 'rejoin'): void {
    if (generation !== this.generation || this.closed) return;
    if (this.reopened >= this.timings.maxReopens) {
      this.parked = what;
      return this.hooks.gaveUp?.();
    }
    const wait = Math.min(this.timings.reopenMaxMs, this.timings.reopenFirstMs * 2 ** this.reopened++);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (generation !== this.generation) return;
      if (what === 'reopen') void this.attempt(generation);
      else this.hooks.rejoin().catch(() => this.later(generation, 'rejoin'));
    }, wait);
    this.timer.unref();
  }

  /**
   * One probe of a parked stream: what it would have done next, once, now. A stream that opens is
   * kept (its ending is counted as any: ended again soon, it is parked again); a forgotten session
   * is joined afresh as part of the probe; waits at most `waitMs` for the upstream's head.
   */
  async probe(waitMs: number): Promise<ProbeOutcome> {
    const what = this.parked;
    if (what === undefined || this.closed) return 'gone';
    this.parked = undefined;
    const generation = this.generation;
    if (what === 'rejoin') return this.probeRejoin(generation);
    const since = this.now();
    // connect() sends nothing when it throws (the link closed, or its credential could not be made).
    const stream = await this.hooks.connect().catch(() => undefined);
    if (generation !== this.generation || this.closed) return (stream?.stop(), 'gone');
    if (stream === undefined) return this.stillParked(generation, what, 'unasked');
    let timer: NodeJS.Timeout | undefined;
    const status = await Promise.race([stream.started, new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), waitMs)))]);
    clearTimeout(timer);
    if (generation !== this.generation || this.closed) return (stream.stop(), 'gone');
    if (status === 'late' || status === undefined || status >= 500 || NOT_YET.has(status)) return (stream.stop(), this.stillParked(generation, what));
    if (status >= 200 && status < 300) {
      this.stream = stream;
      this.served = true;
      void stream.ended.then(() => this.ended(generation, status, since));
      return 'answered';
    }
    stream.stop();
    // It answered: a session it forgot is joined afresh now; any other refusal ends the stream, as ended() does.
    if (status === 404 || (status === 400 && this.served)) return this.probeRejoin(generation);
    return 'answered';
  }

  private async probeRejoin(generation: number): Promise<ProbeOutcome> {
    try {
      await this.hooks.rejoin();
      return 'answered';
    } catch (err) {
      // A session opened (its initialize answered) listens itself: the upstream answered.
      return generation === this.generation ? this.stillParked(generation, 'rejoin', isCallersOwn(err) ? 'unasked' : 'silent') : 'answered';
    }
  }

  private stillParked(generation: number, what: 'reopen' | 'rejoin', outcome: 'silent' | 'unasked' = 'silent'): ProbeOutcome {
    if (generation !== this.generation || this.closed) return 'gone';
    this.parked = what;
    return outcome;
  }
}
