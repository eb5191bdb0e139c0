// The gateway as an OpenID Connect client of the third-party IdP, with its
// own static client id (spec §4.7), entirely through oauth4webapi: discovery
// with the issuer checked, authorization code + PKCE (S256) + state + nonce,
// the `iss` authorization response parameter (RFC 9207) whenever the IdP
// advertises it, client_secret_basic or client_secret_post as the IdP
// advertises, ID token validation (signature against the IdP's JWKS, iss,
// aud, exp, nonce), and refresh. Every request has a deadline and follows no
// redirect.
import { createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose';
import * as oauth from 'oauth4webapi';
import { ASYMMETRIC_JWS_ALGORITHMS } from '../../config/jws-algorithms.js';
import { refreshAt } from '../../upstream-auth/token-endpoint.js';

export interface OidcClientOptions {
  issuer: string;
  clientId: string;
  /** Confidential client (spec §4.7); without one the client authenticates with PKCE only (`none`). */
  clientSecret?: string;
  scopes: readonly string[];
  /** The gateway's callback, registered at the IdP. */
  redirectUri: string;
  /** Deadline of one request to the IdP; default 10 s. */
  timeoutMs?: number;
  /** Added to every authorization request; config load refused the names the gateway sets itself. */
  extraAuthorizeParams?: Readonly<Record<string, string>>;
}

/** What the gateway keeps of an IdP token response. */
export interface IdpTokenSet {
  accessToken: string;
  /** ms since the epoch when to stop using the access token (from `expires_in`, else UNKNOWN_IDP_TOKEN_LIFETIME_SECONDS); undefined only in records written before that rule, which count as due. */
  refreshAt?: number;
  refreshToken?: string;
  scope?: string;
  /** ID token `sid` and `exp` (seconds), when there was one. */
  sid?: string;
  idTokenExp?: number;
}

export interface IdpSignIn {
  /** The ID token's `sub` at `issuer`: what logout tokens and refreshed ID tokens name. */
  subject: string;
  issuer: string;
  /** Every claim of the validated ID token (the configured subject claim is read from them). */
  claims: Readonly<Record<string, unknown>>;
  tokens: IdpTokenSet;
}

/** Of one authorization request to the IdP: derived from its state (IdpRequestSecretsDeriver), never stored. */
export interface IdpRequestSecrets {
  codeVerifier: string;
  nonce: string;
}

/** The IdP answered the authorization request with an error (`access_denied`, ...). */
export class IdpAuthorizationError extends Error {
  override readonly name = 'IdpAuthorizationError';
  constructor(readonly error: string) {
    super(`the identity provider answered ${error}`);
  }
}

/** The IdP refused the refresh token (`invalid_grant`): the user's session there is over. */
export class IdpSessionEndedError extends Error {
  override readonly name = 'IdpSessionEndedError';
}

/** The callback is not a valid answer to our request (a wrong or missing `iss`, a repeated parameter). */
export class InvalidCallbackError extends Error {
  override readonly name = 'InvalidCallbackError';
}

/**
 * A request to the IdP failed. The message says why, without anything the
 * IdP sent back (oauth4webapi's errors carry the response body, which may
 * hold tokens), so it is safe to log.
 */
export class IdpRequestError extends Error {
  override readonly name = 'IdpRequestError';
  constructor(
    message: string,
    /** Unreachable or timed out (rather than an answer the gateway refused). */
    readonly network: boolean,
  ) {
    super(message);
  }
}

/** OpenID Connect Back-Channel Logout 1.0 §2.4: the one member `events` must hold. */
const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';
/** A logout token is acted on this soon after its `iat`, and its `jti` remembered this long. */
export const LOGOUT_TOKEN_MAX_AGE_SECONDS = 300;
const LOGOUT_TOKEN_CLOCK_SKEW_SECONDS = 30;
/** Without `expires_in` the IdP's access token is assumed to live this long (then refreshed), never forever. */
const UNKNOWN_IDP_TOKEN_LIFETIME_SECONDS = 60;

/** What a valid logout token says: which IdP session (`sid`) or user (`sub`) ended. At least one is present. */
export interface LogoutClaims {
  issuer: string;
  sid?: string;
  sub?: string;
  jti: string;
}

/** The logout token is not one the gateway may act on (OIDC Back-Channel Logout §2.6). Safe to log and to answer with. */
export class InvalidLogoutTokenError extends Error {
  override readonly name = 'InvalidLogoutTokenError';
}

const DEFAULT_TIMEOUT_MS = 10_000;
/** The IdP's metadata is fetched again after this long (key and endpoint changes). */
const DISCOVERY_TTL_MS = 3600_000;

export class OidcClient {
  readonly issuer: string;
  readonly #issuerUrl: URL;
  readonly #client: oauth.Client;
  readonly #secret: string | undefined;
  readonly #scope: string;
  readonly #redirectUri: string;
  readonly #extraAuthorizeParams: Readonly<Record<string, string>>;
  readonly #timeoutMs: number;
  readonly #insecure: boolean;
  /** oauth4webapi keeps the IdP's JWKS here between ID token validations. */
  readonly #jwksCache: oauth.JWKSCacheInput = {};
  /** The IdP's keys for logout tokens (jose keeps them, refetching on an unknown kid with a cooldown). */
  #logoutKeys?: { uri: string; keys: JWTVerifyGetKey };
  #discovered?: { metadata: oauth.AuthorizationServer; auth: oauth.ClientAuth; at: number };
  #discovering?: Promise<{ metadata: oauth.AuthorizationServer; auth: oauth.ClientAuth }>;

  constructor(options: OidcClientOptions) {
    this.#issuerUrl = new URL(options.issuer);
    if (this.#issuerUrl.protocol !== 'https:' && this.#issuerUrl.protocol !== 'http:') throw new Error(`login.issuer must be an http(s) URL: ${options.issuer}`);
    if (!options.clientId) throw new Error('login.client_id is required');
    if (!options.scopes.includes('openid')) throw new Error('login.scopes must include openid: the user is identified by the ID token');
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(timeoutMs > 0)) throw new Error('the IdP request timeout must be positive');
    this.issuer = options.issuer;
    this.#client = { client_id: options.clientId };
    this.#secret = options.clientSecret;
    this.#scope = options.scopes.join(' ');
    this.#redirectUri = options.redirectUri;
    this.#extraAuthorizeParams = options.extraAuthorizeParams ?? {};
    this.#timeoutMs = timeoutMs;
    // Operators may choose an http IdP (warned about at config load); oauth4webapi refuses it otherwise.
    this.#insecure = this.#issuerUrl.protocol === 'http:';
  }

  /**
   * The authorization request to send the browser to (fetches the IdP's
   * metadata first if needed); `resource`: the RFC 8707 resource to ask for.
   */
  async authorizationUrl(state: string, secrets: IdpRequestSecrets, resource?: string): Promise<URL> {
    const { metadata } = await sanitized(this.#metadata());
    if (!metadata.authorization_endpoint) throw new Error('the identity provider has no authorization_endpoint');
    const url = new URL(metadata.authorization_endpoint);
    // First, so that the gateway's own parameters below always win.
    for (const [name, value] of Object.entries(this.#extraAuthorizeParams)) url.searchParams.set(name, value);
    if (resource !== undefined) url.searchParams.set('resource', resource);
    url.searchParams.set('client_id', this.#client.client_id);
    url.searchParams.set('redirect_uri', this.#redirectUri);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('scope', this.#scope);
    url.searchParams.set('state', state);
    url.searchParams.set('nonce', secrets.nonce);
    url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(secrets.codeVerifier));
    url.searchParams.set('code_challenge_method', 'S256');
    return url;
  }

  /**
   * Checks the callback's parameters: `iss` (RFC 9207: present and equal
   * when the IdP advertises it, equal whenever present), `state`, no implicit
   * or hybrid response. Throws IdpAuthorizationError for an error response,
   * and oauth4webapi's OperationProcessingError for anything else wrong.
   */
  async validateCallback(callback: URLSearchParams, state: string): Promise<URLSearchParams> {
    const { metadata } = await sanitized(this.#metadata());
    try {
      return oauth.validateAuthResponse(metadata, this.#client, callback, state);
    } catch (err) {
      if (err instanceof oauth.AuthorizationResponseError) throw new IdpAuthorizationError(err.error);
      throw new InvalidCallbackError((err as Error).message);
    }
  }

  /**
   * Redeems a validated callback's code: the user's identity from the
   * validated ID token, and the IdP's tokens. `resource`: the one the
   * authorization request asked for (RFC 8707 §2.2), if any.
   */
  async redeem(validated: URLSearchParams, secrets: IdpRequestSecrets, resource?: string): Promise<IdpSignIn> {
    return sanitized(this.#redeem(validated, secrets, resource));
  }

  async #redeem(validated: URLSearchParams, secrets: IdpRequestSecrets, resource: string | undefined): Promise<IdpSignIn> {
    const { metadata, auth } = await this.#metadata();
    const options = { ...this.#requestOptions(), ...(resource !== undefined && { additionalParameters: { resource } }) };
    const response = await oauth.authorizationCodeGrantRequest(metadata, this.#client, auth, validated, this.#redirectUri, secrets.codeVerifier, options);
    const result = await oauth.processAuthorizationCodeResponse(metadata, this.#client, response, { expectedNonce: secrets.nonce, requireIdToken: true });
    // Received straight from the token endpoint, the ID token's signature could go unchecked (OIDC Core §3.1.3.7); checked anyway.
    await oauth.validateApplicationLevelSignature(metadata, response, { ...this.#requestOptions(), [oauth.jwksCache]: this.#jwksCache });
    const claims = oauth.getValidatedIdTokenClaims(result);
    if (!claims) throw new Error('the identity provider returned no ID token');
    return { subject: claims.sub, issuer: claims.iss, claims, tokens: tokenSet(result, claims) };
  }

  /** New tokens for `refreshToken`; an ID token in the answer must name `subject`. Throws IdpSessionEndedError on invalid_grant. */
  async refresh(refreshToken: string, subject: string): Promise<IdpTokenSet> {
    return sanitized(this.#refresh(refreshToken, subject));
  }

  async #refresh(refreshToken: string, subject: string): Promise<IdpTokenSet> {
    const { metadata, auth } = await this.#metadata();
    let result: oauth.TokenEndpointResponse;
    try {
      const response = await oauth.refreshTokenGrantRequest(metadata, this.#client, auth, refreshToken, this.#requestOptions());
      result = await oauth.processRefreshTokenResponse(metadata, this.#client, response);
    } catch (err) {
      if (err instanceof oauth.ResponseBodyError && err.error === 'invalid_grant') throw new IdpSessionEndedError('the identity provider refused the refresh token');
      throw err;
    }
    const claims = oauth.getValidatedIdTokenClaims(result);
    // OIDC Core §12.2: a refreshed ID token is about the same user.
    if (claims && claims.sub !== subject) throw new IdpSessionEndedError('the refreshed ID token names another user');
    return { refreshToken, ...tokenSet(result, claims) };
  }

  /**
   * Validates a back-channel logout token as OIDC Back-Channel Logout 1.0
   * §2.6 says: signature by the IdP's JWKS (asymmetric algorithms only),
   * `iss` = the IdP, `aud` = our client id, `iat` present and recent, `exp`
   * if present, `jti` present, `events` holding the back-channel-logout member
   * as an object, `sid` and/or `sub`, and no `nonce` (so an ID token can never
   * pass as one). Replay of the `jti` is the caller's to refuse. Throws
   * InvalidLogoutTokenError, or IdpRequestError when the IdP's metadata or
   * keys cannot be fetched.
   */
  async verifyLogoutToken(token: string): Promise<LogoutClaims> {
    const { metadata } = await sanitized(this.#metadata());
    if (!metadata.jwks_uri) throw new InvalidLogoutTokenError('the identity provider publishes no jwks_uri');
    if (this.#logoutKeys?.uri !== metadata.jwks_uri) {
      this.#logoutKeys = { uri: metadata.jwks_uri, keys: createRemoteJWKSet(new URL(metadata.jwks_uri), { timeoutDuration: this.#timeoutMs }) };
    }
    let payload;
    try {
      ({ payload } = await jwtVerify(token, this.#logoutKeys.keys, {
        issuer: metadata.issuer,
        audience: this.#client.client_id,
        // Asymmetric only: the IdP's JWKS is public.
        algorithms: [...ASYMMETRIC_JWS_ALGORITHMS],
        maxTokenAge: LOGOUT_TOKEN_MAX_AGE_SECONDS,
        clockTolerance: LOGOUT_TOKEN_CLOCK_SKEW_SECONDS,
        requiredClaims: ['iat', 'jti', 'events'],
      }));
    } catch (err) {
      const network = err instanceof Error && (err.name === 'JWKSTimeout' || (err as { code?: string }).code === 'ERR_JWKS_TIMEOUT' || err instanceof TypeError);
      if (network) throw new IdpRequestError(`the identity provider's keys cannot be fetched: ${err.message}`, true);
      throw new InvalidLogoutTokenError(`the logout token is invalid: ${err instanceof Error ? err.message : String(err)}`);
    }
    const events = payload.events;
    const event = typeof events === 'object' && events !== null && !Array.isArray(events) ? (events as Record<string, unknown>)[BACKCHANNEL_LOGOUT_EVENT] : undefined;
    if (typeof event !== 'object' || event === null || Array.isArray(event)) throw new InvalidLogoutTokenError('the logout token has no back-channel logout event');
    if ('nonce' in payload) throw new InvalidLogoutTokenError('a logout token must not have a nonce');
    const sid = nonEmpty(payload.sid);
    const sub = nonEmpty(payload.sub);
    if (!sid && !sub) throw new InvalidLogoutTokenError('the logout token names neither sid nor sub');
    const jti = nonEmpty(payload.jti);
    if (!jti) throw new InvalidLogoutTokenError('the logout token has no jti');
    return { issuer: metadata.issuer, jti, ...(sid && { sid }), ...(sub && { sub }) };
  }

  /** The IdP's metadata (issuer checked), fetched once per hour; a failed fetch is retried on the next call. */
  async #metadata(): Promise<{ metadata: oauth.AuthorizationServer; auth: oauth.ClientAuth }> {
    if (this.#discovered && Date.now() - this.#discovered.at < DISCOVERY_TTL_MS) return this.#discovered;
    this.#discovering ??= this.#discover().finally(() => (this.#discovering = undefined));
    try {
      return await this.#discovering;
    } catch (err) {
      // Stale metadata beats no login at all while the IdP's discovery endpoint hiccups.
      if (this.#discovered) return this.#discovered;
      throw err;
    }
  }

  async #discover(): Promise<{ metadata: oauth.AuthorizationServer; auth: oauth.ClientAuth }> {
    const response = await oauth.discoveryRequest(this.#issuerUrl, { algorithm: 'oidc', ...this.#requestOptions() });
    const metadata = await oauth.processDiscoveryResponse(this.#issuerUrl, response);
    const discovered = { metadata, auth: this.#clientAuth(metadata), at: Date.now() };
    this.#discovered = discovered;
    return discovered;
  }

  /** client_secret_basic unless the IdP advertises only client_secret_post (RFC 8414 default: basic). */
  #clientAuth(metadata: oauth.AuthorizationServer): oauth.ClientAuth {
    if (this.#secret === undefined) return oauth.None();
    const methods = metadata.token_endpoint_auth_methods_supported ?? ['client_secret_basic'];
    if (methods.includes('client_secret_basic')) return oauth.ClientSecretBasic(this.#secret);
    if (methods.includes('client_secret_post')) return oauth.ClientSecretPost(this.#secret);
    throw new Error(`the identity provider supports neither client_secret_basic nor client_secret_post (it lists ${methods.join(', ')})`);
  }

  #requestOptions() {
    return { signal: AbortSignal.timeout(this.#timeoutMs), [oauth.allowInsecureRequests]: this.#insecure };
  }
}

function tokenSet(result: oauth.TokenEndpointResponse, claims: oauth.IDToken | undefined): IdpTokenSet {
  // A DPoP-bound token would need a proof on every upstream request: not supported.
  if (result.token_type !== 'bearer') throw new Error(`the identity provider issued an unsupported token_type ${result.token_type}`);
  return {
    accessToken: result.access_token,
    refreshAt: refreshAt(Date.now(), result.expires_in ?? UNKNOWN_IDP_TOKEN_LIFETIME_SECONDS),
    ...(result.refresh_token !== undefined && { refreshToken: result.refresh_token }),
    ...(result.scope !== undefined && { scope: result.scope }),
    ...(typeof claims?.sid === 'string' && { sid: claims.sid }),
    ...(claims && { idTokenExp: claims.exp }),
  };
}

/** Rethrows anything but our own errors as an IdpRequestError (message only); the oauth2 client shares it. */
export async function sanitized<T>(promise: Promise<T>): Promise<T> {
  try {
    return await promise;
  } catch (err) {
    if (err instanceof IdpSessionEndedError || err instanceof IdpRequestError) throw err;
    const network = err instanceof TypeError || (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError'));
    const code = (err as { code?: unknown }).code;
    const oauthError = err instanceof oauth.ResponseBodyError ? ` (${err.error})` : '';
    throw new IdpRequestError(`${err instanceof Error ? err.message : String(err)}${oauthError}${typeof code === 'string' ? ` [${code}]` : ''}`, network);
  }
}

const nonEmpty = (value: unknown): string | undefined => (typeof value === 'string' && value !== '' ? value : undefined);
