// The authentication step of a protected route: bearer token → verified
// context → the route's required scopes. Tool-level rules come later (policy/).
import type { RouteConfig } from '../config/types.js';
import { insufficientScope, missingToken } from '../errors/gateway-error.js';
import { authorizationHeader, bearerTokenOf } from './bearer.js';
import type { AuthContext } from './principal.js';
import type { TokenVerifier } from './verifier.js';

export interface AuthenticatedRequest {
  rawHeaders: readonly string[];
  /** The client connection: a token verified on it is recalled for its next request. */
  socket: object;
}

/**
 * The verified context, synchronously when this connection's previous
 * request presented the same Authorization header (the keep-alive common
 * case) or the token is in the verifier's cache, else a promise. Throws or
 * rejects with a GatewayError.
 */
export function authenticate(route: RouteConfig, verifier: TokenVerifier, req: AuthenticatedRequest, search: string): AuthContext | Promise<AuthContext> {
  const header = authorizationHeader(req.rawHeaders, search);
  if (header === undefined) throw missingToken(route.requiredScopes);
  const recalled = verifier.recall?.(req.socket, header);
  if (recalled !== undefined) return withRequiredScopes(route, recalled);
  const token = bearerTokenOf(header);
  // Another scheme (`Basic`, GitHub's `token`) counts as no token; the description says why.
  if (token === undefined) throw missingToken(route.requiredScopes, 'A bearer token is required; the Authorization header uses another scheme');
  // Synchronous too when another connection verified this token before (many users over a few connections).
  const seenOn = { connection: req.socket, header };
  const verified = verifier.verifyCached ? verifier.verifyCached(token, seenOn) : verifier.verify(token, seenOn);
  return verified instanceof Promise ? verified.then((auth) => withRequiredScopes(route, auth)) : withRequiredScopes(route, verified);
}

function withRequiredScopes(route: RouteConfig, auth: AuthContext): AuthContext {
  for (const scope of route.requiredScopes) {
    if (!auth.scopes.includes(scope)) {
      throw insufficientScope('The token does not grant the scopes this resource requires', route.requiredScopes);
    }
  }
  return auth;
}
