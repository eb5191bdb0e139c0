// A DPoP proof (RFC 9449 §4): a JWT the client signs for one request with
// the private key its token is bound to, the public key in its own header.
// Checked as §4.3 lists, cheap structure first, crypto last; replay (`jti`)
// is the caller's, through the store (dpop-replay.ts). Shared by the
// protected routes and the built-in AS's token endpoint. The signature is
// checked with node:crypto and a key kept by thumbprint (dpop-proof-key.ts).
import { decodeProtectedHeader, type JWK } from 'jose';
import { DPOP_ALGORITHMS, isAsymmetricJwsAlgorithm, type JwtAlgorithm } from '../config/jws-algorithms.js';
import { normalizedHttpUri } from '../config/urls.js';
import { decodeBase64UrlStrict, decodeJsonSegment, splitCompactJws } from './compact-jws.js';
import { proofKey } from './dpop-proof-key.js';
import { jwsSignatureValid } from './jws-signature.js';

/** A proof is one small JWT: a P-256 proof is ~500 bytes, an RSA-4096 one ~1.5 KiB. */
export const MAX_PROOF_LENGTH = 8 * 1024;

/** `iat` may be this far from the gateway's clock, either way (§4.3 check 11, §11.1). */
export const PROOF_WINDOW_SECONDS = 60;

/**
 * How long a `jti` is remembered: as long as any replica could still accept a
 * proof carrying it. Accepted first at the far end of the window (an `iat` a
 * window ahead), it is still acceptable a whole window later, plus the skew
 * replicas allow (`store.max_clock_skew`: each judges `iat` by the store's
 * clock, which also expires the marker, so this covers what a reading of it
 * may miss, a replica that cannot read it, and store nodes whose clocks
 * differ), plus a second (the window is closed, clocks read in whole seconds).
 */
export const proofJtiTtlMs = (maxClockSkewMs: number): number => 2 * PROOF_WINDOW_SECONDS * 1000 + maxClockSkewMs + 1000;

const MAX_JTI_LENGTH = 256;

/** Members only a private or symmetric JWK has (RFC 7518 §6.2.2, §6.3.2, §6.4; RFC 8037 §2). */
const PRIVATE_JWK_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'] as const;

/** Why a proof was refused; the caller chooses the status (401 at a resource, 400 at /token). */
export class InvalidDpopProof extends Error {
  constructor(description: string, options?: { cause?: unknown }) {
    super(description, options);
    this.name = 'InvalidDpopProof';
  }
}

export interface ProofExpectations {
  /** The request's method (`htm`). */
  method: string;
  /** The URI the request was sent to, normalised by `normalizedHttpUri`. */
  htu: string;
  /** base64url(SHA-256(access token)) when the proof accompanies one (`ath`, §4.3 check 12). */
  accessTokenHash?: string;
  /** Seconds since the epoch, by the store's clock where one is shared (store/store-clock.ts); default: this process's clock. */
  nowSeconds?: number;
}

export interface VerifiedProof {
  /** RFC 7638 SHA-256 thumbprint of the proof's key: what `cnf.jkt` names. */
  jkt: string;
  jti: string;
  /** Seconds since the epoch: the claim, once it passed the window. */
  iat: number;
  /** The public key, as sent. */
  jwk: JWK;
  /** The `nonce` claim as sent (RFC 9449 §8): the caller judges it when it hands out nonces. */
  nonce: unknown;
}

export async function verifyDpopProof(proof: string, expected: ProofExpectations): Promise<VerifiedProof> {
  const { jwk, header } = checkHeader(proof);
  const now = expected.nowSeconds ?? Math.floor(Date.now() / 1000);
  let payload: Record<string, unknown>;
  let jkt: string;
  try {
    ({ payload, jkt } = await signedPayload(proof, header, now));
  } catch (err) {
    throw new InvalidDpopProof('DPoP proof signature or claims invalid', { cause: err });
  }
  const jti = checkClaims(payload, expected, now);
  return { jkt, jti, iat: payload.iat as number, jwk, nonce: payload.nonce };
}

