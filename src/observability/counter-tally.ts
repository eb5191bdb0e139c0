// Counting on the request path without prom-client's per-call label
// hashing and validation: each label set gets a plain number, bound once,
// and the counts are added to the prom-client counter whenever it is read
// (a /metrics scrape, or get()).
import type { Counter } from 'prom-client';

/** One label set of a tallied counter. */
export class TallyCount {
  pending = 0;

  constructor(readonly labels: Readonly<Record<string, string>>) {}

  inc(): void {
    this.pending += 1;
  }
}

export class CounterTally<Label extends string> {
  private readonly counts = new Map<string, TallyCount>();

  /** The count of one label set: look it up once, keep it, and call inc() on it. */
  count(labels: Readonly<Record<Label, string>>): TallyCount {
    const key = JSON.stringify(labels);
    let count = this.counts.get(key);
    if (count === undefined) {
      count = new TallyCount(labels);
      this.counts.set(key, count);
    }
    return count;
  }

  /** Moves the pending counts into the prom-client counter: its `collect` hook. */
  flushInto(counter: Counter<Label>): void {
    for (const count of this.counts.values()) {
      if (count.pending === 0) continue;
      counter.inc(count.labels as Partial<Record<Label, string>>, count.pending);
      count.pending = 0;
    }
  }
}
