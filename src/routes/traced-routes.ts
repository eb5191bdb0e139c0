// One server span per request to the built-in authorization server's
// endpoints, with tracing on: `POST /token` and the like, a child of the
// client's `traceparent`, with the answer's status. Only the endpoints' own
// exact paths are traced, so span names stay few whatever paths clients try;
// nothing of the request (codes, secrets, redirect URIs) is recorded.
import { Hono } from 'hono';
import type { Tracing } from '../observability/tracing.js';

export function tracedRoutes(routes: Hono, tracing: Tracing): Hono {
  // Middleware is registered as ALL; the endpoints under their methods.
  const paths = new Set(routes.routes.filter((r) => r.method !== 'ALL').map((r) => r.path));
  const traced = new Hono();
  traced.use('*', async (c, next) => {
    const path = c.req.path;
    if (!paths.has(path)) return next();
    const method = c.req.method;
    const span = tracing.serverSpan(`${method} ${path}`, c.req.header(), { 'http.route': path, 'url.path': path, 'http.request.method': method });
    try {
      await span.within(next);
    } finally {
      span.setStatus(c.res.status);
      span.end();
    }
  });
  traced.route('/', routes);
  return traced;
}
