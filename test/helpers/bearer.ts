// The bearer-token rules (RFC 6750 §2), tested through what the gateway calls:
// the token `authenticate` hands the route's verifier for these raw headers and
// this query. undefined: no bearer token (the gateway answers 401 with a
// challenge); a 400 invalid_request is thrown as `authenticate` throws it.
import { authenticate } from '../../src/auth/authenticate.js';
import type { TokenVerifier } from '../../src/auth/verifier.js';
import type { RouteConfig } from '../../src/config/types.js';
import { GatewayError } from '../../src/errors/gateway-error.js';

const ROUTE = { requiredScopes: [] } as unknown as RouteConfig;

export function tokenFromRequest(rawHeaders: readonly string[], search: string): string | undefined {
  let seen: string | undefined;
  const verifier: TokenVerifier = {
    verify: (token) => {
      seen = token;
      return new Promise(() => {}); // never settles: only the token matters here
    },
  };
  try {
    void authenticate(ROUTE, verifier, { rawHeaders, socket: {} }, search);
  } catch (err) {
    if (err instanceof GatewayError && err.status === 401) return undefined;
    throw err;
  }
  return seen;
}
