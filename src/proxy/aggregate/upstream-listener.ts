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
// the server has.

/** The first wait before a stream is opened again, doubled at each reopening in a row, up to REOPEN_MAX_MS. */
export const REOPEN_FIRST_MS = 500;
export const REOPEN_MAX_MS = 30_000;
/** Reopenings (or rejoins) in a row before the listener gives up. */
export const MAX_REOPENS = 12;
/** A stream that lasted this long was a working one: the count of reopenings in a row starts again. */
export const STABLE_MS = 30_000;

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
  /** MAX_REOPENS reached: the stream stays closed until the session is opened afresh. */
  gaveUp?(): void;
}

/** Statuses after which the stream is tried again: the server is busy, limited or away, not refusing it. */
const TRY_AGAIN = new Set([408, 409, 425, 429]);

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

  constructor(
    private readonly hooks: ListenerHooks,
    private readonly now: () => number = Date.now,
  ) {}

  /** Opens the stream of a session just opened; resolves once the upstream answered its head, or after `waitMs`. */
  async listen(waitMs: number): Promise<void> {
    if (this.closed) return;
    this.halt();
    this.served = false;
    const generation = ++this.generation;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.attempt(generation), new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs)))]);
    clearTimeout(timer);
  }

  /** Ends the stream and every reopening to come; never throws. */
  close(): void {
    this.closed = true;
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
    if (this.now() - since >= STABLE_MS) this.reopened = 0;
    this.later(generation, 'reopen');
  }

  /** The next reopening (or rejoin) after its wait, unless MAX_REOPENS in a row were made. */
  private later(generation: number, what: 'reopen' | 'rejoin'): void {
    if (generation !== this.generation || this.closed) return;
    if (this.reopened >= MAX_REOPENS) return this.hooks.gaveUp?.();
    const wait = Math.min(REOPEN_MAX_MS, REOPEN_FIRST_MS * 2 ** this.reopened++);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (generation !== this.generation) return;
      if (what === 'reopen') void this.attempt(generation);
      else this.hooks.rejoin().catch(() => this.later(generation, 'rejoin'));
    }, wait);
    this.timer.unref();
  }
}
