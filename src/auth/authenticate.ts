// The authentication step of a protected route: bearer (or DPoP) token →
// verified context → the route's required scopes. Tool-level rules come later (policy/).
import type { RouteConfig } from '../config/types.js';
import { insufficientScope, missingToken } from '../errors/gateway-error.js';
import { authorizationHeader, credentialsOf, isDpopScheme } from './bearer.js';
import { asDpopRefusal, bearerRefused, checkBearerUse, checkDpopUse, type DpopChecks } from './dpop-binding.js';
import type { AuthContext } from './principal.js';
import type { TokenVerifier } from './verifier.js';

export interface AuthenticatedRequest {
  rawHeaders: readonly string[];
  /** The client connection: a token verified on it is recalled for its next request. */
  socket: object;
  /** Checked against a DPoP proof's `htm`. */
  method?: string;
}

/**
 * The verified context, synchronously when this connection's previous
 * request presented the same Bearer Authorization header (the keep-alive
 * common case) or the token is in the verifier's cache, else a promise.
 * Throws or rejects with a GatewayError. `dpopChecks`: the store's one-use
 * check of DPoP proofs and the gateway's nonces; without it (or with
 * `dpop: off`) the DPoP scheme is unknown here. A DPoP request is always a promise: its proof is checked on
 * every request, never recalled or cached.
 */
export function authenticate(route: RouteConfig, verifier: TokenVerifier, req: AuthenticatedRequest, search: string, dpopChecks?: DpopChecks): AuthContext | Promise<AuthContext> {
  const header = authorizationHeader(req.rawHeaders, search);
  if (header === undefined) throw missingToken(route.requiredScopes);
  const dpop = dpopChecks && route.dpop && { config: route.dpop, checks: dpopChecks };
  const recalled = verifier.recall?.(req.socket, header);
  if (recalled !== undefined) {
    // A recalled DPoP token still needs this request's own proof.
    if (dpop && isDpopScheme(header)) return checkDpopUse(dpop.config, dpop.checks, req, recalled).then((auth) => withRequiredScopes(route, auth)).catch(rethrowAsDpop);
    return withRequiredScopes(route, checkBearerUse(route.dpop, recalled));
  }
  const credentials = credentialsOf(header, dpop !== undefined);
  // Another scheme (`Basic`, GitHub's `token`) counts as no token; the description says why.
  if (credentials === undefined) throw missingToken(route.requiredScopes, 'A bearer token is required; the Authorization header uses another scheme');
  const seenOn = { connection: req.socket, header };
  if (!credentials.dpop || !dpop) {
    // Refused before any verification: no Bearer token can pass here.
    if (route.dpop?.required) throw bearerRefused();
    // Synchronous too when another connection verified this token before (many users over a few connections).
    const verified = verifier.verifyCached ? verifier.verifyCached(credentials.token, seenOn) : verifier.verify(credentials.token, seenOn);
    if (verified instanceof Promise) return verified.then((auth) => admitBearer(route, auth));
    return admitBearer(route, verified);
  }
  // Inside the chain, so a synchronous refusal gets the DPoP challenge too.
  return Promise.resolve()
    .then(() => (verifier.verifyCached ? verifier.verifyCached(credentials.token, seenOn) : verifier.verify(credentials.token, seenOn)))
    .then((auth) => checkDpopUse(dpop.config, dpop.checks, req, auth))
    .then((auth) => withRequiredScopes(route, auth))
    .catch(rethrowAsDpop);
}

function rethrowAsDpop(err: unknown): never {
  throw asDpopRefusal(err);
}

function admitBearer(route: RouteConfig, auth: AuthContext): AuthContext {
  return withRequiredScopes(route, checkBearerUse(route.dpop, auth));
}

function withRequiredScopes(route: RouteConfig, auth: AuthContext): AuthContext {
  const required = route.requiredScopes;
  // Indexed: this runs on every request.
  for (let i = 0; i < required.length; i++) {
    if (!auth.scopes.includes(required[i]!)) {
      throw insufficientScope('The token does not grant the scopes this resource requires', route.requiredScopes);
    }
  }
  return auth;
}
