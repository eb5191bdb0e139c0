// A user's share of the never-evicted classes a sign-in feeds (DESIGN.md §8.3,
// K72/K81): each completed authorization leaves a code whose redemption writes
// a `code-used:` marker, and a grant whose revocation writes a `grant:` marker,
// both kept until their TTL. Counting sign-ins per user (issuer and subject,
// whatever client) over the longer of those lives bounds what one user can
// hold there: past the share, 429 for that user alone, before any grant or code
// exists, so nothing already issued is refused its revocation.
import type { StoreConfig } from '../../config/types.js';
import { principalShareOwner } from '../../auth/dpop-replay.js';
import { tooManyRequests } from '../../errors/gateway-error.js';
import { signInShareKey } from '../../store/key-names.js';
import type { Store } from '../../store/store.js';

/** A tenth of the memory store's class budget, so only ten users together could fill a class. */
const MEMORY_SHARE_DIVISOR = 10;
/** Redis bounds no class itself: 10,000 sign-ins per `refresh_token_ttl` per user (about one every four minutes for 30 days). */
const REDIS_SHARE = 10_000;

/** How many sign-ins one user may complete per window on this store. */
export function signInShareLimit(store: StoreConfig): number {
  return store.kind === 'memory' ? Math.max(1, Math.floor(store.maxEntries / MEMORY_SHARE_DIVISOR)) : REDIS_SHARE;
}

export class SignInShare {
  constructor(
    private readonly store: Store,
    private readonly issuer: string,
    private readonly limit: number,
    /** The longest a marker of one sign-in lives: `refresh_token_ttl`. */
    private readonly windowMs: number,
  ) {}

  /** Counts one sign-in of `subject`; rejects with 429 when the user's share is spent. */
  async admit(subject: string): Promise<void> {
    const owner = principalShareOwner(this.issuer, subject);
    const admission = await this.store.admit(signInShareKey(owner), { cost: 1, limit: this.limit, windowMs: this.windowMs });
    if (!admission.admitted) throw tooManyRequests('Too many sign-ins by this user; try again later', admission.retryAfterMs);
  }
}
