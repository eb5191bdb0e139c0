// The gateway as an OAuth 2.0 client of an IdP that speaks no OpenID Connect
// (GitHub): configured endpoints instead of discovery, authorization code +
// PKCE (S256) + state, the code redeemed with client_secret_post, and the user
// read from the user endpoint with the access token (no ID token, so no
// nonce). Through oauth4webapi, as the oidc client: every request has a
// deadline and follows no redirect; a token answer without an access token
// (GitHub answers its errors with 200 and an `error` member) is an error.
// Errors are the oidc client's, and say nothing the IdP sent back.
import * as oauth from 'oauth4webapi';
import { readBoundedText } from '../helpers/request-body.js';
import { IdpAuthorizationError, InvalidCallbackError, sanitized } from './oidc-client.js';

export interface OAuth2ClientOptions {
  authorizationEndpoint: string;
  tokenEndpoint: string;
  userinfoEndpoint: string;
  clientId: string;
  clientSecret: string;
  scopes: readonly string[];
  /** The gateway's callback, registered at the IdP. */
  redirectUri: string;
  /** Added to every authorization request; config load refused the names the gateway sets itself. */
  extraAuthorizeParams: Readonly<Record<string, string>>;
  /** Deadline of one request to the IdP; default 10 s. */
  timeoutMs?: number;
}

const DEFAULT_TIMEOUT_MS = 10_000;
/** A user object is a few KiB (GitHub's: about 1.5); more is not an answer the gateway reads. */
const MAX_USER_BYTES = 64 * 1024;

export class OAuth2Client {
  /**
   * No discovery: the endpoints as configured. `issuer` is the authorization
   * endpoint's origin, only so that a callback carrying RFC 9207 `iss` must
   * name that origin (GitHub sends none).
   */
  readonly #server: oauth.AuthorizationServer;
  readonly #client: oauth.Client;
  readonly #auth: oauth.ClientAuth;
  readonly #options: OAuth2ClientOptions;
  readonly #insecure: boolean;

  constructor(options: OAuth2ClientOptions) {
    const endpoints = [options.authorizationEndpoint, options.tokenEndpoint, options.userinfoEndpoint].map((e) => new URL(e));
    if (endpoints.some((e) => e.protocol !== 'https:' && e.protocol !== 'http:')) throw new Error('the oauth2 login endpoints must be http(s) URLs');
    if (!options.clientId || !options.clientSecret) throw new Error('the oauth2 login needs client_id and client_secret');
    this.#server = {
      issuer: new URL(options.authorizationEndpoint).origin,
      authorization_endpoint: options.authorizationEndpoint,
      token_endpoint: options.tokenEndpoint,
      userinfo_endpoint: options.userinfoEndpoint,
    };
    this.#client = { client_id: options.clientId };
    this.#auth = oauth.ClientSecretPost(options.clientSecret);
    this.#options = options;
    // Operators may choose an http IdP (warned about at config load); oauth4webapi refuses it otherwise.
    this.#insecure = endpoints.some((e) => e.protocol === 'http:');
  }

  /** The authorization request to send the browser to. */
  async authorizationUrl(state: string, codeVerifier: string): Promise<URL> {
    const url = new URL(this.#options.authorizationEndpoint);
    // First, so that the gateway's own parameters below always win.
    for (const [name, value] of Object.entries(this.#options.extraAuthorizeParams)) url.searchParams.set(name, value);
    url.searchParams.set('client_id', this.#client.client_id);
    url.searchParams.set('redirect_uri', this.#options.redirectUri);
    url.searchParams.set('response_type', 'code');
    if (this.#options.scopes.length > 0) url.searchParams.set('scope', this.#options.scopes.join(' '));
    url.searchParams.set('state', state);
    url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(codeVerifier));
    url.searchParams.set('code_challenge_method', 'S256');
    return url;
  }

  /** Checks `state` (and `iss` when present); IdpAuthorizationError for an error response, InvalidCallbackError for anything else wrong. */
  validateCallback(callback: URLSearchParams, state: string): URLSearchParams {
    try {
      return oauth.validateAuthResponse(this.#server, this.#client, callback, state);
    } catch (err) {
      if (err instanceof oauth.AuthorizationResponseError) throw new IdpAuthorizationError(err.error);
      throw new InvalidCallbackError((err as Error).message);
    }
  }

  /** Redeems the code, then reads the user endpoint with the access token: the user JSON object. Throws IdpRequestError. */
  async user(validated: URLSearchParams, codeVerifier: string): Promise<Record<string, unknown>> {
    return sanitized(this.#user(validated, codeVerifier));
  }

  async #user(validated: URLSearchParams, codeVerifier: string): Promise<Record<string, unknown>> {
    const exchange = await oauth.authorizationCodeGrantRequest(this.#server, this.#client, this.#auth, validated, this.#options.redirectUri, codeVerifier, this.#requestOptions());
    const tokens = await oauth.processAuthorizationCodeResponse(this.#server, this.#client, exchange);
    if (tokens.token_type !== 'bearer') throw new Error(`the identity provider issued an unsupported token_type ${tokens.token_type}`);
    const headers = new Headers({ accept: 'application/json' });
    const response = await oauth.protectedResourceRequest(tokens.access_token, 'GET', new URL(this.#options.userinfoEndpoint), headers, null, this.#requestOptions());
    if (response.status !== 200) {
      await response.body?.cancel();
      throw new Error(`the user endpoint answered ${response.status}`);
    }
    let user: unknown;
    try {
      user = JSON.parse(await readBoundedText(response, MAX_USER_BYTES));
    } catch (err) {
      throw new Error(`the user endpoint's answer is not a JSON object of at most ${MAX_USER_BYTES} bytes`, { cause: err });
    }
    if (typeof user !== 'object' || user === null || Array.isArray(user)) throw new Error('the user endpoint did not answer a JSON object');
    return user as Record<string, unknown>;
  }

  #requestOptions() {
    return { signal: AbortSignal.timeout(this.#options.timeoutMs ?? DEFAULT_TIMEOUT_MS), [oauth.allowInsecureRequests]: this.#insecure };
  }
}
