// The tokens a load run puts in its requests, one per request:
//   rotate  a fixed set of users' tokens, again and again (shape b: many users per connection);
//   once    a pool walked from where the last run stopped, each token sent once (shape c: a
//           new token every request). A pool that runs out starts again; every request after
//           that counts as `reused`, and the report says so.
// Both loaders use a feed: autocannon asks for one token per request (take), wrk gets the
// tokens up front as files (upcoming) and says afterwards how many each thread sent (consumed).

export type FeedKind = 'rotate' | 'once';

export class TokenFeed {
  private cursor = 0;
  private readonly order: number[];
  /** What the last `upcoming` handed out, for `consumed`. */
  private pending: { exhausted: boolean; lengths: number[]; threads: number } | undefined;
  /** Requests so far that carried a token this feed had handed out before ('once' only). */
  reused = 0;

  constructor(
    readonly kind: FeedKind,
    readonly tokens: readonly string[],
  ) {
    if (tokens.length === 0) throw new TypeError('a token feed needs tokens');
    this.order = tokens.map((_, i) => i);
  }

  /** The next request's token. */
  take(): string {
    if (this.kind === 'rotate') {
      // A new shuffled order each cycle, as wrk-load.lua does: a fixed order could line up with the connections.
      if (this.cursor % this.tokens.length === 0) shuffle(this.order);
      return this.tokens[this.order[this.cursor++ % this.tokens.length]!]!;
    }
    if (this.cursor >= this.tokens.length) this.reused += 1;
    return this.tokens[this.cursor++ % this.tokens.length]!;
  }

  /**
   * The tokens a run may use, one list per loader thread (thread i takes every `threads`-th
   * token from i); for 'once', those not sent yet. `consumed` accounts for them afterwards.
   */
  upcoming(threads: number): string[][] {
    const everyThread = () => Array.from({ length: threads }, () => [...this.tokens]);
    if (this.kind === 'rotate') return everyThread();
    // Too few left for every thread: the pool starts again, and everything sent from now on is reuse.
    const exhausted = this.tokens.length - this.cursor < threads;
    const remaining = exhausted ? this.tokens : this.tokens.slice(this.cursor);
    const lists = remaining.length >= threads ? stripes(remaining, threads) : everyThread();
    this.pending = { exhausted, lengths: lists.map((list) => list.length), threads };
    return lists;
  }

  /** After a run on the `upcoming` lists: how many requests each thread sent. Returns how many reused a token. */
  consumed(sentPerThread: readonly number[]): number {
    const pending = this.pending;
    this.pending = undefined;
    if (this.kind === 'rotate' || !pending) return 0;
    let reused = 0;
    let furthest = -1;
    sentPerThread.forEach((sent, i) => {
      const length = pending.lengths[i] ?? 0;
      reused += pending.exhausted ? sent : Math.max(0, sent - length);
      if (sent > 0) furthest = Math.max(furthest, i + (Math.min(sent, length) - 1) * pending.threads);
    });
    if (pending.exhausted || reused > 0) this.cursor = this.tokens.length;
    else this.cursor += furthest + 1;
    this.reused += reused;
    return reused;
  }
}

function stripes(tokens: readonly string[], count: number): string[][] {
  const lists = Array.from({ length: count }, (): string[] => []);
  tokens.forEach((token, n) => lists[n % count]!.push(token));
  return lists;
}

function shuffle(list: number[]): void {
  for (let i = list.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [list[i], list[j]] = [list[j]!, list[i]!];
  }
}
