// The rate-limit algorithm of `Store.admit`, pure: a sliding window kept as
// SLOTS equal sub-windows ("slots") of counts. A request of `cost` is admitted
// when the counts of every slot that overlaps the last `windowMs`, plus
// `cost`, stay within `limit`. Since those slots cover the whole window, no
// closed interval of length `windowMs` ever holds more than `limit` admitted
// uses (exact upper bound). They may cover up to one slot more than the
// window, so a use is refused only when `limit` were admitted within the last
// (1 + 1/SLOTS) × `windowMs`: the error bound, always on the strict side.
// redis-store.ts runs the same arithmetic in Lua; the memory store runs this.

/** Sub-windows per window: the counted span is at most window × (1 + 1/SLOTS). */
export const SLIDING_WINDOW_SLOTS = 10;

export interface AdmitRequest {
  /** Uses this request counts for (a batch: its matching messages). */
  cost: number;
  /** The most uses any window of `windowMs` may hold. */
  limit: number;
  windowMs: number;
}

export interface Admission {
  admitted: boolean;
  /** Refused: in how many ms this `cost` would be admitted if nothing else came (never, when `cost` > `limit`: the window plus a slot). */
  retryAfterMs: number;
}

/** Slot index → uses counted in it. */
export type SlotCounts = Map<number, number>;

/** The slot `nowMs` falls in; integer arithmetic, as the Lua script does. */
export const slotOf = (nowMs: number, windowMs: number): number => Math.floor((nowMs * SLIDING_WINDOW_SLOTS) / windowMs);

/** How long a counter must live: the window and one slot. */
export const slidingWindowTtlMs = (windowMs: number): number => windowMs + Math.ceil(windowMs / SLIDING_WINDOW_SLOTS);

/**
 * Decides `request` at `nowMs` over `counts` and updates them in place:
 * slots that no longer overlap the window are dropped, and an admitted
 * request is added to the current slot.
 */
export function admitSlidingWindow(counts: SlotCounts, nowMs: number, request: AdmitRequest): Admission {
  const { cost, limit, windowMs } = request;
  const current = slotOf(nowMs, windowMs);
  const oldest = current - SLIDING_WINDOW_SLOTS;
  let used = 0;
  for (const [slot, count] of counts) {
    if (slot < oldest) counts.delete(slot);
    else used += count;
  }
  if (used + cost <= limit) {
    counts.set(current, (counts.get(current) ?? 0) + cost);
    return { admitted: true, retryAfterMs: 0 };
  }
  return { admitted: false, retryAfterMs: retryAfterMs(counts, nowMs, request, used) };
}

/** When enough of the oldest slots have left the window for `cost` to fit. */
function retryAfterMs(counts: SlotCounts, nowMs: number, { cost, limit, windowMs }: AdmitRequest, used: number): number {
  const never = slidingWindowTtlMs(windowMs);
  if (cost > limit) return never;
  let left = used;
  for (const slot of [...counts.keys()].sort((a, b) => a - b)) {
    left -= counts.get(slot)!;
    // Slot `slot` stops overlapping the window once the current slot is slot + SLOTS + 1.
    if (left + cost <= limit) return Math.max(1, Math.ceil(((slot + SLIDING_WINDOW_SLOTS + 1) * windowMs) / SLIDING_WINDOW_SLOTS) - nowMs);
  }
  return never;
}

/** A request no backend can decide is a programming error, not a store outage (as assertTtl). */
export function assertAdmitRequest({ cost, limit, windowMs }: AdmitRequest): void {
  const whole = (n: number, min: number) => Number.isSafeInteger(n) && n >= min;
  if (!whole(cost, 1) || !whole(limit, 1) || !whole(windowMs, SLIDING_WINDOW_SLOTS)) {
    throw new RangeError(`admit needs whole cost ≥ 1, limit ≥ 1 and windowMs ≥ ${SLIDING_WINDOW_SLOTS}; got ${cost}, ${limit}, ${windowMs}`);
  }
}
