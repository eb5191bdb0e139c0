// /token: authenticates the client, hands the request to its grant (one file
// each in grants/) and answers no-store, success or error. Unknown grant types
// are unsupported_grant_type; a missing one, invalid_request.
import { Hono, type Context } from 'hono';
import { AS_ENDPOINTS } from '../../config/reserved-paths.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { errorResponse } from '../../errors/respond.js';
import { toGatewayError } from '../../errors/translate.js';
import type { AsContext } from '../context.js';
import { authenticateClient } from '../clients/client-auth.js';
import { offeredGrantTypes, SUPPORTED_GRANT_TYPES, type GrantType } from '../clients/client-record.js';
import { JWT_BEARER_GRANT_TYPE } from '../../config/schema.js';
import { publicCors } from '../helpers/cors.js';
import { authorizationCodeGrant } from '../grants/authorization-code.js';
import { clientCredentialsGrant } from '../grants/client-credentials.js';
import type { GrantHandler, GrantHandlerFactory, TokenDeps } from '../grants/grant-handler.js';
import { refreshTokenGrant } from '../grants/refresh-token.js';
import { jwtBearerGrant } from '../grants/jwt-bearer.js';
import { NO_STORE } from '../helpers/no-store.js';
import { readForm } from '../helpers/request-body.js';
import { tokenNonceHeader, type TokenRequestProof } from '../tokens/token-dpop.js';

/** Every supported grant type has its handler (checked by the type). */
const GRANTS: Record<GrantType, GrantHandlerFactory> = {
  authorization_code: authorizationCodeGrant,
  refresh_token: refreshTokenGrant,
  client_credentials: clientCredentialsGrant,
  [JWT_BEARER_GRANT_TYPE]: jwtBearerGrant,
};

/** `proofOf`: the DPoP proof check of token requests (RFC 9449 §5). */
export function tokenRoutes(ctx: AsContext, deps: TokenDeps, proofOf: TokenRequestProof): Hono {
  const app = new Hono();
  const realm = ctx.issuer;
  // Only what this configuration offers: a grant left out is unsupported_grant_type, as the metadata says.
  const handlers = new Map<string, GrantHandler>(offeredGrantTypes(ctx.config).map((type) => [type, GRANTS[type](ctx, deps)]));

  app.use(AS_ENDPOINTS.token, publicCors);
  app.post(AS_ENDPOINTS.token, async (c) => {
    let grantType: string | undefined;
    const nonce = tokenNonceHeader(ctx, c.req.raw.headers);
    try {
      const params = await readForm(c.req.raw);
      grantType = params.get('grant_type');
      const client = await authenticateClient(deps.clients, params, c.req.header('authorization'), realm);
      if (grantType === undefined) throw new GatewayError(400, 'invalid_request', 'grant_type is required');
      const grant = handlers.get(grantType);
      if (!grant) throw new GatewayError(400, 'unsupported_grant_type', 'This grant type is not supported');
      // Checked here, spent by the grant once the request is known valid.
      const proof = await proofOf(c.req.raw.headers);
      return c.json(await grant(client, params, proof), 200, { ...NO_STORE, ...nonce });
    } catch (err) {
      const response = tokenError(c, err, grantType);
      for (const [name, value] of Object.entries(nonce)) response.headers.set(name, value);
      return response;
    }
  });
  return app;

  function tokenError(_c: Context, err: unknown, grantType: string | undefined): Response {
    const error = toGatewayError(err, { storeUnavailable: 'The token service is temporarily unavailable' });
    // Bounded labels: the supported grant types, else `other`.
    ctx.metrics.tokenErrors.labels((SUPPORTED_GRANT_TYPES as readonly string[]).includes(grantType ?? '') ? (grantType as string) : 'other', error.code).inc();
    if (error.status >= 500) ctx.logger.warn({ err: error.cause ?? err, status: error.status }, 'token request failed');
    const response = errorResponse(error);
    response.headers.set('pragma', 'no-cache');
    return response;
  }
}
