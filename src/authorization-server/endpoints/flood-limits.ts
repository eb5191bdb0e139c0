// Rate limits on the endpoints of the built-in AS that anyone may call
// without a credential: /authorize, the consent and login pages (and the IdP
// callback) under /authorize/, the connected-apps page under /account/,
// /register, /token and /revoke. Each is counted per client address
// (client-ip.ts: trust_proxy hops only), so a flood spends only its own
// addresses' budgets: no budget of all addresses is counted here, before a
// request is validated (issue 26; the pending authorizations a valid request
// writes are counted where it is written: pending-authorization-budget.ts).
// Over a limit: 429 with Retry-After, before the handler reads the body or
// writes anything. The store failing, or late, lets the request through
// (helpers/fail-open-count.ts).
import type { MiddlewareHandler } from 'hono';
import { ACCOUNT_PAGES_PREFIX, AS_ENDPOINTS, AS_PAGES_PREFIX } from '../../config/reserved-paths.js';
import type { AuthorizationServerRateLimits } from '../../config/types.js';
import type { Store } from '../../store/store.js';
import { clientIp } from '../helpers/client-ip.js';
import type { AsContext } from '../context.js';
import { RateLimiter } from '../helpers/rate-limit.js';
import { countFailingOpen } from '../helpers/fail-open-count.js';

type PerAddressLimit = 'authorize' | 'token' | 'register' | 'interaction';

/** Which per-address limit a path counts against; undefined: none. */
export function floodLimitOf(path: string): PerAddressLimit | undefined {
  if (path === AS_ENDPOINTS.authorize) return 'authorize';
  // The IdP's signed server-to-server logout: a limit would drop logouts, and grants would outlive IdP sessions.
  if (path.startsWith(`${AS_PAGES_PREFIX}login/`) && path.endsWith('/backchannel-logout')) return undefined;
  if (path.startsWith(AS_PAGES_PREFIX) || path.startsWith(ACCOUNT_PAGES_PREFIX)) return 'interaction';
  if (path === AS_ENDPOINTS.token || path === AS_ENDPOINTS.revoke) return 'token';
  if (path === AS_ENDPOINTS.register) return 'register';
  return undefined;
}

/** The paths to mount `floodLimits` on (Hono's `/authorize/*` matches `/authorize` too). */
export const FLOOD_LIMITED_PATHS = [`${AS_PAGES_PREFIX}*`, AS_ENDPOINTS.token, AS_ENDPOINTS.revoke, AS_ENDPOINTS.register] as const;

/** Mounted too when the connected-apps page is on. */
export const ACCOUNT_FLOOD_LIMITED_PATH = `${ACCOUNT_PAGES_PREFIX}*`;

export function floodLimits(ctx: AsContext, store: Store, limits: AuthorizationServerRateLimits): MiddlewareHandler {
  const perAddress: Record<PerAddressLimit, RateLimiter> = {
    authorize: new RateLimiter(store, 'authorize', limits.authorize),
    token: new RateLimiter(store, 'token', limits.token),
    register: new RateLimiter(store, 'register-attempts', limits.register),
    interaction: new RateLimiter(store, 'interaction', limits.interaction),
  };

  return async (c, next) => {
    const limit = c.req.method === 'OPTIONS' ? undefined : floodLimitOf(c.req.path);
    if (limit) {
      await countFailingOpen(ctx.metrics, limit, () => perAddress[limit].record(clientIp(c, ctx.trustProxy)));
    }
    await next();
  };
}
