// The credential swap: what the upstream receives instead of the client's
// token. One implementation per `upstream_auth` kind, built once per route.
import type { JWTPayload } from 'jose';
import type { AuthContext } from '../auth/principal.js';
import type { Store } from '../store/store.js';

export interface UpstreamCredential {
  /** Headers to add to the upstream request (lower-case names). */
  headersFor(auth: AuthContext, signal?: AbortSignal): Promise<Record<string, string>> | Record<string, string>;
}

/** Signs a JWT with the gateway's own key (ES256); the signer sets `alg` and `kid`. */
export interface JwtSigner {
  sign(payload: JWTPayload, options: { typ: string }): Promise<string>;
}

/** The built-in AS's store of users' third-party IdP tokens (refreshed when expired). */
export interface IdpTokenSource {
  accessTokenFor(auth: AuthContext): Promise<string>;
}

export interface UpstreamCredentialDeps {
  /** The route's upstream URL: the default audience. */
  upstream: string;
  /** Reserved for credentials shared across replicas; the caches are in memory for now. */
  store: Store;
  /** The gateway's public URL: `iss` of `signed` credentials. */
  publicUrl?: string;
  signer?: JwtSigner;
  idpTokens?: IdpTokenSource;
  /** Time limit for one token endpoint request; default 10 s. */
  tokenEndpointTimeoutMs?: number;
}
