// The budget of new pending authorizations (issue 26, DESIGN.md §8.3): a
// sign-in started by /authorize, the connected-apps page or a connect link
// writes one `pending-authz:` entry. Counted only when that entry is about to
// be written, so only after the request was validated: an invalid request,
// however many and from however many addresses, spends nothing. Each client
// address has a share (the budget over SHARE_DIVISOR, same window), counted
// first, so an address past its share never spends the budget of all; the
// budget of all stays because Redis has no class budget of its own, and it
// bounds what many addresses together can leave there.
import type { Context } from 'hono';
import type { RateLimit } from '../helpers/rate-limit.js';
import { RateLimiter } from '../helpers/rate-limit.js';
import { clientIp } from '../helpers/client-ip.js';
import { countFailingOpen } from '../helpers/fail-open-count.js';
import type { Store } from '../../store/store.js';
import type { AsContext } from '../context.js';

/** Fifty addresses at their share fill the budget of all: a handful cannot. */
export const SHARE_DIVISOR = 50;

/** One address's share of `budget`: at least one. */
export const addressShare = (budget: RateLimit): RateLimit => ({ max: Math.max(1, Math.floor(budget.max / SHARE_DIVISOR)), windowMs: budget.windowMs });

export class PendingAuthorizationBudget {
  private readonly perAddress: RateLimiter;
  private readonly all: RateLimiter;

  constructor(
    private readonly ctx: AsContext,
    store: Store,
    budget: RateLimit,
  ) {
    this.perAddress = new RateLimiter(store, 'pending-authorizations-address', addressShare(budget));
    this.all = new RateLimiter(store, 'pending-authorizations', budget);
  }

  /** Before a new pending authorization is written: 429 past the address's share, then past the budget of all. */
  async admit(c: Context): Promise<void> {
    const address = clientIp(c, this.ctx.trustProxy);
    // A store that did not answer the first count would not answer the second in time either (one fail-open counted).
    if (await countFailingOpen(this.ctx.metrics, 'pending_authorizations', () => this.perAddress.record(address))) {
      await countFailingOpen(this.ctx.metrics, 'pending_authorizations', () => this.all.record('all'));
    }
  }
}
