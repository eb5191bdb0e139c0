// One token verifier per route: the kind the route's `token` config names
// (external JWT, introspection, or the built-in AS), behind the cache.
import type { RouteConfig } from '../config/types.js';
import type { Logger } from '../observability/logger.js';
import { traced, type Tracing } from '../observability/tracing.js';
import { logClaimMismatches } from './claim-mismatch.js';
import { createIntrospectionVerifier } from './introspection-verifier.js';
import type { JwksRegistry } from './jwks.js';
import { createJwtVerifier } from './jwt-verifier.js';
import { TokenCache, type SeenOn } from './token-cache.js';
import type { AuthContext } from './principal.js';
import type { BuiltinVerifierFactory, TokenVerifier } from './verifier.js';

export interface TokenVerifierDeps {
  jwksSources: JwksRegistry;
  builtin?: BuiltinVerifierFactory;
  /** Share one cache across routes to bound memory once; default: one per route. */
  cache?: TokenCache;
  onCacheHit?: () => void;
  onCacheMiss?: () => void;
  /** Where a token refused for its audience or issuer is logged, with the expected value. */
  logger?: Logger;
  /** A verification the cache could not answer is a child span of the request's (hits are not: they cost nothing). */
  tracing?: Tracing;
}

/** JWTs are re-verified at least this often, so a removed key stops working soon. */
const MAX_JWT_CACHE_MS = 5 * 60_000;

export function createTokenVerifier(route: RouteConfig, deps: TokenVerifierDeps): TokenVerifier {
  const { inner, maxTtlMs } = createInner(route, deps);
  const cache = deps.cache ?? new TokenCache();
  const hooks = { onHit: deps.onCacheHit, onMiss: deps.onCacheMiss };
  const { tracing } = deps;
  const spanAttributes = { 'mag.token.kind': route.token.kind };
  const verifyUncached = tracing
    ? (token: string, tokenHash: string) => traced(tracing, 'verify token', 'internal', spanAttributes, () => inner.verify(token, undefined, tokenHash))
    : (token: string, tokenHash: string) => inner.verify(token, undefined, tokenHash);
  const usable = inner.usable;
  const cached = (token: string, seenOn?: SeenOn) => cache.get(token, route.resource, maxTtlMs, verifyUncached, hooks, seenOn);
  if (!usable) {
    return {
      verify: async (token, seenOn) => cached(token, seenOn),
      verifyCached: cached,
      recall: (connection, header) => cache.recall(connection, header, route.resource, hooks),
    };
  }
  // Checked outside the cache, so neither a cached entry nor a connection's recall outlives a revocation.
  const checked = (auth: AuthContext): AuthContext => {
    const refusal = usable(auth);
    if (refusal) throw refusal;
    return auth;
  };
  const verifyCached = (token: string, seenOn?: SeenOn): AuthContext | Promise<AuthContext> => {
    const auth = cached(token, seenOn);
    return auth instanceof Promise ? auth.then(checked) : checked(auth);
  };
  return {
    verify: async (token, seenOn) => verifyCached(token, seenOn),
    verifyCached,
    recall(connection, header) {
      const auth = cache.recall(connection, header, route.resource, hooks);
      // Refused: verify() then answers with the reason.
      return auth === undefined || usable(auth) !== undefined ? undefined : auth;
    },
    usable,
  };
}

function createInner(route: RouteConfig, deps: TokenVerifierDeps): { inner: TokenVerifier; maxTtlMs: number } {
  const token = route.token;
  const onClaimMismatch = deps.logger && logClaimMismatches(deps.logger, route.path);
  switch (token.kind) {
    case 'jwt': {
      const keys = deps.jwksSources.get(token.issuer, token.jwksUri);
      return { inner: createJwtVerifier(route.resource, token, keys, onClaimMismatch), maxTtlMs: MAX_JWT_CACHE_MS };
    }
    case 'introspection':
      // The operator's cacheTtlMs bounds how late a revocation is noticed.
      return { inner: createIntrospectionVerifier(route.resource, token, { onClaimMismatch }), maxTtlMs: token.cacheTtlMs };
    case 'builtin':
      if (!deps.builtin) throw new Error(`${route.file}: route ${route.path} uses the built-in authorization server, which is not enabled`);
      return { inner: deps.builtin(route), maxTtlMs: MAX_JWT_CACHE_MS };
  }
}
