// A write without a positive TTL would make the store unbounded (and Redis
// rejects PX 0): refuse it as a programming error, not a store outage.
export function assertTtl(ttlMs: number): number {
  if (!Number.isFinite(ttlMs) || ttlMs <= 0) throw new RangeError(`store TTL must be a positive number of ms, got ${ttlMs}`);
  return Math.ceil(ttlMs);
}
