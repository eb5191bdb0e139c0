// Sender-constrained tokens at a protected route (RFC 9449 §7): a token bound
// to a key (`cnf.jkt`, §6) is used only with the `DPoP` scheme and a fresh
// proof signed by that key, checked on every request — a cached or recalled
// token included, since only the token's verification is cached, never a proof.
import type { DpopRouteConfig } from '../config/types.js';
import { GatewayError, invalidDpopProof, invalidToken } from '../errors/gateway-error.js';
import { dpopHeader } from './bearer.js';
import type { DpopNonces } from './dpop-nonce.js';
import { InvalidDpopProof, verifyDpopProof } from './dpop-proof.js';
import { principalShareOwner, type ClaimDpopProof } from './dpop-replay.js';
import type { AuthContext } from './principal.js';

/** What checking a proof needs beyond the request: the clock, the store's one-use claim, and the gateway's nonces. */
export interface DpopChecks {
  /** Seconds since the epoch by the store's clock where one is shared (store/store-clock.ts): every replica judges `iat` alike. */
  nowSeconds: () => number;
  claim: ClaimDpopProof;
  /** Set when the gateway hands out nonces (RFC 9449 §8); a route with `dpop_nonce` then requires one. */
  nonces?: DpopNonces;
}

/** What the DPoP check reads of the request. */
export interface DpopRequest {
  method?: string;
  rawHeaders: readonly string[];
}

/**
 * The key thumbprint a token is bound to, or undefined for an unbound token.
 * A `cnf` without a usable `jkt` (mTLS's `x5t#S256`, a malformed one) binds
 * the token to something the gateway cannot check: refused, never ignored.
 */
export function boundJkt(auth: AuthContext): string | undefined {
  const cnf = auth.claims.cnf;
  if (cnf === undefined) return undefined;
  const jkt = typeof cnf === 'object' && cnf !== null ? (cnf as Record<string, unknown>).jkt : undefined;
  if (typeof jkt !== 'string' || jkt === '') throw invalidToken('Token is bound to a key this resource cannot check');
  return jkt;
}

/**
 * A token presented with `Bearer`: refused when bound to a key (§7.2: else a
 * stolen bound token would work as a bearer token), and on a route that
 * requires DPoP. Synchronous: the Bearer path stays as cheap as before.
 */
export function checkBearerUse(dpop: DpopRouteConfig | undefined, auth: AuthContext): AuthContext {
  if (boundJkt(auth) !== undefined) {
    throw new GatewayError(401, 'invalid_token', 'This token is bound to a key: send it with the DPoP scheme and a proof', { challenge: true, dpop: true });
  }
  if (dpop?.required) throw bearerRefused();
  return auth;
}

/** The refusal of any Bearer token on a route with `dpop: required`. */
export const bearerRefused = () =>
  new GatewayError(401, 'invalid_token', 'This resource accepts only DPoP-bound tokens', { challenge: true, dpop: true });

/**
 * A token presented with `DPoP`: bound to a key, and the request carries one
 * valid proof of that key for this method and URI (RFC 9449 §4.3, §7.1).
 * Resolves with a copy of the context holding the proof (`dpopProof`), to be
 * spent by `spendDpopProof` once the request is admitted; rejects with a 401
 * carrying the `DPoP` challenge, 400 for two proofs.
 */
export async function checkDpopUse(dpop: DpopRouteConfig, checks: DpopChecks, req: DpopRequest, auth: AuthContext): Promise<AuthContext> {
  const jkt = boundJkt(auth);
  if (jkt === undefined) {
    throw new GatewayError(401, 'invalid_token', 'The DPoP scheme needs a token bound to a key; this one is not', { challenge: true, dpop: true });
  }
  const proof = dpopHeader(req.rawHeaders);
  if (proof === undefined) throw invalidDpopProof('A DPoP proof is required with the DPoP scheme');
  let verified;
  try {
    verified = await verifyDpopProof(proof, { method: req.method ?? '', htu: dpop.htu, accessTokenHash: auth.tokenHash, nowSeconds: checks.nowSeconds() });
  } catch (err) {
    if (err instanceof InvalidDpopProof) throw invalidDpopProof(err.message, err.cause);
    throw err;
  }
  if (verified.jkt !== jkt) throw invalidDpopProof('DPoP proof key is not the key the token is bound to');
  // No nonce source (a wiring fault) fails closed, like a wrong nonce. The route answers with the current one.
  if (dpop.nonce && !checks.nonces?.accepts(verified.nonce)) throw useDpopNonce();
  // A copy: the context may be a cached one, shared by every request of this token.
  return { ...auth, dpopProof: { jkt, jti: verified.jti, iat: verified.iat } };
}

/**
 * The proof's one use (RFC 9449 §11.1), claimed once policy and rate limits
 * admitted the request, so a refused or rate-limited request writes no marker;
 * counted against the user's share. A replay is 401; a spent share 429; no store 503.
 */
export async function spendDpopProof(checks: DpopChecks, auth: AuthContext): Promise<void> {
  const proof = auth.dpopProof;
  if (proof === undefined) return;
  const owner = principalShareOwner(auth.issuer, auth.subject);
  if (!(await checks.claim({ ...proof, owner }))) throw invalidDpopProof(SPENT);
}

/** Refused at its spending: a replay, or a proof whose window closed while the request was judged. */
export const SPENT = 'DPoP proof already used, or its iat left the accepted window';

/** RFC 9449 §8: the proof lacks the current nonce; the `DPoP-Nonce` header of the answer carries it. */
const useDpopNonce = () =>
  new GatewayError(401, 'use_dpop_nonce', 'Resend the request with a DPoP proof carrying the nonce in the DPoP-Nonce header', { challenge: true, dpop: true });

/** A refusal of a DPoP-scheme request (its token, its scopes) answers with the DPoP challenge too (§7.1). */
export function asDpopRefusal(err: unknown): unknown {
  if (!(err instanceof GatewayError) || !err.challenge || err.dpop) return err;
  return new GatewayError(err.status, err.code, err.description, { challenge: err.challenge, bareChallenge: err.bareChallenge, scope: err.scope, dpop: true, cause: err.cause, headers: err.headers });
}
