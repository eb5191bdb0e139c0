// `idp_token`: the user's own third-party IdP access token, kept (and
// refreshed) by the built-in AS; it exists only with an OIDC login.
import { GatewayError } from '../errors/gateway-error.js';
import { upstreamCredentialFailed } from './credential-error.js';
import type { IdpTokenSource, UpstreamCredential } from './upstream-credential.js';

export function idpTokenCredential(idpTokens: IdpTokenSource | undefined): UpstreamCredential {
  if (!idpTokens) throw new Error('idp_token needs the built-in authorization server with an OIDC login');
  return {
    async headersFor(auth) {
      try {
        return { authorization: `Bearer ${await idpTokens.accessTokenFor(auth)}` };
      } catch (err) {
        // The AS's own answers (e.g. 401 when the grant is gone, 503 store down) pass as they are.
        if (err instanceof GatewayError) throw err;
        throw upstreamCredentialFailed(err);
      }
    },
  };
}
