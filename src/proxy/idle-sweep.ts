// Cuts response bodies that stall. One interval per route instead of a timer
// created and cleared for every response, counting ticks: activity stamps the
// current tick (no clock read per chunk), and an item is cut once it has seen
// none for `idleMs` (ticks are a quarter of it, so it is cut within 1.25×).
// Items keep their own position in the list, so adding and removing one is a
// couple of array writes (no hashing). The interval runs while anything is
// watched and stops at the first sweep that finds nothing: most bodies come
// whole with their headers and are watched for no time at all, and stopping
// and restarting it for each of them would cost what a timer per response did.

export interface IdleWatched {
  /** The sweep's tick at the last sign of life; written by the sweep's watch() and touch(). */
  lastActivity: number;
  /** Position in the sweep's list while watched, -1 otherwise; the sweep's own. */
  idleSlot: number;
}

const TICKS_PER_LIMIT = 4;

export class IdleSweep<T extends IdleWatched> {
  /**
   * Slots 0 to count-1 hold the watched items. The array keeps its length when
   * items leave (their slots are cleared): V8 would shrink a popped array and
   * grow it again a few responses later, a new backing store each time.
   */
  private readonly watched: (T | undefined)[] = [];
  private count = 0;
  private interval: NodeJS.Timeout | undefined;
  private tick = 0;
  private readonly everyMs: number;

  constructor(
    idleMs: number,
    private readonly onIdle: (item: T) => void,
  ) {
    this.everyMs = Math.max(1, Math.floor(idleMs / TICKS_PER_LIMIT));
  }

  watch(item: T): void {
    if (item.idleSlot !== -1) return;
    item.lastActivity = this.tick;
    item.idleSlot = this.count;
    this.watched[this.count++] = item;
    this.interval ??= setInterval(() => this.sweep(), this.everyMs).unref();
  }

  /** A sign of life: the item's idle time starts again. */
  touch(item: T): void {
    item.lastActivity = this.tick;
  }

  unwatch(item: T): void {
    const slot = item.idleSlot;
    if (slot === -1 || this.watched[slot] !== item) return;
    // The last item takes the freed place.
    const last = this.watched[--this.count]!;
    this.watched[this.count] = undefined;
    if (last !== item) {
      this.watched[slot] = last;
      last.idleSlot = slot;
    }
    item.idleSlot = -1;
  }

  private sweep(): void {
    if (this.count === 0) {
      clearInterval(this.interval);
      this.interval = undefined;
      return;
    }
    this.tick += 1;
    // Seen last before the tick TICKS_PER_LIMIT ticks ago: idle for at least idleMs.
    const stalledAt = this.tick - TICKS_PER_LIMIT - 1;
    // Backwards: unwatching moves only items already looked at.
    for (let i = this.count - 1; i >= 0; i -= 1) {
      const item = this.watched[i];
      if (item === undefined || item.lastActivity > stalledAt) continue;
      this.unwatch(item);
      this.onIdle(item);
    }
  }
}
