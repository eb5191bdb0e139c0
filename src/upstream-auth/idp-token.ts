// `idp_token`: the user's own third-party IdP access token, kept (and
// refreshed) by the built-in AS; it exists only with an OIDC login.
import { GatewayError, temporarilyUnavailable } from '../errors/gateway-error.js';
import { StoreUnavailableError } from '../store/store.js';
import { upstreamCredentialFailed } from './credential-error.js';
import type { IdpTokenSource, UpstreamCredential } from './upstream-credential.js';

export function idpTokenCredential(idpTokens: IdpTokenSource | undefined): UpstreamCredential {
  if (!idpTokens) throw new Error('idp_token needs the built-in authorization server with an OIDC login');
  return {
    async headersFor(auth) {
      try {
        return { authorization: `Bearer ${await idpTokens.accessTokenFor(auth)}` };
      } catch (err) {
        // The AS's own answers (401 when the grant or its IdP session is gone) pass as they are.
        if (err instanceof GatewayError) throw err;
        if (err instanceof StoreUnavailableError) throw temporarilyUnavailable('The token store is temporarily unavailable', err);
        // The IdP unreachable or refusing for another reason than an ended session.
        throw upstreamCredentialFailed(err);
      }
    },
  };
}
