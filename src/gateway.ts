// Builds a running gateway from a loaded configuration: shared services
// (store, metrics, logger, JWKS) once, per-route components once per load,
// and the HTTP server. Reload swaps the route table; in-flight requests keep
// the closures they started with.
import type { AddressInfo } from 'node:net';
import type { GatewayConfig } from './config/types.js';
import { createApp, type NodeListener } from './app.js';
import { createHttpServer } from './server.js';
import { createStore } from './store/create-store.js';
import type { Store } from './store/store.js';
import { RedisStore } from './store/redis-store.js';
import { Metrics } from './observability/metrics.js';
import { createLogger, type Logger } from './observability/logger.js';
import { operationsRoutes, type Lifecycle } from './routes/operations.js';
import { createProtectedRoute, type ProtectedRouteHandler } from './routes/protected-route.js';
import { createTokenVerifier } from './auth/verifier.js';
import { JwksRegistry } from './auth/jwks.js';
import { createForwarder, type Forwarder } from './proxy/forward.js';
import { createSessionBinding } from './proxy/session-binding.js';
import { createUpstreamCredential } from './upstream-auth/create-upstream-credential.js';

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
  /** SIGTERM behaviour: not ready at once, in-flight requests finish, streams end after the grace period. */
  drain(graceMs?: number): Promise<void>;
  /** Immediate stop (tests). */
  close(): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  metrics?: Metrics;
  store?: Store;
}

interface RouteTable {
  listener: NodeListener;
  forwarders: Forwarder[];
}

export async function startGateway(config: GatewayConfig, options: StartOptions = {}): Promise<RunningGateway> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const metrics = options.metrics ?? new Metrics();
  const store =
    options.store ?? createStore(config.store, { onConnectionError: (err) => logger.warn({ err: err.message }, 'store connection error') });
  if (store instanceof RedisStore) {
    // An evicted record could resurrect a token or lose a client: say so loudly.
    const policy = await store.checkEvictionPolicy().catch(() => undefined);
    if (policy && policy !== 'noeviction') logger.warn({ policy }, 'Redis maxmemory-policy should be noeviction');
  }
  const jwks = new JwksRegistry();
  const lifecycle: Lifecycle = { ready: false };
  const operations = operationsRoutes({ lifecycle, store, metrics, storeTimeoutMs: config.storeTimeoutMs });
  for (const warning of config.warnings) logger.warn(warning);

  function buildRouteTable(cfg: GatewayConfig): RouteTable {
    const sessions = createSessionBinding(store);
    const selfOrigin = new URL(cfg.publicUrl).origin;
    const protectedRoutes = new Map<string, ProtectedRouteHandler>();
    const forwarders: Forwarder[] = [];
    for (const route of cfg.routes) {
      const forwarder = createForwarder(route, {
        sessions,
        logger,
        metrics: {
          upstreamError: (kind) => metrics.upstreamErrors.labels(route.path, kind).inc(),
          streamOpened: () => metrics.openStreams.labels(route.path).inc(),
          streamClosed: () => metrics.openStreams.labels(route.path).dec(),
        },
      });
      forwarders.push(forwarder);
      const verifier = createTokenVerifier(route, {
        jwksSources: jwks,
        onCacheHit: () => metrics.tokenCache.labels('hit').inc(),
        onCacheMiss: () => metrics.tokenCache.labels('miss').inc(),
      });
      const credential = createUpstreamCredential(route.upstreamAuth, { upstream: route.upstream, store });
      protectedRoutes.set(route.path, createProtectedRoute(route, { verifier, forwarder, credential, metrics, logger, selfOrigin }));
    }
    const app = createApp({ routes: cfg.routes, protectedRoutes, operations, logger });
    return { listener: app.listener, forwarders };
  }

  let current = buildRouteTable(config);
  let currentConfig = config;
  const { server, inFlight } = createHttpServer(config, () => current.listener);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host === '[::]' ? '[::1]' : host}:${address.port}`;
  lifecycle.ready = true;
  logger.info({ url, routes: config.routes.map((r) => r.path) }, 'gateway listening');

  let closed = false;
  async function closeEverything(): Promise<void> {
    if (closed) return;
    closed = true;
    await Promise.allSettled(current.forwarders.map((f) => f.close()));
    if (!options.store) await store.close().catch(() => undefined);
  }

  return {
    url,
    port: address.port,
    get config() {
      return currentConfig;
    },
    logger,
    metrics,
    store,
    async reload(next) {
      const previous = current;
      current = buildRouteTable(next);
      currentConfig = next;
      for (const warning of next.warnings) logger.warn(warning);
      logger.info({ routes: next.routes.map((r) => r.path) }, 'configuration reloaded');
      // Old pools close once their in-flight requests are done.
      setTimeout(() => void Promise.allSettled(previous.forwarders.map((f) => f.close())), next.shutdownGraceMs).unref();
    },
    async drain(graceMs = currentConfig.shutdownGraceMs) {
      lifecycle.ready = false;
      logger.info({ graceMs }, 'draining');
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      const grace = new Promise<'grace'>((resolve) => setTimeout(() => resolve('grace'), graceMs).unref());
      const outcome = await Promise.race([stopped.then(() => 'done' as const), grace]);
      if (outcome === 'grace') {
        // Streams that outlive the grace period are ended cleanly, then cut.
        for (const res of inFlight) res.end();
        setTimeout(() => server.closeAllConnections(), 200).unref();
        await stopped;
      }
      await closeEverything();
      logger.info('drained');
    },
    async close() {
      lifecycle.ready = false;
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      await stopped;
      await closeEverything();
    },
  };
}
