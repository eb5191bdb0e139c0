// /revoke (RFC 7009). A refresh token or an access token revokes its whole
// grant (§2.1 allows it, docs/authorization-server.md promises it): further refreshes fail at
// once, and the grant's access tokens are refused on every replica within 5 s
// (RevokedGrants). Only the client the token was issued to can revoke it.
// Unknown, foreign or malformed tokens get the same 200 (§2.2).
import { Hono } from 'hono';
import { AS_ENDPOINTS } from '../../config/reserved-paths.js';
import { errorResponse } from '../../errors/respond.js';
import { toGatewayError } from '../../errors/translate.js';
import { grantOfAccessToken } from '../tokens/access-token.js';
import type { AsContext } from '../context.js';
import { authenticateClient } from '../clients/client-auth.js';
import type { ClientRegistry } from '../clients/client-registry.js';
import { publicCors } from '../helpers/cors.js';
import type { Grants } from '../tokens/grants.js';
import { NO_STORE } from '../helpers/no-store.js';
import { readForm, requiredParam } from '../helpers/request-body.js';

export interface RevokeDeps {
  clients: ClientRegistry;
  grants: Grants;
}

export function revokeRoutes(ctx: AsContext, deps: RevokeDeps): Hono {
  const app = new Hono();
  app.use(AS_ENDPOINTS.revoke, publicCors);
  app.post(AS_ENDPOINTS.revoke, async (c) => {
    try {
      const params = await readForm(c.req.raw);
      const client = await authenticateClient(deps.clients, params, c.req.header('authorization'), ctx.issuer);
      const token = requiredParam(params, 'token');
      // Any token_type_hint is fine: the token is tried as a refresh token, then as an access token.
      const refreshGrant = await deps.grants.lookup(token);
      const grant = refreshGrant ?? (await grantOfAccessToken(ctx.keys, ctx.issuer, token));
      if (grant && grant.clientId === client.clientId) {
        await deps.grants.revoke(grant.grantId, 'revoked_by_client', { subject: grant.subject, clientId: client.clientId, token: refreshGrant ? 'refresh_token' : 'access_token' });
      }
      return c.body(null, 200, NO_STORE);
    } catch (err) {
      return errorResponse(toGatewayError(err, { storeUnavailable: 'The revocation service is temporarily unavailable' }));
    }
  });
  return app;
}
