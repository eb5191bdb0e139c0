// What one configuration load builds: the authorization server (when
// configured) and, per route, its forwarder, verifier, credential swap and
// policy step, behind one request listener. A reload builds a new table;
// in-flight requests keep the closures of the table they started with.
import { upstreamRoutes } from '../config/upstreams.js';
import { createApp, type NodeListener } from '../app.js';
import { createTokenVerifier } from '../auth/create-token-verifier.js';
import type { DpopChecks } from '../auth/dpop-binding.js';
import { createDpopNonces } from '../auth/dpop-nonce.js';
import { proofJtiTtlMs } from '../auth/dpop-proof.js';
import { dpopMarkerShare, dpopProofClaimer } from '../auth/dpop-replay.js';
import { maxClockSkewMs } from '../config/replica-clocks.js';
import { createAuthorizationServer, type AuthorizationServer } from '../authorization-server/index.js';
import { ConfigError } from '../config/config-error.js';
import type { GatewayConfig, RouteConfig } from '../config/types.js';
import { createPolicyStep } from '../policy/policy-step.js';
import type { RateLimiterDeps } from '../policy/rate-limiter.js';
import { createTaskBinding } from '../policy/task-binding.js';
import type { Forwarder, ProxyMetrics } from '../proxy/forwarder.js';
import { createHttpForwarder } from '../proxy/http-forwarder.js';
import { createSessionBinding, type SessionBinding } from '../proxy/session-binding.js';
import { sessionHook } from '../proxy/session-hook.js';
import { createSseForwarder } from '../proxy/sse/sse-forwarder.js';
import { sandboxIssues } from '../proxy/stdio/bubblewrap-check.js';
import { unboundedResourceRoutes, uncontainedRoutes } from '../proxy/stdio/containment.js';
import { createStdioForwarder } from '../proxy/stdio/stdio-forwarder.js';
import { createAggregateRoute } from './aggregate-route.js';
import { tracedRoutes } from '../routes/traced-routes.js';
import { createProtectedRoute, type ProtectedRouteHandler } from '../routes/protected-route.js';
import { createUpstreamCredential } from '../upstream-auth/create-upstream-credential.js';
import type { Services } from './services.js';
import type { StartOptions } from './start-options.js';

export interface RouteTable {
  listener: NodeListener;
  forwarders: Forwarder[];
  authorizationServer?: AuthorizationServer;
}

export async function buildRouteTable(config: GatewayConfig, services: Services, options: StartOptions): Promise<RouteTable> {
  const { store, logger, audit, metrics } = services;
  // A sandbox that cannot start here is refused now (start: exit 1; reload: the last good table stays), not per client.
  const sandboxes = await sandboxIssues(config.routes.flatMap(upstreamRoutes));
  if (sandboxes.length > 0) throw new ConfigError(sandboxes);
  for (const warning of [...uncontainedRoutes(config.routes), ...unboundedResourceRoutes(config.routes)]) logger.warn({}, warning);
  const as = config.authorizationServer
    ? await createAuthorizationServer(config, { store, logger, audit, metrics, jwks: services.jwks, clock: services.clock, options: options.authorizationServer })
    : undefined;
  const sessions = createSessionBinding(store);
  const selfOrigin = new URL(config.publicUrl).origin;
  const dpop = dpopChecks(config, services, as);
  const protectedRoutes = new Map<string, ProtectedRouteHandler>();
  const forwarders: Forwarder[] = [];
  for (const route of config.routes) {
    const aggregate = route.aggregate ? createAggregateRoute({ ...route, aggregate: route.aggregate }, sessions, services, (sub) => createRouteForwarder(sub, sessions, services), as, config) : undefined;
    const forwarder = aggregate ?? createRouteForwarder(route, sessions, services);
    forwarders.push(forwarder);
    const verifier = createTokenVerifier(route, {
      jwksSources: services.jwks,
      builtin: as?.builtinVerifier,
      onCacheHit: () => services.tokenCacheHits.inc(),
      onCacheMiss: () => services.tokenCacheMisses.inc(),
      logger,
      tracing: services.tracing,
    });
    const credential = createUpstreamCredential(route.upstreamAuth, {
      upstream: route.upstream,
      store,
      signer: as?.signer,
      publicUrl: config.publicUrl,
      idpTokens: as?.idpTokens,
      upstreamAccounts: as?.upstreamAccounts?.(route.path),
    });
    const handler = createProtectedRoute(route, {
      verifier,
      forwarder,
      credential,
      metrics,
      logger,
      selfOrigin,
      policy: createPolicyStep(route, { audit, tasks: bindsTasks(route) ? createTaskBinding(route.path, store, logger) : undefined, rateLimits: rateLimitDeps(route, config, services), resourceRouting: aggregate?.servedBy.bind(aggregate) }),
      tracing: services.tracing,
      dpop,
      benchmarkPrincipal: options.benchmarkPrincipal,
    });
    protectedRoutes.set(route.path, handler);
  }
  const app = createApp({ routes: config.routes, protectedRoutes, operations: services.operations, logger, extra: as ? [services.tracing ? tracedRoutes(as.routes, services.tracing) : as.routes] : [] });
  return { listener: app.listener, forwarders, authorizationServer: as };
}

