// grant_type=client_credentials: a machine token for a client the operator
// configured (client-grants decides which), for one resource and within the
// client's configured scopes. Each request is its own grant, with no refresh token.
import { GatewayError } from '../../errors/gateway-error.js';
import { mayUseGrant } from '../clients/client-grants.js';
import type { GrantInfo } from '../tokens/grants.js';
import { resolveMachineScopes, resolveResource } from '../clients/resource-scope.js';
import { randomToken } from '../helpers/secrets.js';
import { issueTokens, resolvedOrThrow, type GrantHandlerFactory } from './grant-handler.js';

export const clientCredentialsGrant: GrantHandlerFactory = (ctx, deps) => async (client, params, { jkt, spend }) => {
  if (!mayUseGrant(client, 'client_credentials')) throw new GatewayError(400, 'unauthorized_client', 'This client may not use the client_credentials grant');
  const route = resolvedOrThrow(resolveResource(ctx, params.get('resource')));
  const scopes = resolvedOrThrow(resolveMachineScopes(route, client, params.get('scope')));
  const grant: GrantInfo = { grantId: randomToken(16), clientId: client.clientId, subject: client.clientId, scopes, resource: route.resource };
  await spend(grant.subject);
  return issueTokens(ctx, deps.clients, { grantType: 'client_credentials', client, grant, scopes, jkt });
};
