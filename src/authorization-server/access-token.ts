// RFC 9068 JWT access tokens: `typ: at+jwt`, audience = the route's canonical
// resource, short-lived (revocation takes effect at expiry; see docs).
import { randomUUID } from 'node:crypto';
import type { SigningKeys } from './keys.js';

export const ACCESS_TOKEN_TYPE = 'at+jwt';
/** Private claim naming the grant a token was issued under (`idp_token` finds the user's IdP tokens by it). */
export const GRANT_ID_CLAIM = 'gid';

export interface AccessTokenClaims {
  issuer: string;
  subject: string;
  clientId: string;
  resource: string;
  scopes: readonly string[];
  ttlMs: number;
  grantId: string;
}

export async function mintAccessToken(keys: SigningKeys, claims: AccessTokenClaims): Promise<{ token: string; expiresIn: number }> {
  const iat = Math.floor(Date.now() / 1000);
  const expiresIn = Math.max(1, Math.floor(claims.ttlMs / 1000));
  const token = await keys.signer.sign(
    {
      iss: claims.issuer,
      sub: claims.subject,
      aud: claims.resource,
      client_id: claims.clientId,
      scope: claims.scopes.join(' '),
      iat,
      exp: iat + expiresIn,
      jti: randomUUID(),
      [GRANT_ID_CLAIM]: claims.grantId,
    },
    { typ: ACCESS_TOKEN_TYPE },
  );
  return { token, expiresIn };
}