/**
 * §4.3 checks 6–7 and the times jose checked: the signature with the header's
 * key (imported as jose's EmbeddedJWK does, kept by thumbprint), then the
 * claims, a JSON object read strictly, whose `iat`, `nbf` and `exp` are numbers
 * and whose `nbf` and `exp`, when present, hold now.
 */
async function signedPayload(proof: string, header: ProofHeader, now: number): Promise<{ payload: Record<string, unknown>; jkt: string }> {
  const segments = splitCompactJws(proof)!;
  const signature = decodeBase64UrlStrict(segments.signature);
  const key = await proofKey(header, header.alg);
  if (signature === undefined || key === undefined || !(await jwsSignatureValid(header.alg, key.key, `${segments.header}.${segments.payload}`, signature))) {
    throw new Error('signature invalid');
  }
  const payload = decodeJsonSegment(segments.payload);
  if (payload === undefined) throw new Error('claims are not a JSON object');
  const { iat, nbf, exp } = payload;
  if ([iat, nbf, exp].some((time) => time !== undefined && typeof time !== 'number')) throw new Error('a time claim is not a number');
  if (typeof nbf === 'number' && nbf > now) throw new Error('nbf is in the future');
  if (typeof exp === 'number' && exp <= now) throw new Error('exp has passed');
  return { payload, jkt: key.jkt };
}

type ProofHeader = Record<string, unknown> & { alg: JwtAlgorithm; jwk: JWK };

/** §4.3 checks 2–7 before any crypto: one compact JWS, `typ`, an asymmetric `alg`, a public `jwk`, no extension. */
function checkHeader(proof: string): { jwk: JWK; header: ProofHeader } {
  if (proof.length > MAX_PROOF_LENGTH) throw new InvalidDpopProof('DPoP proof too large');
  if (proof.split('.').length !== 3) throw new InvalidDpopProof('DPoP proof is not a signed JWT');
  let header: Record<string, unknown>;
  try {
    header = decodeProtectedHeader(proof);
  } catch {
    throw new InvalidDpopProof('Malformed DPoP proof header');
  }
  if (header.typ !== 'dpop+jwt') throw new InvalidDpopProof('DPoP proof typ must be dpop+jwt');
  if (typeof header.alg !== 'string' || !DPOP_ALGORITHMS.includes(header.alg) || !isAsymmetricJwsAlgorithm(header.alg)) {
    throw new InvalidDpopProof('DPoP proof algorithm not allowed');
  }
  // jose refused every extension but b64, which a JWT may not use: none is understood here.
  if (header.crit !== undefined) throw new InvalidDpopProof('DPoP proof crit is not supported');
  const jwk = header.jwk;
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) throw new InvalidDpopProof('DPoP proof has no jwk');
  for (const member of PRIVATE_JWK_MEMBERS) {
    if (member in jwk) throw new InvalidDpopProof('DPoP proof jwk must be a public key');
  }
  return { jwk: jwk as JWK, header: header as ProofHeader };
}

/** §4.3 checks 8–12: `htm`, `htu`, `iat`, `jti`, `ath`. Returns the `jti`. */
function checkClaims(payload: Record<string, unknown>, expected: ProofExpectations, now: number): string {
  const { htm, htu, iat, jti, ath } = payload;
  if (typeof jti !== 'string' || jti === '' || jti.length > MAX_JTI_LENGTH) throw new InvalidDpopProof('DPoP proof jti missing or malformed');
  if (htm !== expected.method) throw new InvalidDpopProof('DPoP proof htm does not match the request method');
  if (typeof htu !== 'string' || normalizedHttpUri(htu) !== expected.htu) throw new InvalidDpopProof('DPoP proof htu does not match the request URI');
  if (typeof iat !== 'number' || !Number.isFinite(iat) || Math.abs(now - iat) > PROOF_WINDOW_SECONDS) {
    throw new InvalidDpopProof('DPoP proof iat is outside the accepted window');
  }
  if (expected.accessTokenHash !== undefined && ath !== expected.accessTokenHash) {
    throw new InvalidDpopProof('DPoP proof ath does not match the access token');
  }
  return jti;
}
