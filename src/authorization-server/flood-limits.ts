// Rate limits on the endpoints of the built-in AS that anyone may call
// without a credential: /authorize, the consent and login pages (and the IdP
// callback) under /authorize/, /register, /token and /revoke. Each is counted
// per client address (client-ip.ts: trust_proxy hops only); /authorize is
// also counted across all addresses, since each request may leave a pending
// authorization in the store. Over a limit: 429 with Retry-After, before the
// handler reads the body or writes anything. The store not answering lets
// the request through (a login is never blocked by the limiter), counted.
import type { MiddlewareHandler } from 'hono';
import type { AuthorizationServerRateLimits } from '../config/types.js';
import { GatewayError } from '../errors/gateway-error.js';
import { StoreUnavailableError, type Store } from '../store/store.js';
import { clientIp } from './client-ip.js';
import type { AsContext } from './context.js';
import { RateLimiter } from './rate-limit.js';

type PerAddressLimit = 'authorize' | 'token' | 'register' | 'interaction';

/** Which per-address limit a path counts against; undefined: none. */
export function floodLimitOf(path: string): PerAddressLimit | undefined {
  if (path === '/authorize') return 'authorize';
  if (path.startsWith('/authorize/')) return 'interaction';
  if (path === '/token' || path === '/revoke') return 'token';
  if (path === '/register') return 'register';
  return undefined;
}

/** The paths to mount `floodLimits` on (Hono's `/authorize/*` matches `/authorize` too). */
export const FLOOD_LIMITED_PATHS = ['/authorize/*', '/token', '/revoke', '/register'] as const;

export function floodLimits(ctx: AsContext, store: Store, limits: AuthorizationServerRateLimits): MiddlewareHandler {
  const perAddress: Record<PerAddressLimit, RateLimiter> = {
    authorize: new RateLimiter(store, 'authorize', limits.authorize),
    token: new RateLimiter(store, 'token', limits.token),
    register: new RateLimiter(store, 'register-attempts', limits.register),
    interaction: new RateLimiter(store, 'interaction', limits.interaction),
  };
  const pendingAuthorizations = new RateLimiter(store, 'pending-authorizations', limits.pendingAuthorizations);

  async function count(limit: string, use: () => Promise<void>): Promise<void> {
    try {
      await use();
    } catch (err) {
      if (err instanceof StoreUnavailableError) {
        ctx.metrics.rateLimitFailOpen.labels(limit).inc();
        return;
      }
      if (err instanceof GatewayError && err.status === 429) ctx.metrics.rateLimited.labels(limit).inc();
      throw err;
    }
  }

  return async (c, next) => {
    const limit = c.req.method === 'OPTIONS' ? undefined : floodLimitOf(c.req.path);
    if (limit) {
      await count(limit, () => perAddress[limit].record(clientIp(c, ctx.trustProxy)));
      if (limit === 'authorize') await count('pending_authorizations', () => pendingAuthorizations.record('all'));
    }
    await next();
  };
}
