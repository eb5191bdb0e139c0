// What a running gateway builds once and keeps across reloads: logger,
// metrics, the store (its eviction policy checked first), the audit sink, the
// JWKS cache and the health, readiness and metrics routes.
import type { Hono } from 'hono';
import type { GatewayConfig } from '../config/types.js';
import { JwksRegistry } from '../auth/jwks.js';
import { createAudit, type Audit } from '../observability/audit.js';
import type { TallyCount } from '../observability/counter-tally.js';
import { createLogger, type Logger } from '../observability/logger.js';
import { Metrics } from '../observability/metrics.js';
import type { Tracing } from '../observability/tracing.js';
import { operationsRoutes, type Lifecycle } from '../routes/operations.js';
import { createStore } from '../store/create-store.js';
import { enforceEvictionPolicy } from '../store/eviction-policy.js';
import { InstrumentedStore } from '../store/instrumented-store.js';
import { RedisStore } from '../store/redis-store.js';
import { StoreClock } from '../store/store-clock.js';
import type { Store } from '../store/store.js';
import { maxClockSkewMs } from '../config/replica-clocks.js';
import { SharedForwarders } from './shared-forwarders.js';
import type { StartOptions } from './start-options.js';

export interface Services {
  logger: Logger;
  metrics: Metrics;
  store: Store;
  /** The store's clock (Redis TIME) as this replica reads it: DPoP proofs are judged by it. */
  clock: StoreClock;
  /** Whether the gateway opened the store itself, and so closes it. */
  ownsStore: boolean;
  audit: Audit;
  jwks: JwksRegistry;
  /** Undefined when no OTLP endpoint is configured: nothing on the request path traces then. */
  tracing?: Tracing;
  tokenCacheHits: TallyCount;
  tokenCacheMisses: TallyCount;
  /** /readyz answers from this: ready once listening, not ready again when draining. */
  readiness: Lifecycle;
  operations: Hono;
  /** stdio routes' forwarders (their processes), kept across reloads that leave the route unchanged. */
  sharedForwarders: SharedForwarders;
  /** StartOptions.aggregateRecovery (tests only). */
  aggregateRecovery?: StartOptions['aggregateRecovery'];
}

export async function openServices(config: GatewayConfig, options: StartOptions): Promise<Services> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const metrics = options.metrics ?? new Metrics();
  // Built from the first configuration and kept: a reload does not change where spans go (a restart does).
  // The OpenTelemetry SDK and its exporters (a fifth of the gateway's start-up CPU) load only when used.
  const tracing = config.traces && (await import('../observability/tracing-sdk.js')).createSdkTracing(config.traces, metrics);
  const store = new InstrumentedStore(await openStore(config, options, logger), metrics, tracing);
  const clock = new StoreClock({
    readStoreTime: store.time,
    allowedSkewMs: maxClockSkewMs(config.store),
    logger,
    metrics,
    wallNow: options.wallClock,
    monotonicNow: options.monotonicClock,
  });
  await clock.start();
  const readiness: Lifecycle = { ready: false };
  return {
    logger,
    metrics,
    store,
    clock,
    ownsStore: !options.store,
    audit: options.audit ?? createAudit(config.auditSink),
    // Kept across reloads (shared key sets): `jwks:` applies from the start's configuration.
    jwks: new JwksRegistry(config.jwks && { cacheMaxAgeMs: config.jwks.cacheMaxAgeMs, timeoutMs: config.jwks.fetchTimeoutMs }),
    tracing,
    tokenCacheHits: metrics.tokenCacheTally.count({ result: 'hit' }),
    tokenCacheMisses: metrics.tokenCacheTally.count({ result: 'miss' }),
    readiness,
    sharedForwarders: new SharedForwarders(),
    aggregateRecovery: options.aggregateRecovery,
    operations: operationsRoutes({ lifecycle: readiness, store, metrics, storeTimeoutMs: config.storeTimeoutMs }),
  };
}

async function openStore(config: GatewayConfig, options: StartOptions, logger: Logger): Promise<Store> {
  const backend =
    options.store ?? createStore(config.store, { onConnectionError: (err) => logger.warn({ err: err.message }, 'store connection error') });
  if (backend instanceof RedisStore) {
    // An evicted record could resurrect a token or lose a client: refuse (require_noeviction) or say so loudly.
    const requireNoeviction = config.store.kind === 'redis' && config.store.requireNoeviction;
    await enforceEvictionPolicy(backend, { require: requireNoeviction, logger }).catch(async (err: unknown) => {
      if (!options.store) await backend.close().catch(() => undefined);
      throw err;
    });
  }
  return backend;
}
