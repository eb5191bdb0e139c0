// A DPoP proof is good for one request (RFC 9449 §11.1): its `jti` is
// claimed in the store, so a proof replayed on this replica or another one
// finds it taken. A store that cannot answer fails closed (503).
//
// The markers are never evicted (forgetting one would let its proof pass
// again), so who may write them is bounded twice: callers claim only once a
// request is known valid and admitted (a protected route after its policy and
// rate limits, /token after the client and grant are checked), and each
// principal (the user: issuer and subject, whatever client they use) has a
// share of its own, counted over a marker's lifetime: beyond it, 429 for that
// principal alone, so one user's flood never refuses another's proofs.
import type { StoreConfig } from '../config/types.js';
import { tooManyRequests } from '../errors/gateway-error.js';
import { dpopProofKey, dpopShareKey } from '../store/key-names.js';
import type { Store } from '../store/store.js';
import { PROOF_WINDOW_SECONDS } from './dpop-proof.js';

/** One accepted proof, to be spent by the principal it counts against. */
export interface DpopProofUse {
  jkt: string;
  jti: string;
  /** The proof's `iat`: judged again when it is spent, which may be seconds after it was checked. */
  iat: number;
  /** Whose share pays for the marker: `principalShareOwner` of the request's user. */
  owner: string;
}

/**
 * Resolves true for the first use of this proof (`jkt`, `jti`), false for any
 * later one and for one whose `iat` left the window since it was checked;
 * rejects with 429 when the owner's share of markers is spent.
 */
export type ClaimDpopProof = (use: DpopProofUse) => Promise<boolean>;

/** A principal's share is the user, not the client: registering more clients does not multiply it. */
export const principalShareOwner = (issuer: string, subject: string): string => JSON.stringify([issuer, subject]);

/** A tenth of the memory store's class budget (at least 100), so ten users' floods together only could fill it. */
const MEMORY_SHARE_DIVISOR = 10;
const MIN_SHARE = 100;
/** Redis keeps markers in memory it shares with everything: 10,000 live markers (80 proofs a second) per user. */
const REDIS_SHARE = 10_000;

/** How many live markers one principal may hold on this store. */
export function dpopMarkerShare(store: StoreConfig): number {
  return store.kind === 'memory' ? Math.max(MIN_SHARE, Math.floor(store.maxEntries / MEMORY_SHARE_DIVISOR)) : REDIS_SHARE;
}

export interface DpopClaimRules {
  /** How many live markers one principal may hold (`dpopMarkerShare`). */
  share: number;
  /** `proofJtiTtlMs` of the allowed clock skew (dpop-proof.ts), the same at routes and /token. */
  markerTtlMs: number;
  /** The clock the proof was checked by (store/store-clock.ts), in seconds. */
  nowSeconds: () => number;
}

export function dpopProofClaimer(store: Store, { share, markerTtlMs, nowSeconds }: DpopClaimRules): ClaimDpopProof {
  return async ({ jkt, jti, iat, owner }) => {
    // Policy, rate limits or a grant's checks ran since the proof was: a marker covers the window from
    // its claim, so a proof claimed after its window closed could find an earlier marker just gone.
    if (Math.abs(nowSeconds() - iat) > PROOF_WINDOW_SECONDS) return false;
    // Counted over a marker's whole life: the owner never holds more than `share` live markers.
    const admission = await store.admit(dpopShareKey(owner), { cost: 1, limit: share, windowMs: markerTtlMs });
    if (!admission.admitted) throw tooManyRequests('Too many DPoP proofs from this user; try again later', admission.retryAfterMs);
    return store.setIfAbsent(dpopProofKey(jkt, jti), '1', markerTtlMs);
  };
}
