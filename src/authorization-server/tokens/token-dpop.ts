// DPoP at /token (RFC 9449 §5): a client that sends a proof gets tokens bound
// to the proof's key. The proof is checked as at a protected route (§4.3,
// auth/dpop-proof.ts) with `htu` = this token endpoint and no `ath`; its
// `jti` is claimed once across replicas by the grant, only once the client
// and the grant are known good (so a flood of invalid requests with fresh
// proofs writes no marker), against the user's share. Any failure is 400
// invalid_dpop_proof. With `dpop_nonce`, a proof without the current nonce
// is 400 use_dpop_nonce (§9).
import { SPENT } from '../../auth/dpop-binding.js';
import { InvalidDpopProof, verifyDpopProof } from '../../auth/dpop-proof.js';
import { principalShareOwner, type ClaimDpopProof } from '../../auth/dpop-replay.js';
import { AS_ENDPOINTS } from '../../config/reserved-paths.js';
import { normalizedHttpUri } from '../../config/urls.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { endpointUrl, type AsContext } from '../context.js';

const invalidProof = (description: string, cause?: unknown) => new GatewayError(400, 'invalid_dpop_proof', description, { cause });

/** The `DPoP-Nonce` header for the answer to a token request with a proof (RFC 9449 §9), when nonces are on. */
export function tokenNonceHeader(ctx: AsContext, headers: Headers): Record<string, string> {
  return ctx.config.dpopNonce && headers.has('dpop') ? { 'dpop-nonce': ctx.dpopNonces.current() } : {};
}

/**
 * A token request's proof, checked: `jkt`, the key it proved possession of
 * (undefined without a proof); `spend`, its one use, claimed for the grant's
 * user (`subject`) by the grant once the request is known valid.
 */
export interface TokenProof {
  jkt?: string;
  spend(subject: string): Promise<void>;
}

/** Checks the request's DPoP proof, if any, without spending it. */
export type TokenRequestProof = (headers: Headers) => Promise<TokenProof>;

const NO_PROOF: TokenProof = { spend: async () => undefined };

/** `nowSeconds`: the store's clock where one is shared, so /token and every route judge `iat` alike. */
export function tokenRequestProof(ctx: AsContext, claim: ClaimDpopProof, nowSeconds: () => number): TokenRequestProof {
  const htu = normalizedHttpUri(endpointUrl(ctx.issuer, AS_ENDPOINTS.token));
  if (htu === undefined) throw new Error(`the token endpoint of ${ctx.issuer} is not an http(s) URL`);
  return async (headers) => {
    const proof = headers.get('dpop');
    if (proof === null) return NO_PROOF;
    // Fetch's Headers join repeated fields with ", "; a compact JWS never holds a comma.
    if (proof.includes(',')) throw invalidProof('More than one DPoP header');
    let verified;
    try {
      verified = await verifyDpopProof(proof, { method: 'POST', htu, nowSeconds: nowSeconds() });
    } catch (err) {
      if (err instanceof InvalidDpopProof) throw invalidProof(err.message, err.cause);
      throw err;
    }
    if (ctx.config.dpopNonce && !ctx.dpopNonces.accepts(verified.nonce)) {
      throw new GatewayError(400, 'use_dpop_nonce', 'Resend the request with a DPoP proof carrying the nonce in the DPoP-Nonce header');
    }
    const { jkt, jti, iat } = verified;
    return {
      jkt,
      async spend(subject) {
        if (!(await claim({ jkt, jti, iat, owner: principalShareOwner(ctx.issuer, subject) }))) throw invalidProof(SPENT);
      },
    };
  };
}
