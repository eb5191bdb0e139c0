// Who made a request, once its token has been verified.

export interface AuthContext {
  issuer: string;
  subject: string;
  /** `client_id` (or `azp`) claim; empty when the token names none. */
  clientId: string;
  scopes: string[];
  /** Seconds since the epoch. */
  expiresAt: number;
  /** All claims (JWT) or the introspection response. */
  claims: Readonly<Record<string, unknown>>;
  /** The raw bearer token: needed for token exchange; never logged or forwarded. */
  token: string;
  /** sha256 of the token, base64url: the key of every cache that holds it. */
  tokenHash: string;
  /**
   * This request's DPoP proof, checked but not yet spent: the route claims its
   * `jti` (dpop-binding.ts `spendDpopProof`) only once policy and rate limits admit the request.
   */
  dpopProof?: { jkt: string; jti: string; iat: number };
}

/** The principal of a request is (issuer, sub, client_id): a stable string for binding sessions. */
export function principalKey(auth: Pick<AuthContext, 'issuer' | 'subject' | 'clientId'>): string {
  return JSON.stringify([auth.issuer, auth.subject, auth.clientId]);
}

/** userKey of frozen contexts (their issuer and subject cannot change), held weakly. */
const userKeys = new WeakMap<object, string>();

/**
 * The user behind a request, (issuer, sub), whatever client it came through:
 * what per-principal caps count (DESIGN.md §8.3), so registering more clients
 * does not multiply a user's share. Sessions stay bound to principalKey.
 */
export function userKey(auth: Pick<AuthContext, 'issuer' | 'subject'>): string {
  // The token cache hands every request of a token one frozen context: its key is made once, not per request.
  if (!Object.isFrozen(auth)) return JSON.stringify([auth.issuer, auth.subject]);
  let key = userKeys.get(auth);
  if (key === undefined) userKeys.set(auth, (key = JSON.stringify([auth.issuer, auth.subject])));
  return key;
}
