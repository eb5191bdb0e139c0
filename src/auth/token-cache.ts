// Verified tokens, so a client's burst costs one signature check or one
// introspection call. Keyed by the token's hash and the route's resource
// (the audience check is per route); an entry never outlives the token's exp.
// Only successes are cached: a failure may be transient (503) and an invalid
// token is cheap to refuse again.
//
// Each client connection also remembers the last Authorization header it sent
// and the entry it verified to: a client on a keep-alive connection sends the
// same header on every request, and comparing it costs less than parsing,
// hashing and looking it up again. A remembered entry is trusted exactly as
// long as the cache would trust it.
import { LRUCache } from 'lru-cache';
import { sha256Base64Url } from './hash.js';
import type { AuthContext } from './principal.js';

export interface CacheHooks {
  onHit?: () => void;
  onMiss?: () => void;
}

/** Where a token was presented: remembered for the next request on that connection. */
export interface SeenOn {
  /** The client connection (Node's socket): held weakly. */
  connection: object;
  /** The whole Authorization header value, as received. */
  header: string;
}

interface Entry {
  auth: AuthContext;
  /** Epoch ms: the token's exp, or the cache's own bound if sooner. */
  validUntil: number;
}

interface Remembered {
  header: string;
  resource: string;
  entry: Entry;
}

export class TokenCache {
  private readonly entries: LRUCache<string, Entry>;
  /** Concurrent requests with the same token share one verification. */
  private readonly inFlight = new Map<string, Promise<Entry>>();
  private readonly lastOnConnection = new WeakMap<object, Remembered>();

  constructor(maxEntries = 10_000) {
    this.entries = new LRUCache({ max: maxEntries });
  }

  /** The context verified for this exact header on this connection, while still trusted. Synchronous. */
  recall(connection: object, header: string, resource: string, hooks: CacheHooks = {}): AuthContext | undefined {
    const remembered = this.lastOnConnection.get(connection);
    if (remembered === undefined || remembered.header !== header || remembered.resource !== resource) return undefined;
    if (remembered.entry.validUntil <= Date.now()) {
      this.lastOnConnection.delete(connection);
      return undefined;
    }
    hooks.onHit?.();
    return remembered.entry.auth;
  }

  /**
   * The verified context: synchronously when the cache holds the token (the
   * same token on another connection costs one hash and one lookup, no
   * promise), else a promise of its verification, shared by concurrent callers.
   */
  get(
    token: string,
    resource: string,
    maxTtlMs: number,
    verify: (token: string, tokenHash: string) => Promise<AuthContext>,
    hooks: CacheHooks = {},
    seenOn?: SeenOn,
  ): AuthContext | Promise<AuthContext> {
    const tokenHash = sha256Base64Url(token);
    const key = `${tokenHash} ${resource}`;
    const entry = this.entries.get(key);
    // Checked against the wall clock too, whatever the LRU's own timer says.
    if (entry && entry.validUntil > Date.now()) {
      hooks.onHit?.();
      this.remember(seenOn, resource, entry);
      return entry.auth;
    }
    hooks.onMiss?.();
    let pending = this.inFlight.get(key);
    if (!pending) {
      pending = verify(token, tokenHash)
        .then((auth) => this.store(key, auth, maxTtlMs))
        .finally(() => this.inFlight.delete(key));
      this.inFlight.set(key, pending);
    }
    return pending.then((verified) => {
      this.remember(seenOn, resource, verified);
      return verified.auth;
    });
  }

  /** As get, always a promise. */
  async verify(
    token: string,
    resource: string,
    maxTtlMs: number,
    verify: (token: string, tokenHash: string) => Promise<AuthContext>,
    hooks: CacheHooks = {},
    seenOn?: SeenOn,
  ): Promise<AuthContext> {
    return this.get(token, resource, maxTtlMs, verify, hooks, seenOn);
  }

  /** For the connection's next request; only while the entry is trusted. */
  private remember(seenOn: SeenOn | undefined, resource: string, entry: Entry): void {
    if (seenOn && entry.validUntil > Date.now()) {
      this.lastOnConnection.set(seenOn.connection, { header: seenOn.header, resource, entry });
    }
  }

  private store(key: string, auth: AuthContext, maxTtlMs: number): Entry {
    // Frozen: one object is handed to many requests.
    const shared = Object.freeze({ ...auth, scopes: Object.freeze([...auth.scopes]) as string[] });
    const now = Date.now();
    const validUntil = Math.min(now + maxTtlMs, auth.expiresAt * 1000);
    const entry = Object.freeze({ auth: shared, validUntil });
    const ttl = validUntil - now;
    if (ttl >= 1) this.entries.set(key, entry, { ttl: Math.floor(ttl) });
    else this.entries.delete(key);
    return entry;
  }
}
