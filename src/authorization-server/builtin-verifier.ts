// Verifies, for one route, the access tokens this AS signs: the local key set
// (no network), issuer and audience exact, and `typ: at+jwt` (RFC 9068 §4),
// so no other JWT the gateway signs (an upstream `signed` credential, `typ:
// JWT`) can ever pass as an access token.
import { decodeProtectedHeader } from 'jose';
import type { RouteConfig } from '../config/types.js';
import { invalidToken } from '../errors/gateway-error.js';
import { createLocalJwtVerifier } from '../auth/jwt-verifier.js';
import type { TokenVerifier } from '../auth/verifier.js';
import { ACCESS_TOKEN_TYPE } from './access-token.js';
import type { SigningKeys } from './keys.js';

/** Allowed skew between replicas' clocks. */
const CLOCK_SKEW_SECONDS = 5;

export function createBuiltinVerifier(issuer: string, keys: SigningKeys): (route: RouteConfig) => TokenVerifier {
  return (route) => {
    const inner = createLocalJwtVerifier({
      issuer,
      audience: route.resource,
      getKeySet: () => keys.keySet,
      algorithms: keys.algorithms,
      clockSkewSeconds: CLOCK_SKEW_SECONDS,
    });
    return {
      async verify(token) {
        const context = await inner.verify(token);
        // The header decoded fine inside verify; the type is checked after the signature.
        const typ = decodeProtectedHeader(token).typ?.toLowerCase();
        if (typ !== ACCESS_TOKEN_TYPE && typ !== `application/${ACCESS_TOKEN_TYPE}`) throw invalidToken('Not an access token (typ must be at+jwt)');
        return context;
      },
    };
  };
}
