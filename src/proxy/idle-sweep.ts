// Cuts response bodies that stall. One interval per route, running only while
// there is a body to watch, instead of a timer created and cleared for every
// response: activity is a timestamp written per chunk. Watched items keep
// their own position in the list, so adding and removing one is a couple of
// array writes (no hashing), which matters at one of each per request.

export interface IdleWatched {
  /** Epoch ms of the last sign of life. */
  lastActivity: number;
  /** Position in the sweep's list while watched, -1 otherwise; the sweep's own. */
  idleSlot: number;
}

export class IdleSweep<T extends IdleWatched> {
  private readonly watched: T[] = [];
  private interval: NodeJS.Timeout | undefined;
  /** How often to look: a quarter of the limit, so a stall is cut within 1.25× the limit (at most 1 s late). */
  private readonly everyMs: number;

  constructor(
    private readonly idleMs: number,
    private readonly onIdle: (item: T) => void,
  ) {
    this.everyMs = Math.min(1_000, Math.max(10, Math.floor(idleMs / 4)));
  }

  watch(item: T): void {
    if (item.idleSlot !== -1) return;
    item.lastActivity = Date.now();
    item.idleSlot = this.watched.push(item) - 1;
    this.interval ??= setInterval(() => this.sweep(), this.everyMs).unref();
  }

  unwatch(item: T): void {
    const slot = item.idleSlot;
    if (slot === -1 || this.watched[slot] !== item) return;
    // The last item takes the freed place.
    const last = this.watched.pop()!;
    if (last !== item) {
      this.watched[slot] = last;
      last.idleSlot = slot;
    }
    item.idleSlot = -1;
    if (this.watched.length === 0) {
      clearInterval(this.interval);
      this.interval = undefined;
    }
  }

  private sweep(): void {
    const stalledSince = Date.now() - this.idleMs;
    // Backwards: unwatching moves only items already looked at.
    for (let i = this.watched.length - 1; i >= 0; i -= 1) {
      const item = this.watched[i];
      if (item === undefined || item.lastActivity > stalledSince) continue;
      this.unwatch(item);
      this.onIdle(item);
    }
  }
}
