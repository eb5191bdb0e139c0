// `token_exchange` (RFC 8693): the client's token is the subject, exchanged at
// a configured token endpoint for one whose audience is the upstream. Results
// are cached per subject token, never past its expiry or the new token's.
import { LRUCache } from 'lru-cache';
import type { AuthContext } from '../auth/principal.js';
import { hashKeyPart } from '../store/key-names.js';
import type { UpstreamCredential } from './upstream-credential.js';
import { TokenEndpoint, type TokenEndpointOptions } from './token-endpoint.js';
import { untilAborted, upstreamCredentialFailed } from './credential-error.js';

export interface TokenExchangeOptions extends TokenEndpointOptions {
  audience: string;
  scopes: string[];
  /** Cached exchanged tokens (one per live subject token). */
  maxCachedTokens?: number;
}

const GRANT_TYPE = 'urn:ietf:params:oauth:grant-type:token-exchange';
const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

export function tokenExchangeCredential(options: TokenExchangeOptions): UpstreamCredential {
  if (!options.audience) throw new Error('token_exchange needs an audience');
  const endpoint = new TokenEndpoint(options);
  const scope = options.scopes.join(' ');
  // Entries carry their own deadline; the LRU only bounds the count.
  const cache = new LRUCache<string, { headers: Record<string, string>; until: number }>({ max: options.maxCachedTokens ?? 10_000 });
  const inFlight = new Map<string, Promise<Record<string, string>>>();

  const exchange = async (key: string, auth: AuthContext): Promise<Record<string, string>> => {
    try {
      const parameters: Record<string, string> = {
        subject_token: auth.token,
        subject_token_type: ACCESS_TOKEN_TYPE,
        audience: options.audience,
      };
      if (scope) parameters.scope = scope;
      const token = await endpoint.grant(GRANT_TYPE, parameters);
      const headers = Object.freeze({ authorization: `Bearer ${token.accessToken}` });
      // An expired subject token must not keep working through the cache.
      cache.set(key, { headers, until: Math.min(token.refreshAt, auth.expiresAt * 1000) });
      return headers;
    } catch (err) {
      throw upstreamCredentialFailed(err);
    } finally {
      inFlight.delete(key);
    }
  };

  return {
    headersFor(auth, signal) {
      // auth.tokenHash is sha256 of the subject token: the raw token is never a key.
      const key = hashKeyPart(JSON.stringify([auth.tokenHash, options.clientId, scope, options.audience]));
      const hit = cache.get(key);
      if (hit && Date.now() < hit.until) return hit.headers;
      let pending = inFlight.get(key);
      if (!pending) {
        pending = exchange(key, auth);
        inFlight.set(key, pending);
      }
      return untilAborted(pending, signal);
    },
  };
}
