// A DPoP proof is good for one request (RFC 9449 §11.1): its `jti` is
// claimed in the store, so a proof replayed on this replica or another one
// finds it taken. A store that cannot answer fails closed (503).
import type { Store } from '../store/store.js';
import { dpopProofKey } from '../store/key-names.js';
import { PROOF_JTI_TTL_MS } from './dpop-proof.js';

/** Resolves true for the first use of this proof (`jkt`, `jti`), false for any later one. */
export type ClaimDpopProof = (jkt: string, jti: string) => Promise<boolean>;

export function dpopProofClaimer(store: Store): ClaimDpopProof {
  return (jkt, jti) => store.setIfAbsent(dpopProofKey(jkt, jti), '1', PROOF_JTI_TTL_MS);
}
