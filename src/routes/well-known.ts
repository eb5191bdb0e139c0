// RFC 9728 metadata for every route, at the path-inserted well-known URL,
// and at the root when one route is mounted at `/` or only one route exists
// (clients that fall back to the root document still find it).
import { Hono, type Context } from 'hono';
import type { RouteConfig } from '../config/types.js';
import { metadataPath, protectedResourceMetadata } from '../metadata/protected-resource.js';

const ROOT = '/.well-known/oauth-protected-resource';

export function wellKnownRoutes(routes: readonly RouteConfig[]): Hono {
  const app = new Hono();
  const documents = new Map<string, string>();
  for (const route of routes) documents.set(metadataPath(route), JSON.stringify(protectedResourceMetadata(route)));
  const only = routes.length === 1 ? routes[0] : undefined;
  if (!documents.has(ROOT) && only) documents.set(ROOT, JSON.stringify(protectedResourceMetadata(only)));

  // Exact lookup, not Hono patterns: a configured path may hold `:` or `*`.
  app.get('/.well-known/oauth-protected-resource/*', serve).get(ROOT, serve);
  function serve(c: Context) {
    const body = documents.get(c.req.path);
    if (body === undefined) return c.json({ error: 'not_found', error_description: 'No protected resource here' }, 404);
    return c.body(body, 200, {
      'content-type': 'application/json',
      'cache-control': 'public, max-age=300',
      'access-control-allow-origin': '*',
    });
  }
  return app;
}
