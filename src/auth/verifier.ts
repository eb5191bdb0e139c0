// What a token verifier is: the contract every kind (external JWT,
// introspection, the built-in AS) meets, and the cache wraps. Types only, so
// the verifiers and their factory (create-token-verifier.ts) all import it
// without a circle.
import type { RouteConfig } from '../config/types.js';
import type { GatewayError } from '../errors/gateway-error.js';
import type { AuthContext } from './principal.js';
import type { SeenOn } from './token-cache.js';

export interface TokenVerifier {
  /**
   * Resolves with the verified context; rejects with a GatewayError (401
   * invalid_token, 503 temporarily_unavailable). `seenOn`: remember the
   * result for the next request on that connection (see recall).
   * `tokenHash`: sha256Base64Url(token) when the caller has it already (the
   * cache: its key), so a token is hashed once per request.
   */
  verify(token: string, seenOn?: SeenOn, tokenHash?: string): Promise<AuthContext>;
  /**
   * As verify, but synchronous when the cache already holds the token: a
   * token verified on one connection costs no promise on another. Throws or
   * rejects with the same errors. Only the cached verifier has one.
   */
  verifyCached?(token: string, seenOn?: SeenOn): AuthContext | Promise<AuthContext>;
  /**
   * Synchronously, the context verified for this exact Authorization header
   * on this connection while the cache still trusts it; else undefined.
   */
  recall?(connection: object, header: string): AuthContext | undefined;
  /**
   * Synchronously, on every request after verify or recall (cached results
   * included): the error for a context that may no longer be used (a revoked
   * grant), else undefined. Only verifiers whose tokens can be revoked have one.
   */
  usable?(auth: AuthContext): GatewayError | undefined;
}

/** Supplied by the built-in authorization server: verifies the tokens it signs for a route. */
export type BuiltinVerifierFactory = (route: RouteConfig) => TokenVerifier;
