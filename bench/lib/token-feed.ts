// The tokens a load run puts in its requests, one per request:
//   rotate  a fixed set of users' tokens, again and again (shape b: many users per connection),
//           in a new shuffled order each cycle;
//   once    a pool walked once (shape c: a new token every request), continued by the next run
//           where the last one stopped. A pool that runs out starts again; every request that
//           repeats a token counts as `reused`, and the report says so.
// autocannon asks for one token per request (take). wrk's threads each own a stripe of the pool
// (thread i of n: tokens i, i + n, …), written to files once (stripe); a run starts each thread
// where it stopped (positions) and says afterwards how far each went (advance).

export type FeedKind = 'rotate' | 'once';

export class TokenFeed {
  /** 'once': per loader thread, how many tokens of its stripe have been taken. */
  private walked: number[] | undefined;
  /** 'rotate': the order of the current cycle, and where in it the next request is. */
  private readonly order: number[];
  private next = 0;
  /** Requests so far that carried a token this feed had handed out before ('once' only). */
  reused = 0;

  constructor(
    readonly kind: FeedKind,
    readonly tokens: readonly string[],
  ) {
    if (tokens.length === 0) throw new TypeError('a token feed needs tokens');
    this.order = tokens.map((_, i) => i);
  }

  /** The next request's token (autocannon: one thread). */
  take(): string {
    if (this.kind === 'rotate') {
      // A new order each cycle, as wrk-load.lua does: a fixed order could line up with the connections.
      if (this.next === 0) shuffle(this.order);
      const token = this.tokens[this.order[this.next]!]!;
      this.next = (this.next + 1) % this.tokens.length;
      return token;
    }
    const position = this.positions(1)[0]!;
    this.advance([1]);
    return this.tokens[position % this.tokens.length]!;
  }

  /** 'once': how far each of `threads` loader threads has gone into its stripe. A feed is walked with one thread count. */
  positions(threads: number): readonly number[] {
    if (this.walked === undefined) {
      if (this.tokens.length < threads) throw new RangeError(`${this.tokens.length} tokens cannot be striped over ${threads} threads`);
      this.walked = new Array<number>(threads).fill(0);
    } else if (this.walked.length !== threads) {
      throw new Error(`this feed is walked by ${this.walked.length} threads, not ${threads}`);
    }
    return this.walked;
  }

  /** 'once': after a run from `positions`, the tokens each thread took. Returns how many repeated a token. */
  advance(takenPerThread: readonly number[]): number {
    const positions = this.positions(takenPerThread.length) as number[];
    let reused = 0;
    takenPerThread.forEach((taken, i) => {
      const length = stripeLength(this.tokens.length, takenPerThread.length, i);
      // Positions past the stripe's end wrap to its start: tokens sent before.
      reused += Math.max(0, positions[i]! + taken - length) - Math.max(0, positions[i]! - length);
      positions[i]! += taken;
    });
    this.reused += reused;
    return reused;
  }
}

/** Thread `index`'s stripe of a pool walked by `threads` threads: tokens index, index + threads, … */
export function stripe(tokens: readonly string[], threads: number, index: number): string[] {
  const lines: string[] = [];
  for (let n = index; n < tokens.length; n += threads) lines.push(tokens[n]!);
  return lines;
}

const stripeLength = (tokens: number, threads: number, index: number) => Math.ceil((tokens - index) / threads);

function shuffle(list: number[]): void {
  for (let i = list.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [list[i], list[j]] = [list[j]!, list[i]!];
  }
}
