// The gateway as an OAuth client of a third party's token endpoint
// (client_credentials, token exchange), through oauth4webapi.
import * as oauth from 'oauth4webapi';

export interface TokenEndpointOptions {
  tokenEndpoint: string;
  clientId: string;
  clientSecret: string;
  timeoutMs: number;
}

export interface ObtainedToken {
  accessToken: string;
  /** When to stop using it (ms since the epoch): shortly before it expires. */
  refreshAt: number;
}

// Without `expires_in` the lifetime is unknown: reuse it briefly rather than never or forever.
const UNKNOWN_LIFETIME_MS = 60_000;
const MAX_REFRESH_MARGIN_MS = 30_000;

/** Replace a token 30 s before it expires, or at 90% of its life when that is shorter. */
export function refreshAt(now: number, expiresInSeconds: number | undefined): number {
  if (expiresInSeconds === undefined) return now + UNKNOWN_LIFETIME_MS;
  const lifetime = expiresInSeconds * 1000;
  return now + lifetime - Math.min(MAX_REFRESH_MARGIN_MS, lifetime / 10);
}

export class TokenEndpoint {
  // oauth4webapi wants AS metadata; `issuer` only matters for ID tokens and
  // JWT client assertions, neither of which is used here.
  readonly #as: oauth.AuthorizationServer;
  readonly #client: oauth.Client;
  readonly #auth: oauth.ClientAuth;
  readonly #insecure: boolean;
  readonly #timeoutMs: number;

  constructor(options: TokenEndpointOptions) {
    const url = new URL(options.tokenEndpoint);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`token endpoint must be http(s): ${options.tokenEndpoint}`);
    if (!options.clientId || !options.clientSecret) throw new Error('token endpoint client_id and client_secret are required');
    if (!(options.timeoutMs > 0)) throw new Error('token endpoint timeout must be positive');
    this.#as = { issuer: url.href, token_endpoint: url.href };
    this.#client = { client_id: options.clientId };
    this.#auth = oauth.ClientSecretBasic(options.clientSecret);
    // Operators may choose http (warned about at config load); oauth4webapi refuses it otherwise.
    this.#insecure = url.protocol === 'http:';
    this.#timeoutMs = options.timeoutMs;
  }

  async clientCredentials(parameters: Record<string, string>): Promise<ObtainedToken> {
    const response = await oauth.clientCredentialsGrantRequest(this.#as, this.#client, this.#auth, parameters, this.#requestOptions());
    return this.#obtained(await oauth.processClientCredentialsResponse(this.#as, this.#client, response));
  }

  async grant(grantType: string, parameters: Record<string, string>): Promise<ObtainedToken> {
    const response = await oauth.genericTokenEndpointRequest(this.#as, this.#client, this.#auth, grantType, parameters, this.#requestOptions());
    return this.#obtained(await oauth.processGenericTokenEndpointResponse(this.#as, this.#client, response));
  }

  #requestOptions(): oauth.TokenEndpointRequestOptions {
    return { signal: AbortSignal.timeout(this.#timeoutMs), [oauth.allowInsecureRequests]: this.#insecure };
  }

  #obtained(result: oauth.TokenEndpointResponse): ObtainedToken {
    // A DPoP-bound token would need a proof on every upstream request: not supported.
    if (result.token_type !== 'bearer') throw new Error(`unsupported token_type ${result.token_type}`);
    return { accessToken: result.access_token, refreshAt: refreshAt(Date.now(), result.expires_in) };
  }
}
