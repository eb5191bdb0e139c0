// The credential a route's `upstream_auth` names, built (and its options
// checked) once per configuration load.
import type { UpstreamAuthConfig } from '../config/types.js';
import type { UpstreamCredential, UpstreamCredentialDeps } from './upstream-credential.js';
import { noneCredential } from './none.js';
import { staticCredential } from './static.js';
import { clientCredentialsCredential } from './client-credentials.js';
import { tokenExchangeCredential } from './token-exchange.js';
import { signedCredential } from './signed.js';
import { idpTokenCredential } from './idp-token.js';
import { userOAuthCredential } from './user-oauth.js';

const DEFAULT_TOKEN_ENDPOINT_TIMEOUT_MS = 10_000;

export function createUpstreamCredential(config: UpstreamAuthConfig, deps: UpstreamCredentialDeps): UpstreamCredential {
  const timeoutMs = deps.tokenEndpointTimeoutMs ?? DEFAULT_TOKEN_ENDPOINT_TIMEOUT_MS;
  switch (config.kind) {
    case 'none':
      return noneCredential();
    case 'static':
      return staticCredential(config);
    case 'client_credentials':
      return clientCredentialsCredential({ ...config, timeoutMs });
    case 'token_exchange':
      return tokenExchangeCredential({ ...config, timeoutMs });
    case 'signed':
      if (!deps.signer || !deps.publicUrl) throw new Error('signed upstream_auth needs the gateway signing key (the built-in authorization server)');
      return signedCredential({ issuer: deps.publicUrl, audience: config.audience || deps.upstream, ttlMs: config.ttlMs, signer: deps.signer });
    case 'idp_token':
      return idpTokenCredential(deps.idpTokens);
    case 'user_oauth':
      return userOAuthCredential(deps.upstreamAccounts);
  }
}
