// grant_type=refresh_token: rotation with reuse detection (grants.ts), an
// optional narrower scope for this access token (RFC 6749 §6; the grant keeps
// its own), and only what the configuration loaded now still allows. A bad
// request is refused before rotating, so it does not cost the client its
// refresh token.
import { GatewayError } from '../../errors/gateway-error.js';
import { mayUseGrant } from '../clients/client-grants.js';
import { requiredParam } from '../helpers/request-body.js';
import { stillGrantable } from '../clients/resource-scope.js';
import type { GrantInfo } from '../tokens/grants.js';
import { invalidGrant, issueTokens, resolvedOrThrow, type GrantHandlerFactory } from './grant-handler.js';

export const refreshTokenGrant: GrantHandlerFactory = (ctx, deps) => async (client, params, { jkt, spend }) => {
  const presented = requiredParam(params, 'refresh_token');
  if (!mayUseGrant(client, 'refresh_token')) throw new GatewayError(400, 'unauthorized_client', 'This client is not registered for the refresh_token grant');
  const found = await deps.grants.lookup(presented);
  // Unknown, or another client's: refused before anything is written (no proof spent, nothing revoked).
  if (found?.clientId !== client.clientId) throw invalidGrant('The refresh token is invalid, expired or revoked');
  // Refused before rotating: the legitimate holder of the key keeps its refresh token.
  checkKeyBinding(found, jkt);
  const resource = params.get('resource');
  if (resource !== undefined && resource !== found.resource) throw new GatewayError(400, 'invalid_target', 'resource does not match the grant');
  const requested = params.get('scope');
  const scopes = requested === undefined ? found.scopes : requested.split(' ').filter((s) => s !== '');
  if (!scopes.every((s) => found.scopes.includes(s))) throw new GatewayError(400, 'invalid_scope', 'scope exceeds what was granted');
  // A reload may have withdrawn a scope, the route, or a static client's scope: judged before rotating, so nothing is minted from it.
  const granted = resolvedOrThrow(stillGrantable(ctx, client, found.resource, scopes));
  await spend(found.subject);
  const { grant, refreshToken } = await deps.grants.rotate(presented, client.clientId, jkt);
  return issueTokens(ctx, deps.clients, { grantType: 'refresh_token', client, grant, scopes: granted, refreshToken, jkt });
};

/** A refresh token bound to a DPoP key (RFC 9449 §5) is used only with a proof of that key. */
function checkKeyBinding(grant: GrantInfo, jkt: string | undefined): void {
  if (grant.jkt !== undefined && grant.jkt !== jkt) {
    throw invalidGrant(jkt === undefined ? 'This refresh token is bound to a DPoP key: send a DPoP proof' : 'The DPoP proof is not of the key this refresh token is bound to');
  }
}
