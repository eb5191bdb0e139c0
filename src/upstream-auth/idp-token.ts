// `idp_token`: the user's own third-party IdP access token, kept (and
// refreshed) by the built-in AS; it exists only with an OIDC login.
import { translateKnown } from '../errors/translate.js';
import { upstreamCredentialFailed } from './credential-error.js';
import type { IdpTokenSource, UpstreamCredential } from './upstream-credential.js';

export function idpTokenCredential(idpTokens: IdpTokenSource | undefined): UpstreamCredential {
  if (!idpTokens) throw new Error('idp_token needs the built-in authorization server with an OIDC login');
  return {
    async headersFor(auth) {
      try {
        return { authorization: `Bearer ${await idpTokens.accessTokenFor(auth)}` };
      } catch (err) {
        // The AS's own answers (401 when the grant or its IdP session is gone) and a store that is down
        // are the translator's; anything else is the IdP unreachable or refusing for another reason.
        throw translateKnown(err, { storeUnavailable: 'The token store is temporarily unavailable' }) ?? upstreamCredentialFailed(err);
      }
    },
  };
}
