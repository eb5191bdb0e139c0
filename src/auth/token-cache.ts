// Verified tokens, so a client's burst costs one signature check or one
// introspection call. Keyed by the token's hash and the route's resource
// (the audience check is per route); an entry never outlives the token's exp.
// Only successes are cached: a failure may be transient (503) and an invalid
// token is cheap to refuse again.
import { LRUCache } from 'lru-cache';
import { sha256Base64Url } from './hash.js';
import type { AuthContext } from './principal.js';

export interface CacheHooks {
  onHit?: () => void;
  onMiss?: () => void;
}

export class TokenCache {
  private readonly entries: LRUCache<string, AuthContext>;
  /** Concurrent requests with the same token share one verification. */
  private readonly inFlight = new Map<string, Promise<AuthContext>>();

  constructor(maxEntries = 10_000) {
    this.entries = new LRUCache({ max: maxEntries });
  }

  async verify(token: string, resource: string, maxTtlMs: number, verify: (token: string) => Promise<AuthContext>, hooks: CacheHooks = {}): Promise<AuthContext> {
    const key = `${sha256Base64Url(token)} ${resource}`;
    const cached = this.entries.get(key);
    // Checked against the wall clock too, whatever the LRU's own timer says.
    if (cached && cached.expiresAt * 1000 > Date.now()) {
      hooks.onHit?.();
      return cached;
    }
    hooks.onMiss?.();
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = verify(token)
        .then((auth) => this.store(key, auth, maxTtlMs))
        .finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    return pending;
  }

  private store(key: string, auth: AuthContext, maxTtlMs: number): AuthContext {
    // Frozen: one object is handed to many requests.
    const shared = Object.freeze({ ...auth, scopes: Object.freeze([...auth.scopes]) as string[] });
    const ttl = Math.min(maxTtlMs, auth.expiresAt * 1000 - Date.now());
    if (ttl >= 1) this.entries.set(key, shared, { ttl: Math.floor(ttl) });
    else this.entries.delete(key);
    return shared;
  }
}
