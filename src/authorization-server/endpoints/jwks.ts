// The public keys of the tokens the built-in AS signs, including keys kept
// only for verification after a rotation.
import { Hono } from 'hono';
import { AS_ENDPOINTS } from '../../config/reserved-paths.js';
import type { AsContext } from '../context.js';
import { publicCors } from '../helpers/cors.js';

export function jwksRoutes(ctx: AsContext): Hono {
  const app = new Hono();
  const body = JSON.stringify(ctx.keys.jwks);
  app.use(AS_ENDPOINTS.jwks, publicCors);
  app.get(AS_ENDPOINTS.jwks, (c) => c.body(body, 200, { 'content-type': 'application/jwk-set+json', 'cache-control': 'public, max-age=300' }));
  return app;
}
