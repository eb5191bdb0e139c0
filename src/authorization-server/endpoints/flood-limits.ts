// Rate limits on the endpoints of the built-in AS that anyone may call
// without a credential: /authorize, the consent and login pages (and the IdP
// callback) under /authorize/, the connected-apps page under /account/,
// /register, /token and /revoke. Each is counted per client address
// (client-ip.ts: trust_proxy hops only); /authorize and GET /account/apps are
// also counted across all addresses, since each request may leave a pending
// authorization (an account sign-in) in the store. Over a limit: 429 with Retry-After, before the
// handler reads the body or writes anything. The store failing, or late, lets
// the request through (a login is never blocked by the limiter), counted.
import type { MiddlewareHandler } from 'hono';
import { ACCOUNT_PAGES_PREFIX, ACCOUNT_PATHS, AS_ENDPOINTS, AS_PAGES_PREFIX } from '../../config/reserved-paths.js';
import type { AuthorizationServerRateLimits } from '../../config/types.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { StoreUnavailableError, type Store } from '../../store/store.js';
import { clientIp } from '../helpers/client-ip.js';
import type { AsContext } from '../context.js';
import { RateLimiter } from '../helpers/rate-limit.js';

/**
 * How long a request waits for its count. A healthy store answers within a
 * millisecond or two; one that takes longer is failing, and the handler
 * after this must still answer 503 within the store timeout, not twice it.
 */
const COUNT_WAIT_MS = 200;

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

/** A request that may leave a pending authorization in the store: counted across all addresses as well. */
const mayStartInteraction = (method: string, path: string) => path === AS_ENDPOINTS.authorize || (method === 'GET' && (path === ACCOUNT_PATHS.apps || path === ACCOUNT_PATHS.connect));

export function floodLimits(ctx: AsContext, store: Store, limits: AuthorizationServerRateLimits): MiddlewareHandler {
  const perAddress: Record<PerAddressLimit, RateLimiter> = {
    authorize: new RateLimiter(store, 'authorize', limits.authorize),
    token: new RateLimiter(store, 'token', limits.token),
    register: new RateLimiter(store, 'register-attempts', limits.register),
    interaction: new RateLimiter(store, 'interaction', limits.interaction),
  };
  const pendingAuthorizations = new RateLimiter(store, 'pending-authorizations', limits.pendingAuthorizations);

  /** Counts one use; false when the store failed or was late, and the request goes on unlimited. */
  async function count(limit: string, use: () => Promise<void>): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), COUNT_WAIT_MS);
    });
    const counted = use().then(() => 'counted' as const);
    counted.catch(() => undefined); // a late failure has no one left to answer
    try {
      if ((await Promise.race([counted, late])) === 'counted') return true;
    } catch (err) {
      if (!(err instanceof StoreUnavailableError)) {
        if (err instanceof GatewayError && err.status === 429) ctx.metrics.rateLimited.labels(limit).inc();
        throw err;
      }
    } finally {
      clearTimeout(timer);
    }
    ctx.metrics.rateLimitFailOpen.labels(limit).inc();
    return false;
  }

  return async (c, next) => {
    const limit = c.req.method === 'OPTIONS' ? undefined : floodLimitOf(c.req.path);
    if (limit) {
      const answered = await count(limit, () => perAddress[limit].record(clientIp(c, ctx.trustProxy)));
      // A store that did not answer the first count would not answer the second in time either.
      if (mayStartInteraction(c.req.method, c.req.path)) {
        if (answered) await count('pending_authorizations', () => pendingAuthorizations.record('all'));
        else ctx.metrics.rateLimitFailOpen.labels('pending_authorizations').inc();
      }
    }
    await next();
  };
}
