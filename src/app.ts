// The one wiring file: the route table and where errors are answered.
// Protected routes are looked up exactly on the validated path and served
// straight on Node's request/response (the hot path); everything else goes
// through Hono.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Hono } from 'hono';
import { getRequestListener } from '@hono/node-server';
import { GatewayError } from './errors/gateway-error.js';
import { errorResponse } from './errors/respond.js';
import { toGatewayError } from './errors/translate.js';
import { checkRequestFraming } from './proxy/request-framing.js';
import { onRefusedConnection, refuseConnection } from './proxy/refused-connection.js';
import { parseRequestTarget } from './proxy/request-target.js';
import type { RouteConfig } from './config/types.js';
import type { Logger } from './observability/logger.js';
import type { ProtectedRouteHandler } from './routes/protected-route.js';
import { writeError } from './errors/write-error.js';
import { wellKnownRoutes } from './routes/well-known.js';

export interface AppDeps {
  routes: readonly RouteConfig[];
  protectedRoutes: ReadonlyMap<string, ProtectedRouteHandler>;
  /** Operations endpoints (health, readiness, metrics): shared across reloads. */
  operations: Hono;
  /** Further Hono routes (the built-in authorization server). */
  extra?: Hono[];
  logger: Logger;
}

export type NodeListener = (req: IncomingMessage, res: ServerResponse) => void;

export interface GatewayApp {
  hono: Hono;
  listener: NodeListener;
}

export function createApp(deps: AppDeps): GatewayApp {
  const hono = new Hono();
  hono.route('/', deps.operations);
  hono.route('/', wellKnownRoutes(deps.routes));
  for (const extra of deps.extra ?? []) hono.route('/', extra);
  hono.notFound(() => errorResponse(new GatewayError(404, 'not_found', 'No route here')));
  hono.onError((err) => {
    const gatewayError = toGatewayError(err);
    if (gatewayError.status >= 500) deps.logger.error({ err: gatewayError.cause ?? err }, 'request failed');
    return errorResponse(gatewayError);
  });
  const honoListener = getRequestListener(hono.fetch, {
    overrideGlobalObjects: false,
    // A request the adapter cannot turn into a URL (a Host with obs-text, …): the translator's JSON 400.
    errorHandler: (err) => errorResponse(toGatewayError(err)),
  });

  const listener: NodeListener = (req, res) => {
    // Pipelined behind a refused request: never read, never answered (the connection is closing).
    if (onRefusedConnection(req)) return;
    let target: { path: string; search: string };
    try {
      checkRequestFraming(req);
      requireSingletonHeaders(req.rawHeaders);
      target = parseRequestTarget(req.url ?? '');
    } catch (err) {
      refuseConnection(req, res);
      writeError(res, toGatewayError(err), undefined, { connection: 'close' });
      return;
    }
    const protectedRoute = deps.protectedRoutes.get(target.path);
    if (protectedRoute) {
      void protectedRoute(req, res, target.search);
      return;
    }
    void honoListener(req, res);
  };
  return { hono, listener };
}

/**
 * Exactly one Host (RFC 9112 §3.2): none or two make the authority ambiguous
 * (request smuggling, cache poisoning). At most one Content-Type (a singleton
 * field, RFC 9110 §5.3): Node keeps the first, an upstream may read the last,
 * and the policy reads the body by it. Checked here rather than by Node's
 * requireHostHeader so the answer is the gateway's JSON error.
 */
function requireSingletonHeaders(rawHeaders: readonly string[]): void {
  let hosts = 0;
  let contentTypes = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host' && ++hosts > 1) {
      throw new GatewayError(400, 'invalid_request', 'Duplicate Host header');
    }
    if (name.length === 12 && name.toLowerCase() === 'content-type' && ++contentTypes > 1) {
      throw new GatewayError(400, 'invalid_request', 'Duplicate Content-Type header');
    }
  }
  if (hosts === 0) throw new GatewayError(400, 'invalid_request', 'Missing Host header');
}
