// /revoke (RFC 7009). A refresh token revokes its whole grant at once. An
// access token is a self-contained JWT checked without a store lookup, so its
// revocation takes effect when it expires (access_token_ttl, 10 minutes by
// default). Unknown, foreign or malformed tokens get the same 200 (§2.2).
import { Hono } from 'hono';
import { temporarilyUnavailable } from '../errors/gateway-error.js';
import { errorResponse, toGatewayError } from '../errors/respond.js';
import { StoreUnavailableError } from '../store/store.js';
import type { AsContext } from './context.js';
import { authenticateClient } from './client-auth.js';
import type { ClientRegistry } from './clients.js';
import { publicCors } from './cors.js';
import type { Grants } from './grants.js';
import { readForm } from './request-body.js';
import { GatewayError } from '../errors/gateway-error.js';

export interface RevokeDeps {
  clients: ClientRegistry;
  grants: Grants;
}

export function revokeRoutes(ctx: AsContext, deps: RevokeDeps): Hono {
  const app = new Hono();
  app.use('/revoke', publicCors);
  app.post('/revoke', async (c) => {
    try {
      const params = await readForm(c.req.raw);
      const client = await authenticateClient(deps.clients, params, c.req.header('authorization'), ctx.issuer);
      const token = params.get('token');
      if (!token) throw new GatewayError(400, 'invalid_request', 'token is required');
      // Any token_type_hint is fine: a refresh token is looked up whatever the hint says.
      const grant = await deps.grants.lookup(token);
      if (grant && grant.clientId === client.clientId) {
        await deps.grants.revoke(grant.grantId, 'revoked_by_client');
        ctx.audit.record({ event: 'grant_revoked', reason: 'revoked_by_client', sub: grant.subject, client_id: client.clientId });
      }
      return c.body(null, 200, { 'cache-control': 'no-store', pragma: 'no-cache' });
    } catch (err) {
      const error = err instanceof StoreUnavailableError ? temporarilyUnavailable('The revocation service is temporarily unavailable', err) : toGatewayError(err);
      return errorResponse(error);
    }
  });
  return app;
}
