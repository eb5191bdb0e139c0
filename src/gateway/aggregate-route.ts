// An aggregated route's forwarder, wired (DESIGN §8.2): each upstream entry is
// made a route of its own for the forwarders (its transport, limits, session
// bindings under `<path>#<name>`, metrics under that label) with its own
// credential, and the aggregate forwarder stands in front of them all.
import type { AuthContext } from '../auth/principal.js';
import type { AuthorizationServer } from '../authorization-server/index.js';
import type { AggregateConfig, GatewayConfig, RouteConfig } from '../config/types.js';
import { createAggregateForwarder, type AggregateRouteForwarder } from '../proxy/aggregate/aggregate-forwarder.js';
import type { Forwarder } from '../proxy/forwarder.js';
import type { SessionBinding } from '../proxy/session-binding.js';
import { sessionHook } from '../proxy/session-hook.js';
import { upstreamRoutes } from '../config/upstreams.js';
import { CallerAnswerError } from '../proxy/aggregate/caller-answer.js';
import { connectAnswer } from '../routes/connect-elicitation.js';
import { createUpstreamCredential } from '../upstream-auth/create-upstream-credential.js';
import type { UpstreamCredential } from '../upstream-auth/upstream-credential.js';
import { UpstreamAccountRequired } from '../upstream-auth/user-oauth.js';
import type { Services } from './services.js';

export function createAggregateRoute(
  route: RouteConfig & { aggregate: AggregateConfig },
  sessions: SessionBinding,
  services: Services,
  forwarderOf: (route: RouteConfig) => Forwarder,
  as: AuthorizationServer | undefined,
  config: GatewayConfig,
): AggregateRouteForwarder {
  const { metrics, logger, store } = services;
  const subRoutes = upstreamRoutes(route);
  const upstreams = route.aggregate.upstreams.map((entry, i) => {
    const sub = subRoutes[i]!;
    // A user_oauth entry's grants, connect link and callback are its own (`<path>#<name>`), as a route's.
    const credential = createUpstreamCredential(entry.upstreamAuth, { upstream: entry.upstream, store, signer: as?.signer, publicUrl: config.publicUrl, idpTokens: as?.idpTokens, upstreamAccounts: as?.upstreamAccounts?.(sub.path) });
    const rejected = credential.rejected?.bind(credential);
    return { name: entry.name, forwarder: forwarderOf(sub), headersFor: (auth: AuthContext) => headersOrConnectLink(credential, auth), ...(rejected && { rejected }), timeoutMs: entry.upstreamTimeoutMs, maxBytes: route.maxBodyBytes, perSession: entry.stdio !== undefined, recovery: services.aggregateRecovery };
  });
  return createAggregateForwarder(route, {
    session: sessionHook(route.path, sessions, logger),
    upstreams,
    logger,
    metrics: {
      upstreamUp: (name, up) => metrics.aggregateUpstreamUp.labels(route.path, name).set(up ? 1 : 0),
      leftOut: (name) => metrics.aggregateLeftOut.labels(route.path, name).inc(),
      request: upstreamRequests(metrics, route.path, upstreams.map((u) => u.name)),
    },
  });
}

/** Each upstream's request durations and failures, their label sets bound once per upstream. */
function upstreamRequests(metrics: Services['metrics'], route: string, names: readonly string[]): (upstream: string, seconds: number, failure: string | undefined) => void {
  const durations = new Map(names.map((name) => [name, metrics.aggregateUpstreamDuration.labels(route, name)]));
  return (upstream, seconds, failure) => {
    durations.get(upstream)?.observe(seconds);
    if (failure !== undefined) metrics.aggregateUpstreamErrors.labels(route, upstream, failure).inc();
  };
}

/** The entry's credential for this caller; a user who has not connected their account there gets the connect link as that request's answer. */
async function headersOrConnectLink(credential: UpstreamCredential, auth: AuthContext): Promise<Readonly<Record<string, string>>> {
  try {
    return await credential.headersFor(auth);
  } catch (err) {
    if (err instanceof UpstreamAccountRequired) throw new CallerAnswerError((version) => connectAnswer(err, version));
    throw err;
  }
}
