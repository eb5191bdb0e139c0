// A route's rate limits at run time: each limit a request matches asks the
// store (`Store.admit`, one atomic step per limit, shared by every replica)
// whether its uses fit. All that match apply, decided side by side; a use
// admitted by one limit stays counted there when another refuses the
// request (never more than a limit allows, sometimes less). A store that
// fails, or has not answered within `store.command_timeout`, lets the
// request through for that limit — an outage never blocks traffic — and is counted.
import type { AuthContext } from '../auth/principal.js';
import type { RouteConfig } from '../config/types.js';
import { routeRateLimitKey } from '../store/key-names.js';
import { StoreUnavailableError, type Admission, type Store } from '../store/store.js';
import type { Operation } from './json-rpc.js';
import { compileRateLimits, costOf, counted, type CompiledRateLimit } from './rate-limits.js';

/** A counter bound to one label set. */
interface Count {
  inc(): void;
}

export interface RateLimiterDeps {
  store: Store;
  /** How long a decision waits for the store before its limits fail open (Redis: `store.command_timeout`); undefined: no bound (memory store). */
  waitMs?: number;
  /** Counters of one route's limit, by its label (`rate_limits[i]`). */
  counters(label: string): { limited: Count; failOpen: Count };
}

export interface RateLimitRefusal {
  /** The first limit that refused. */
  limit: CompiledRateLimit;
  /** When every refusing limit would have room (ms). */
  retryAfterMs: number;
}

export interface RateLimiter {
  readonly limits: readonly CompiledRateLimit[];
  /** Counts the request against every limit it matches; the refusal, if one refused. */
  admit(auth: AuthContext, operations: readonly (Operation | undefined)[]): Promise<RateLimitRefusal | undefined>;
}

export function createRateLimiter(route: Pick<RouteConfig, 'path' | 'file' | 'rateLimits'>, deps: RateLimiterDeps): RateLimiter {
  const limits = compileRateLimits(route);
  const bound = limits.map((limit) => ({ limit, ...deps.counters(limit.label) }));
  type Bound = (typeof bound)[number];

  /** The store's answer, or undefined when it failed or was late (counted as failing open). */
  async function decide({ limit, failOpen }: Bound, auth: AuthContext, cost: number, late: Promise<'late'> | undefined): Promise<Admission | undefined> {
    const key = routeRateLimitKey(route.path, limit.definition, counted(limit.per, auth));
    const answer = deps.store.admit(key, { cost, limit: limit.requests, windowMs: limit.windowMs });
    answer.catch(() => undefined); // a late failure has no one left to answer
    try {
      const result = late ? await Promise.race([answer, late]) : await answer;
      if (result !== 'late') return result;
    } catch (err) {
      if (!(err instanceof StoreUnavailableError)) throw err;
    }
    failOpen.inc();
    return undefined;
  }

  async function admit(auth: AuthContext, operations: readonly (Operation | undefined)[]): Promise<RateLimitRefusal | undefined> {
    const applicable = bound.map((entry) => ({ entry, cost: costOf(entry.limit, operations) })).filter(({ cost }) => cost > 0);
    if (applicable.length === 0) return undefined;
    let timer: NodeJS.Timeout | undefined;
    const late = deps.waitMs === undefined ? undefined : new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), deps.waitMs)));
    try {
      const answers = await Promise.all(applicable.map(({ entry, cost }) => decide(entry, auth, cost, late)));
      let refusal: RateLimitRefusal | undefined;
      answers.forEach((answer, i) => {
        if (!answer || answer.admitted) return;
        const { entry } = applicable[i]!;
        entry.limited.inc();
        refusal = { limit: refusal?.limit ?? entry.limit, retryAfterMs: Math.max(refusal?.retryAfterMs ?? 0, answer.retryAfterMs) };
      });
      return refusal;
    } finally {
      clearTimeout(timer);
    }
  }

  return { limits, admit };
}
