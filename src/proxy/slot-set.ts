// A set of the objects one request holds while it runs (open responses), kept
// in an array: each item remembers its own position, so adding and removing
// one is a couple of array writes. Not a Set or a Map: one that takes and
// drops an entry per request rehashes into a new table every few requests,
// and each obsolete table points at its successor, so once one is promoted
// to old space, every later table, and every response they held, survives
// the scavenges until a full collection (issue 23: about 4 KB a request).
export class SlotSet<T extends object> implements Iterable<T> {
  /** Slots 0 to size-1 hold the items; a freed slot is cleared, the array keeps its length. */
  private readonly items: (T | undefined)[] = [];
  private count = 0;
  /** Per set, so one object can be in several. */
  private readonly slot = Symbol('slot');

  get size(): number {
    return this.count;
  }

  add(item: T): void {
    if (this.has(item)) return;
    this.position(item, this.count);
    this.items[this.count++] = item;
  }

  has(item: T): boolean {
    const slot = this.slotOf(item);
    return slot !== -1 && this.items[slot] === item;
  }

  delete(item: T): boolean {
    if (!this.has(item)) return false;
    const slot = this.slotOf(item);
    // The last item takes the freed place.
    const last = this.items[--this.count]!;
    this.items[this.count] = undefined;
    if (last !== item) {
      this.items[slot] = last;
      this.position(last, slot);
    }
    this.position(item, -1);
    return true;
  }

  /** A copy: callers may delete while they walk it. */
  [Symbol.iterator](): Iterator<T> {
    return (this.items.slice(0, this.count) as T[])[Symbol.iterator]();
  }

  private slotOf(item: T): number {
    return ((item as Record<symbol, number | undefined>)[this.slot]) ?? -1;
  }

  private position(item: T, slot: number): void {
    (item as Record<symbol, number>)[this.slot] = slot;
  }
}
