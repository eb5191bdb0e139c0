// grant_type=authorization_code: PKCE S256, single use; a code redeemed twice
// by its own client (its verifier and DPoP key too) revokes the grant it
// issued (RFC 6749 §4.1.2), whichever replica sees the replay. What the code still yields is judged against the configuration
// loaded now, not the one it was issued under.
import { GatewayError } from '../../errors/gateway-error.js';
import { mayUseGrant } from '../clients/client-grants.js';
import { isConfidential, type ClientRecord } from '../clients/client-record.js';
import type { GrantInfo } from '../tokens/grants.js';
import { pkceVerifierMatches } from '../tokens/pkce.js';
import { requiredParam, type Params } from '../helpers/request-body.js';
import { stillGrantable } from '../clients/resource-scope.js';
import { invalidGrant, issueTokens, resolvedOrThrow, type GrantHandlerFactory } from './grant-handler.js';

const REDEEMED = 'The authorization code is invalid, expired or already used';

/**
 * RFC 9449 §10: a code requested with `dpop_jkt` is redeemed only with a proof
 * of that key, so a stolen code is useless without the key (a Bearer exchange
 * of it too). Before the code is consumed: a thief's attempt leaves it intact.
 */
function checkCodeKey(codeJkt: string | undefined, proofJkt: string | undefined): void {
  if (codeJkt === undefined || codeJkt === proofJkt) return;
  throw invalidGrant(proofJkt === undefined ? 'This authorization code is bound to a DPoP key (dpop_jkt): send a DPoP proof of it' : 'The DPoP proof key is not the key the authorization code is bound to (dpop_jkt)');
}

export const authorizationCodeGrant: GrantHandlerFactory = (ctx, deps) => {
  async function revokeForReplay(grantId: string, clientId: string): Promise<void> {
    await deps.grants.revoke(grantId, 'code_replay', { clientId });
  }

  /**
   * A code presented again after its redemption revokes what it issued (RFC 6749 §4.1.2), but only
   * when presented as its own client would: that client, its PKCE verifier and its DPoP key. An
   * intercepted code, useless to whoever lacks them, cannot end the user's grant either.
   */
  async function replayed(code: string, client: ClientRecord, params: Params, jkt: string | undefined): Promise<void> {
    const redeemed = await deps.codes.redeemedBy(code);
    if (!redeemed) return;
    const ownClient = redeemed.clientId === undefined || (redeemed.clientId === client.clientId && pkceVerifierMatches(params.get('code_verifier'), redeemed.codeChallenge ?? '') && redeemed.dpopJkt === jkt);
    if (ownClient) await revokeForReplay(redeemed.grantId, client.clientId);
  }

  return async (client, params, { jkt, spend }) => {
    const code = requiredParam(params, 'code');
    if (!mayUseGrant(client, 'authorization_code')) throw new GatewayError(400, 'unauthorized_client', 'This client is not registered for the authorization_code grant');
    const record = await deps.codes.peek(code);
    if (!record) {
      // Unknown, expired — or redeemed already: then, presented by its own client, what it issued is revoked.
      await replayed(code, client, params, jkt);
      throw invalidGrant(REDEEMED);
    }
    // Checked before the code is consumed, so a wrong guess cannot burn a legitimate client's code.
    if (record.clientId !== client.clientId) throw invalidGrant('The authorization code was issued to another client');
    const redirectUri = params.get('redirect_uri');
    if (record.redirectUriSent ? redirectUri !== record.redirectUri : redirectUri !== undefined && redirectUri !== record.redirectUri) {
      throw invalidGrant('redirect_uri does not match the authorization request');
    }
    if (!pkceVerifierMatches(params.get('code_verifier'), record.codeChallenge)) throw invalidGrant('The PKCE code_verifier does not match');
    checkCodeKey(record.dpopJkt, jkt);
    const resource = params.get('resource');
    if (resource !== undefined && resource !== record.resource) throw new GatewayError(400, 'invalid_target', 'resource does not match the authorization request');
    // The request is valid: its proof is spent before the code is.
    await spend(record.subject);

    // Marked before the take: a concurrent redemption that finds the code already gone
    // (on this replica or another) still learns its grant, and revokes it.
    await deps.codes.markRedeemed(code, record);
    const taken = await deps.codes.take(code);
    if (!taken) {
      // Another redemption, by this client with this verifier and key, won the race: that is a replay too.
      await revokeForReplay(record.grantId, client.clientId);
      throw invalidGrant(REDEEMED);
    }
    // A reload between /authorize and now may have withdrawn the resource or a scope.
    const scopes = resolvedOrThrow(stillGrantable(ctx, client, taken.resource, taken.scopes));
    // A public client's refresh tokens are bound to its DPoP key (RFC 9449 §5): a stolen one is useless without the key.
    const refreshKey = jkt !== undefined && !isConfidential(client) ? { jkt } : {};
    const grant: GrantInfo = { grantId: taken.grantId, clientId: client.clientId, subject: taken.subject, scopes, resource: taken.resource, ...refreshKey };
    const refreshToken = mayUseGrant(client, 'refresh_token') ? await deps.grants.startFamily(grant) : undefined;
    return issueTokens(ctx, deps.clients, { grantType: 'authorization_code', client, grant, scopes, refreshToken, jkt });
  };
};
