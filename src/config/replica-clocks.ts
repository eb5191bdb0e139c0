// `store.max_clock_skew`: how far apart the replicas' clocks (and each one's
// from the shared store's) may be. A DPoP replay marker outlives the proof's
// `iat` window by this much (auth/dpop-proof.ts), and a replica whose offset
// from the store's clock exceeds it says so (store/store-clock.ts). Its own
// module: a new concern, kept out of the crowded schema and resolver.
import { z } from 'zod';
import { parseDuration } from './duration.js';

/** The default: NTP keeps clocks within milliseconds; 30 s is room for a step or a slow sync. */
export const DEFAULT_MAX_CLOCK_SKEW = '30s';
export const DEFAULT_MAX_CLOCK_SKEW_MS = parseDuration(DEFAULT_MAX_CLOCK_SKEW);
/** The store's clock is read across a network: less than a second is no promise a replica can keep. */
export const MIN_CLOCK_SKEW_MS = 1000;
/** Each second of skew is a second more of every marker (and of each user's marker share): past 5 min, a mistake. */
export const MAX_CLOCK_SKEW_MS = 5 * 60_000;

const SKEW_PATTERN = /^[1-9][0-9]*(ms|s|m)$/;

export const MaxClockSkew = z
  .string()
  .regex(SKEW_PATTERN, 'expected a duration such as 30s or 1m')
  .refine((text) => {
    // zod runs this even when the pattern failed: that failure is the one to report.
    if (!SKEW_PATTERN.test(text)) return true;
    const ms = parseDuration(text);
    return ms >= MIN_CLOCK_SKEW_MS && ms <= MAX_CLOCK_SKEW_MS;
  }, `expected from 1s to 5m: DPoP replay markers live the proof's window plus this`)
  .default(DEFAULT_MAX_CLOCK_SKEW)
  .describe(
    "how far apart the replicas' clocks, and each one's from Redis's, may be: DPoP replay markers outlive the proof's iat window by this much; a replica further than this from Redis's clock logs it once and sets mag_store_clock_skew_exceeded (it judges iat by Redis's clock either way). From 1s to 5m",
  );

/** The allowed skew in ms of a `StoreConfig` (not imported: types.ts reads schema.ts, which reads this): configured on Redis; one replica (the memory store) keeps the default. */
export function maxClockSkewMs(store: { kind: 'memory' } | { kind: 'redis'; maxClockSkewMs: number }): number {
  return store.kind === 'redis' ? store.maxClockSkewMs : DEFAULT_MAX_CLOCK_SKEW_MS;
}
