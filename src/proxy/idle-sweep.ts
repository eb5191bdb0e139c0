// Cuts response bodies that stall. One interval per route, running only while
// there is a body to watch, instead of a timer created and cleared for every
// response: activity is a timestamp written per chunk.

export interface IdleWatched {
  /** Epoch ms of the last sign of life. */
  lastActivity: number;
}

export class IdleSweep<T extends IdleWatched> {
  private readonly watched = new Set<T>();
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
    item.lastActivity = Date.now();
    this.watched.add(item);
    this.interval ??= setInterval(() => this.sweep(), this.everyMs).unref();
  }

  unwatch(item: T): void {
    if (!this.watched.delete(item) || this.watched.size > 0) return;
    clearInterval(this.interval);
    this.interval = undefined;
  }

  private sweep(): void {
    const stalledSince = Date.now() - this.idleMs;
    for (const item of this.watched) {
      if (item.lastActivity > stalledSince) continue;
      this.unwatch(item);
      this.onIdle(item);
    }
  }
}
