// What startGateway takes besides the configuration: shared services handed
// in (tests, the demo) and seams that are never configuration.
import type { AuthContext } from '../auth/principal.js';
import type { AuthorizationServerOptions } from '../authorization-server/index.js';
import type { Audit } from '../observability/audit.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { RecoveryTimings } from '../proxy/aggregate/upstream-link.js';
import type { Store } from '../store/store.js';

export interface StartOptions {
  logger?: Logger;
  metrics?: Metrics;
  store?: Store;
  /** Where policy decisions go (default: the configured audit sink). */
  audit?: Audit;
  /** Built-in authorization server knobs that are not configuration (test hooks, login methods). */
  authorizationServer?: AuthorizationServerOptions;
  /**
   * Test only, never from configuration: this replica's wall clock in ms (default Date.now), as
   * the store's clock (store/store-clock.ts) reads it, so replicas with clocks apart can be run in
   * one process. Only DPoP timing goes through it.
   */
  wallClock?: () => number;
  /**
   * Test only, never from configuration: the monotonic clock in ms (default performance.now) by which
   * the store's clock advances between readings, so a test that moves a store's clock forward
   * (libfaketime) can move the replicas' reading of it the same way instead of waiting.
   */
  monotonicClock?: () => number;
  /** Benchmark only, never from configuration: see ProtectedRouteDeps.benchmarkPrincipal. */
  benchmarkPrincipal?: AuthContext;
  /** Tests only, never from configuration: shorter waits of aggregated routes' GET stream reopening and slow probing (upstream-listener.ts, upstream-prober.ts). */
  aggregateRecovery?: Partial<RecoveryTimings>;
}
