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

export const refreshTokenGrant: GrantHandlerFactory = (ctx, deps) => async (client, params, jkt) => {
  const presented = requiredParam(params, 'refresh_token');
  if (!mayUseGrant(client, 'refresh_token')) throw new GatewayError(400, 'unauthorized_client', 'This client is not registered for the refresh_token grant');
  const found = await deps.grants.lookup(presented);
  const known = found?.clientId === client.clientId ? found : undefined;
  // Refused before rotating: the legitimate holder of the key keeps its refresh token.
  if (known) checkKeyBinding(known, jkt);
  const resource = params.get('resource');
  if (known && resource !== undefined && resource !== known.resource) throw new GatewayError(400, 'invalid_target', 'resource does not match the grant');
  const requested = params.get('scope');
  const scopes = requested === undefined ? known?.scopes : requested.split(' ').filter((s) => s !== '');
  if (known && scopes && !scopes.every((s) => known.scopes.includes(s))) throw new GatewayError(400, 'invalid_scope', 'scope exceeds what was granted');
  // A reload may have withdrawn a scope, the route, or a static client's scope: judged before rotating, so nothing is minted from it.
  const allowed = known && resolvedOrThrow(stillGrantable(ctx, client, known.resource, scopes ?? known.scopes));
  const { grant, refreshToken } = await deps.grants.rotate(presented, client.clientId);
  // rotate succeeds only for the grant looked up above; judged again only if that lookup raced.
  if (!known) checkKeyBinding(grant, jkt);
  const granted = allowed ?? resolvedOrThrow(stillGrantable(ctx, client, grant.resource, scopes ?? grant.scopes));
  return issueTokens(ctx, deps.clients, { grantType: 'refresh_token', client, grant, scopes: granted, refreshToken, jkt });
};

/** A refresh token bound to a DPoP key (RFC 9449 §5) is used only with a proof of that key. */
function checkKeyBinding(grant: GrantInfo, jkt: string | undefined): void {
  if (grant.jkt !== undefined && grant.jkt !== jkt) {
    throw invalidGrant(jkt === undefined ? 'This refresh token is bound to a DPoP key: send a DPoP proof' : 'The DPoP proof is not of the key this refresh token is bound to');
  }
}
