// One count against a flood limit, failing open: the store failing, or late,
// lets the request through (a login is never blocked by the limiter), counted
// in mag_rate_limit_fail_open_total; over the limit, the 429 is counted too.
import { GatewayError } from '../../errors/gateway-error.js';
import { StoreUnavailableError } from '../../store/store.js';
import type { AuthorizationServerMetrics } from '../../observability/metrics.js';

/** What a count reports to. */
export type FloodMetrics = Pick<AuthorizationServerMetrics, 'rateLimited' | 'rateLimitFailOpen'>;

/**
 * How long a request waits for its count. A healthy store answers within a
 * millisecond or two; one that takes longer is failing, and the handler
 * after this must still answer 503 within the store timeout, not twice it.
 */
const COUNT_WAIT_MS = 200;

/** Counts one use; false when the store failed or was late, and the request goes on unlimited. */
export async function countFailingOpen(metrics: FloodMetrics, limit: string, use: () => Promise<void>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), COUNT_WAIT_MS);
  });
  const counted = use().then(() => 'counted' as const);
  counted.catch(() => undefined); // a late failure has no one left to answer
  try {
    if ((await Promise.race([counted, late])) === 'counted') return true;
  } catch (err) {
    if (!(err instanceof StoreUnavailableError)) {
      if (err instanceof GatewayError && err.status === 429) metrics.rateLimited.labels(limit).inc();
      throw err;
    }
  } finally {
    clearTimeout(timer);
  }
  metrics.rateLimitFailOpen.labels(limit).inc();
  return false;
}
