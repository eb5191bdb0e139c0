// RFC 9068 JWT access tokens: `typ: at+jwt`, audience = the route's canonical
// resource, short-lived, and naming their grant (`gid`): revoking the grant
// stops them within seconds (RevokedGrants).
import { randomUUID } from 'node:crypto';
import { jwtVerify } from 'jose';
import type { SigningKeys } from '../keys/signing-keys.js';

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
  /** The DPoP key the token is bound to (RFC 9449 §6.1: `cnf.jkt`); undefined: a bearer token. */
  jkt?: string;
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
      ...(claims.jkt !== undefined && { cnf: { jkt: claims.jkt } }),
    },
    { typ: ACCESS_TOKEN_TYPE },
  );
  return { token, expiresIn };
}

/**
 * The grant and client of an access token this AS signed (signature, issuer,
 * `typ` and expiry checked; any audience), for /revoke; undefined for any
 * other string. A token is never trusted for more than naming what to revoke.
 */
export async function grantOfAccessToken(keys: SigningKeys, issuer: string, token: string): Promise<{ grantId: string; clientId: string; subject?: string } | undefined> {
  try {
    const { payload } = await jwtVerify(token, keys.keySet, { issuer, typ: ACCESS_TOKEN_TYPE, algorithms: [...keys.algorithms] });
    const grantId = payload[GRANT_ID_CLAIM];
    const clientId = payload.client_id;
    return typeof grantId === 'string' && typeof clientId === 'string' ? { grantId, clientId, subject: payload.sub } : undefined;
  } catch {
    return undefined;
  }
}
