// The authentication step of a protected route: bearer token → verified
// context → the route's required scopes. Tool-level rules come later (policy/).
import type { RouteConfig } from '../config/types.js';
import { insufficientScope, missingToken } from '../errors/gateway-error.js';
import { extractBearerToken } from './bearer.js';
import type { AuthContext } from './principal.js';
import type { TokenVerifier } from './verifier.js';

export async function authenticate(route: RouteConfig, verifier: TokenVerifier, rawHeaders: string[], search: string): Promise<AuthContext> {
  const token = extractBearerToken(rawHeaders, search);
  if (token === undefined) throw missingToken(route.requiredScopes);
  const auth = await verifier.verify(token);
  const granted = new Set(auth.scopes);
  if (!route.requiredScopes.every((scope) => granted.has(scope))) {
    throw insufficientScope('The token does not grant the scopes this resource requires', route.requiredScopes);
  }
  return auth;
}
