// Builds a running gateway from a loaded configuration: shared services
// (store, metrics, logger, JWKS) once, per-route components once per load,
// and the HTTP server. Reload swaps the route table; in-flight requests keep
// the closures they started with.
import type { AddressInfo } from 'node:net';
import type { GatewayConfig } from './config/types.js';
import { createApp, type NodeListener } from './app.js';
import { createHttpServer, endForShutdown } from './server.js';
import { createStore } from './store/create-store.js';
import type { Store } from './store/store.js';
import { RedisStore } from './store/redis-store.js';
import { InstrumentedStore } from './store/instrumented-store.js';
import { enforceEvictionPolicy } from './store/eviction-policy.js';
import { Metrics } from './observability/metrics.js';
import { createLogger, type Logger } from './observability/logger.js';
import { operationsRoutes, type Lifecycle } from './routes/operations.js';
import { createProtectedRoute, type ProtectedRouteHandler } from './routes/protected-route.js';
import { createTokenVerifier } from './auth/create-token-verifier.js';
import type { AuthContext } from './auth/principal.js';
import { JwksRegistry } from './auth/jwks.js';
import type { Forwarder } from './proxy/forwarder.js';
import { createHttpForwarder } from './proxy/http-forwarder.js';
import { createSessionBinding } from './proxy/session-binding.js';
import { sessionHook } from './proxy/session-hook.js';
import { createUpstreamCredential } from './upstream-auth/create-upstream-credential.js';
import { createAudit, type Audit } from './observability/audit.js';
import { createPolicyStep } from './policy/policy-step.js';
import { createAuthorizationServer, type AuthorizationServer, type AuthorizationServerOptions } from './authorization-server/index.js';

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

export interface StartOptions {
  logger?: Logger;
  metrics?: Metrics;
  store?: Store;
  /** Where policy decisions go (default: the configured audit sink). */
  audit?: Audit;
  /** Built-in authorization server knobs that are not configuration (test hooks, login methods). */
  authorizationServer?: AuthorizationServerOptions;
  /** Benchmark only, never from configuration: see ProtectedRouteDeps.benchmarkPrincipal. */
  benchmarkPrincipal?: AuthContext;
}

interface RouteTable {
  listener: NodeListener;
  forwarders: Forwarder[];
  authorizationServer?: AuthorizationServer;
}

export async function startGateway(config: GatewayConfig, options: StartOptions = {}): Promise<RunningGateway> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const metrics = options.metrics ?? new Metrics();
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
  const store: Store = new InstrumentedStore(backend, metrics);
  const jwks = new JwksRegistry();
  const audit = options.audit ?? createAudit(config.auditSink);
  const cacheHits = metrics.tokenCacheTally.count({ result: 'hit' });
  const cacheMisses = metrics.tokenCacheTally.count({ result: 'miss' });
  const lifecycle: Lifecycle = { ready: false };
  const operations = operationsRoutes({ lifecycle, store, metrics, storeTimeoutMs: config.storeTimeoutMs });
  for (const warning of config.warnings) logger.warn(warning);

  async function buildRouteTable(cfg: GatewayConfig): Promise<RouteTable> {
    const as = cfg.authorizationServer
      ? await createAuthorizationServer(cfg, { store, logger, audit, metrics, options: options.authorizationServer })
      : undefined;
    const sessions = createSessionBinding(store);
    const selfOrigin = new URL(cfg.publicUrl).origin;
    const protectedRoutes = new Map<string, ProtectedRouteHandler>();
    const forwarders: Forwarder[] = [];
    for (const route of cfg.routes) {
      const forwarder = createHttpForwarder(route, {
        session: sessionHook(route.path, sessions, logger),
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
        builtin: as?.builtinVerifier,
        onCacheHit: () => cacheHits.inc(),
        onCacheMiss: () => cacheMisses.inc(),
      });
      const credential = createUpstreamCredential(route.upstreamAuth, {
        upstream: route.upstream,
        store,
        signer: as?.signer,
        publicUrl: cfg.publicUrl,
        idpTokens: as?.idpTokens,
      });
      const policy = createPolicyStep(route, { audit });
      const handler = createProtectedRoute(route, {
        verifier,
        forwarder,
        credential,
        metrics,
        logger,
        selfOrigin,
        policy,
        benchmarkPrincipal: options.benchmarkPrincipal,
      });
      protectedRoutes.set(route.path, handler);
    }
    const app = createApp({ routes: cfg.routes, protectedRoutes, operations, logger, extra: as ? [as.routes] : [] });
    return { listener: app.listener, forwarders, authorizationServer: as };
  }

  let current = await buildRouteTable(config);
  let currentConfig = config;
  const http = createHttpServer(config, () => current.listener);
  const { server } = http;
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
    await Promise.allSettled([...current.forwarders.map((f) => f.close()), current.authorizationServer?.close()]);
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
      current = await buildRouteTable(next);
      currentConfig = next;
      for (const warning of next.warnings) logger.warn(warning);
      // Old pools close once their in-flight requests are done.
      setTimeout(() => void Promise.allSettled([...previous.forwarders.map((f) => f.close()), previous.authorizationServer?.close()]), next.shutdownGraceMs).unref();
    },
    async drain({ delayMs = currentConfig.drainDelayMs, graceMs = currentConfig.shutdownGraceMs }: DrainOptions = {}) {
      lifecycle.ready = false;
      http.draining = true;
      logger.info({ delayMs, graceMs }, 'draining: not ready');
      // Endpoints take a few seconds to drop a pod that is not ready: keep serving what they still send.
      if (delayMs > 0) await sleep(delayMs);
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      logger.info({ inFlight: http.inFlight.size }, 'draining: no new connections');
      let graceTimer: NodeJS.Timeout | undefined;
      const grace = new Promise<'grace'>((resolve) => (graceTimer = setTimeout(resolve, graceMs, 'grace')));
      const outcome = await Promise.race([stopped.then(() => 'done' as const), grace]);
      clearTimeout(graceTimer);
      if (outcome === 'grace') {
        // Event streams never end on their own: the forwarders end them cleanly,
        // then whatever else is still open is answered or cut.
        logger.info({ inFlight: http.inFlight.size }, 'draining: grace period over, ending open responses');
        void Promise.allSettled(current.forwarders.map((f) => f.close()));
        await sleep(100);
        for (const res of http.inFlight) endForShutdown(res);
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), 500).unref();
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

// Not unref'd: while draining, a timer may be all that keeps the process alive until it is done.
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