function createRouteForwarder(route: RouteConfig, sessions: SessionBinding, { logger, metrics, sharedForwarders }: Services): Forwarder {
  const session = sessionHook(route.path, sessions, logger);
  const proxyMetrics: ProxyMetrics = {
    upstreamError: (kind) => metrics.upstreamErrors.labels(route.path, kind).inc(),
    streamOpened: () => metrics.openStreams.labels(route.path).inc(),
    streamClosed: () => metrics.openStreams.labels(route.path).dec(),
  };
  const { stdio } = route;
  // A legacy SSE route's sessions are live upstream streams: kept across a reload that leaves the route as it was.
  const { sse } = route;
  if (sse) {
    const key = JSON.stringify(['sse', route.path, route.upstream, sse, route.maxBodyBytes, route.upstreamTimeoutMs]);
    return sharedForwarders.acquire(key, () => createSseForwarder({ ...route, sse }, { session, logger, metrics: proxyMetrics }));
  }
  if (!stdio) return createHttpForwarder(route, { session, logger, metrics: proxyMetrics });
  // Same path and settings as in the table before a reload: the same processes go on serving.
  const key = JSON.stringify([route.path, stdio, route.maxBodyBytes, route.upstreamTimeoutMs]);
  return sharedForwarders.acquire(key, () =>
    createStdioForwarder({ ...route, stdio }, {
      session,
      logger,
      metrics: {
        ...proxyMetrics,
        processStarted: () => {
          metrics.stdioSpawns.labels(route.path).inc();
          metrics.stdioProcesses.labels(route.path).inc();
        },
        processEnded: (reason) => {
          metrics.stdioExits.labels(route.path, reason).inc();
          metrics.stdioProcesses.labels(route.path).dec();
        },
        cleanupFailed: () => metrics.stdioCleanupFailures.labels(route.path).inc(),
      },
    }),
  );
}

/** An HTTP upstream's tasks and event ids need binding; a stdio or legacy SSE route's sessions (and their streams) are the gateway's own, one per principal. */
const bindsTasks = (route: RouteConfig): boolean => !route.stdio && !route.sse;

/** One-use proofs through the store; nonces from `dpop_nonce_key`, else the same ones the built-in AS hands out. */
function dpopChecks(config: GatewayConfig, { store, clock }: Services, as: AuthorizationServer | undefined): DpopChecks {
  const nonces = config.dpopNonceKey !== undefined ? createDpopNonces(config.dpopNonceKey) : as?.dpopNonces;
  const nowSeconds = () => clock.nowSeconds();
  const claim = dpopProofClaimer(store, { share: dpopMarkerShare(config.store), markerTtlMs: proofJtiTtlMs(maxClockSkewMs(config.store)), nowSeconds });
  return { nowSeconds, claim, ...(nonces && { nonces }) };
}

/** What a route's rate limits count with: the shared store, bounded by its command timeout, and the route's counters. */
function rateLimitDeps(route: RouteConfig, config: GatewayConfig, { store, metrics }: Services): RateLimiterDeps {
  return {
    store,
    waitMs: config.store.kind === 'redis' ? config.store.commandTimeoutMs : undefined,
    counters: (label) => ({
      limited: metrics.routeRateLimited.labels(route.path, label),
      failOpen: metrics.routeRateLimitFailOpen.labels(route.path, label),
    }),
  };
}

/** Ends the table's event streams and closes its upstream pools. */
export const closeForwarders = (table: RouteTable) => Promise.allSettled(table.forwarders.map((f) => f.close()));

/** Closes the forwarders and the authorization server. */
export async function closeRouteTable(table: RouteTable): Promise<void> {
  await Promise.allSettled([closeForwarders(table), table.authorizationServer?.close()]);
}
