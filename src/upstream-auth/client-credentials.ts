// `client_credentials`: the gateway's own client at the upstream's AS. One
// token serves every request until shortly before it expires; concurrent
// callers share a single in-flight request.
import type { UpstreamCredential } from './upstream-credential.js';
import { TokenEndpoint, type ObtainedToken, type TokenEndpointOptions } from './token-endpoint.js';
import { untilAborted, upstreamCredentialFailed } from './credential-error.js';

export interface ClientCredentialsOptions extends TokenEndpointOptions {
  scopes: string[];
  /** RFC 8707 resource indicator, when the upstream AS wants one. */
  resource?: string;
}

export function clientCredentialsCredential(options: ClientCredentialsOptions): UpstreamCredential {
  const endpoint = new TokenEndpoint(options);
  const parameters: Record<string, string> = {};
  if (options.scopes.length > 0) parameters.scope = options.scopes.join(' ');
  if (options.resource) parameters.resource = options.resource;

  let cached: { token: ObtainedToken; headers: Record<string, string> } | undefined;
  let inFlight: Promise<Record<string, string>> | undefined;

  const fetchToken = async (): Promise<Record<string, string>> => {
    try {
      const token = await endpoint.clientCredentials(parameters);
      const headers = Object.freeze({ authorization: `Bearer ${token.accessToken}` });
      cached = { token, headers };
      return headers;
    } catch (err) {
      throw upstreamCredentialFailed(err);
    } finally {
      inFlight = undefined;
    }
  };

  return {
    headersFor(_auth, signal) {
      if (cached && Date.now() < cached.token.refreshAt) return cached.headers;
      inFlight ??= fetchToken();
      return untilAborted(inFlight, signal);
    },
  };
}
