// `signed`: a short-lived JWT the gateway signs for the upstream, naming the
// caller (sub, client_id, scope). Reused per principal and scopes for half
// its life, so the upstream always gets at least ttl/2 of validity.
import { randomUUID } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { principalKey } from '../auth/principal.js';
import type { JwtSigner, UpstreamCredential } from './upstream-credential.js';

export interface SignedOptions {
  /** `iss`: the gateway's public URL. */
  issuer: string;
  audience: string;
  ttlMs: number;
  signer: JwtSigner;
  maxCachedTokens?: number;
}

// Not `at+jwt`: the gateway's own access tokens use that type, and a
// credential handed to an upstream must never pass as one if replayed.
const TYP = 'JWT';

export function signedCredential(options: SignedOptions): UpstreamCredential {
  if (!options.issuer) throw new Error('signed upstream_auth needs the gateway public URL as issuer');
  if (!options.audience) throw new Error('signed upstream_auth needs an audience');
  if (!(options.ttlMs >= 2000)) throw new Error('signed upstream_auth ttl must be at least 2s');
  const ttlSeconds = Math.ceil(options.ttlMs / 1000);
  // Entries carry their own deadline (Date.now based, like the JWT's exp); the LRU only bounds the count.
  const cache = new LRUCache<string, { headers: Record<string, string>; until: number }>({ max: options.maxCachedTokens ?? 10_000 });

  return {
    async headersFor(auth) {
      const key = JSON.stringify([principalKey(auth), auth.scopes]);
      const now = Date.now();
      const hit = cache.get(key);
      if (hit && now < hit.until) return hit.headers;
      const iat = Math.floor(now / 1000);
      const jwt = await options.signer.sign(
        {
          iss: options.issuer,
          aud: options.audience,
          sub: auth.subject,
          client_id: auth.clientId,
          scope: auth.scopes.join(' '),
          iat,
          exp: iat + ttlSeconds,
          jti: randomUUID(),
        },
        { typ: TYP },
      );
      const headers = Object.freeze({ authorization: `Bearer ${jwt}` });
      cache.set(key, { headers, until: now + options.ttlMs / 2 });
      return headers;
    },
  };
}
