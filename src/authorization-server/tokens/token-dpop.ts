// DPoP at /token (RFC 9449 §5): a client that sends a proof gets tokens bound
// to the proof's key. The proof is checked as at a protected route (§4.3,
// auth/dpop-proof.ts) with `htu` = this token endpoint and no `ath`, and its
// `jti` is claimed once across replicas; any failure is 400 invalid_dpop_proof.
// With `dpop_nonce`, a proof without the current nonce is 400 use_dpop_nonce (§9).
import { InvalidDpopProof, verifyDpopProof } from '../../auth/dpop-proof.js';
import type { ClaimDpopProof } from '../../auth/dpop-replay.js';
import { AS_ENDPOINTS } from '../../config/reserved-paths.js';
import { normalizedHttpUri } from '../../config/urls.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { endpointUrl, type AsContext } from '../context.js';

const invalidProof = (description: string, cause?: unknown) => new GatewayError(400, 'invalid_dpop_proof', description, { cause });

/** The `DPoP-Nonce` header for the answer to a token request with a proof (RFC 9449 §9), when nonces are on. */
export function tokenNonceHeader(ctx: AsContext, headers: Headers): Record<string, string> {
  return ctx.config.dpopNonce && headers.has('dpop') ? { 'dpop-nonce': ctx.dpopNonces.current() } : {};
}

/** The key thumbprint (`jkt`) a token request proved possession of, or undefined without a proof. */
export type TokenRequestProof = (headers: Headers) => Promise<string | undefined>;

export function tokenRequestProof(ctx: AsContext, claim: ClaimDpopProof): TokenRequestProof {
  const htu = normalizedHttpUri(endpointUrl(ctx.issuer, AS_ENDPOINTS.token));
  if (htu === undefined) throw new Error(`the token endpoint of ${ctx.issuer} is not an http(s) URL`);
  return async (headers) => {
    const proof = headers.get('dpop');
    if (proof === null) return undefined;
    // Fetch's Headers join repeated fields with ", "; a compact JWS never holds a comma.
    if (proof.includes(',')) throw invalidProof('More than one DPoP header');
    let verified;
    try {
      verified = await verifyDpopProof(proof, { method: 'POST', htu });
    } catch (err) {
      if (err instanceof InvalidDpopProof) throw invalidProof(err.message, err.cause);
      throw err;
    }
    if (ctx.config.dpopNonce && !ctx.dpopNonces.accepts(verified.nonce)) {
      throw new GatewayError(400, 'use_dpop_nonce', 'Resend the request with a DPoP proof carrying the nonce in the DPoP-Nonce header');
    }
    if (!(await claim(verified.jkt, verified.jti))) throw invalidProof('DPoP proof already used');
    return verified.jkt;
  };
}
