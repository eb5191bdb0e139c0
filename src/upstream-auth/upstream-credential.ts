// The credential swap: what the upstream receives instead of the client's
// token. One implementation per `upstream_auth` kind, built once per route.
import type { JWTPayload } from 'jose';
import type { AuthContext } from '../auth/principal.js';
import type { Store } from '../store/store.js';

export interface UpstreamCredential {
  /** Headers to add to the upstream request (lower-case names). */
  headersFor(auth: AuthContext, signal?: AbortSignal): Promise<Record<string, string>> | Record<string, string>;
  /** The upstream answered 401 to `injected`: renew it once (the route then asks headersFor again and retries once). */
  rejected?(auth: AuthContext, injected: Readonly<Record<string, string>>): Promise<void>;
}

/** Signs a JWT with the gateway's own key (ES256); the signer sets `alg` and `kid`. */
export interface JwtSigner {
  sign(payload: JWTPayload, options: { typ: string }): Promise<string>;
}

/** The built-in AS's store of users' third-party IdP tokens (refreshed when expired). */
export interface IdpTokenSource {
  accessTokenFor(auth: AuthContext): Promise<string>;
}

/**
 * Users' own grants at a route's upstream AS (`user_oauth`), kept by the
 * built-in AS: the access token of this principal's grant for this route,
 * refreshed when due; throws UpstreamAccountRequired when there is none.
 */
export interface UpstreamAccountSource {
  accessTokenFor(auth: AuthContext, signal?: AbortSignal): Promise<string>;
  /** Synchronously, the token accessTokenFor would give when it needs no store read, refresh or wait; else undefined. */
  keptAccessTokenFor?(auth: AuthContext): string | undefined;
  /** The upstream refused the token just sent (401): refresh once, or forget the grant. */
  refused(auth: AuthContext, token: string): Promise<void>;
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
  /** This route's users' upstream grants (`user_oauth`). */
  upstreamAccounts?: UpstreamAccountSource;
  /** Time limit for one token endpoint request; default 10 s. */
  tokenEndpointTimeoutMs?: number;
}
