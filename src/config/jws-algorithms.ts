// The one list of JWS algorithms the gateway signs or verifies with. Asymmetric
// only: the verifying keys are published (a JWKS), so an HMAC "signature"
// checked with one would prove nothing (the classic confusion attack, RFC 8725
// §2.1). Config, the token verifiers, the IdP's logout tokens and the built-in
// AS's keys all read this list. `Ed25519` is RFC 9864's fully specified name
// for EdDSA over that curve; jose accepts both.
export const ASYMMETRIC_JWS_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'] as const;

export type JwtAlgorithm = (typeof ASYMMETRIC_JWS_ALGORITHMS)[number];

const ASYMMETRIC = new Set<string>(ASYMMETRIC_JWS_ALGORITHMS);

export function isAsymmetricJwsAlgorithm(alg: string): alg is JwtAlgorithm {
  return ASYMMETRIC.has(alg);
}

/**
 * The algorithms of DPoP proofs (RFC 9449 §4.3: asymmetric, never `none`),
 * what protected routes and the built-in AS accept and advertise
 * (`dpop_signing_alg_values_supported`).
 */
export const DPOP_ALGORITHMS: readonly string[] = ASYMMETRIC_JWS_ALGORITHMS;
