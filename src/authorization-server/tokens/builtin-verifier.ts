// Verifies, for one route, the access tokens this AS signs: the local key set
// (no network), issuer and audience exact, and `typ: at+jwt` (RFC 9068 §4),
// so no other JWT the gateway signs (an upstream `signed` credential, `typ:
// JWT`) can ever pass as an access token. Then, on every request (cached and
// recalled ones included), that the token's grant is not revoked.
import { decodeProtectedHeader } from 'jose';
import type { AuthContext } from '../../auth/principal.js';
import type { RouteConfig } from '../../config/types.js';
import { GatewayError, invalidToken, temporarilyUnavailable } from '../../errors/gateway-error.js';
import { createLocalJwtVerifier } from '../../auth/jwt-verifier.js';
import type { TokenVerifier } from '../../auth/verifier.js';
import { ACCESS_TOKEN_TYPE, GRANT_ID_CLAIM } from './access-token.js';
import type { SigningKeys } from '../keys/signing-keys.js';
import type { RevokedGrants } from './revoked-grants.js';

/** Allowed skew between replicas' clocks. */
const CLOCK_SKEW_SECONDS = 5;

// Built once: the refusals carry no per-token detail.
const REVOKED = invalidToken('The token has been revoked');
const NO_GRANT = invalidToken('The token names no grant');
const UNKNOWN = temporarilyUnavailable('The gateway cannot confirm that this token was not revoked; try again');

export function createBuiltinVerifier(issuer: string, keys: SigningKeys, revokedGrants: RevokedGrants): (route: RouteConfig) => TokenVerifier {
  const usable = (auth: AuthContext): GatewayError | undefined => {
    const grantId = auth.claims[GRANT_ID_CLAIM];
    if (typeof grantId !== 'string') return NO_GRANT;
    switch (revokedGrants.state(grantId)) {
      case 'usable':
        return undefined;
      case 'revoked':
        return REVOKED;
      case 'unknown':
        return UNKNOWN;
    }
  };
  return (route) => {
    const inner = createLocalJwtVerifier({
      issuer,
      audience: route.resource,
      getKeySet: () => keys.keySet,
      algorithms: keys.algorithms,
      clockSkewSeconds: CLOCK_SKEW_SECONDS,
    });
    return {
      async verify(token, seenOn, tokenHash) {
        const context = await inner.verify(token, seenOn, tokenHash);
        // The header decoded fine inside verify; the type is checked after the signature.
        const typ = decodeProtectedHeader(token).typ?.toLowerCase();
        if (typ !== ACCESS_TOKEN_TYPE && typ !== `application/${ACCESS_TOKEN_TYPE}`) throw invalidToken('Not an access token (typ must be at+jwt)');
        return context;
      },
      usable,
    };
  };
}
