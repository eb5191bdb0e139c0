// Starts a running gateway from a loaded configuration: the shared services
// once (gateway/services.ts), the route table per load (gateway/route-table.ts,
// swapped by reload: gateway/reload.ts), the HTTP server, and its drain and
// stop (gateway/lifecycle.ts).
import type { GatewayConfig } from './config/types.js';
import type { Logger } from './observability/logger.js';
import type { Metrics } from './observability/metrics.js';
import { createHttpServer } from './server.js';
import type { Store } from './store/store.js';
import { maxClockSkewMs } from './config/replica-clocks.js';
import { drain, listen, stop, type ShutdownParts } from './gateway/lifecycle.js';
import { LiveRoutes, logWarnings } from './gateway/reload.js';
import { buildRouteTable, closeForwarders, closeRouteTable } from './gateway/route-table.js';
import { openServices } from './gateway/services.js';
import type { StartOptions } from './gateway/start-options.js';
import type { Services } from './gateway/services.js';

export type { StartOptions } from './gateway/start-options.js';

export interface RunningGateway {
  /** http://host:port the server listens on. */
  url: string;
  port: number;
  config: GatewayConfig;
  logger: Logger;
  metrics: Metrics;
  store: Store;
  /** Validate-then-swap: a config that fails to build leaves the old one running. */
  reload(config: GatewayConfig): Promise<void>;
  /**
   * SIGTERM behaviour: not ready at once; new connections still served for
   * `delayMs` (load balancers catching up), then refused; in-flight requests
   * finish; whatever is still open `graceMs` later (event streams) is ended.
   */
  drain(options?: DrainOptions): Promise<void>;
  /** Immediate stop (tests). */
  close(): Promise<void>;
}

export interface DrainOptions {
  /** default: the configured drain_delay */
  delayMs?: number;
  /** default: the configured shutdown_grace */
  graceMs?: number;
}

export async function startGateway(config: GatewayConfig, options: StartOptions = {}): Promise<RunningGateway> {
  const services = await openServices(config, options);
  const { logger, metrics, store } = services;
  logWarnings(config, logger);
  const build = (cfg: GatewayConfig) => buildRouteTable(cfg, services, options);
  const live = new LiveRoutes(await build(config), config, build, logger);
  const http = createHttpServer(config, () => live.table.listener);
  const { url, port } = await listen(http.server, config);
  services.readiness.ready = true;
  recordLoaded(config, services);
  logger.info({ url, routes: config.routes.map((r) => r.path) }, 'gateway listening');

  let closed = false;
  const shutdown: ShutdownParts = {
    http,
    readiness: services.readiness,
    logger,
    endStreams: () => void closeForwarders(live.table),
    async closeAll() {
      if (closed) return;
      closed = true;
      services.clock.stop();
      await closeRouteTable(live.table);
      // After the routes: their last spans have ended. Bounded, whether the collector answers or not.
      await services.tracing?.shutdown();
      if (services.ownsStore) await store.close().catch(() => undefined);
    },
  };

  return {
    url,
    port,
    get config() {
      return live.config;
    },
    logger,
    metrics,
    store,
    reload: async (next) => {
      await live.reload(next);
      services.clock.setAllowedSkew(maxClockSkewMs(next.store));
      recordLoaded(next, services);
    },
    drain: ({ delayMs = live.config.drainDelayMs, graceMs = live.config.shutdownGraceMs }: DrainOptions = {}) => drain(shutdown, delayMs, graceMs),
    close: () => stop(shutdown),
  };
}

/** /readyz and the metrics name the live configuration: its hash and when it was loaded. */
function recordLoaded(config: GatewayConfig, { readiness, metrics }: Pick<Services, 'readiness' | 'metrics'>): void {
  readiness.config = { hash: config.digest, loadedAt: new Date() };
  metrics.configLoaded.set(readiness.config.loadedAt.getTime() / 1000);
  metrics.configInfo.reset();
  metrics.configInfo.set({ hash: config.digest ?? 'none' }, 1);
}
