// The enterprise IdPs this AS trusts for ID-JAGs (`authorization_server.
// enterprise_idps`) and their signing keys. The keys come from the configured
// jwks_uri only, through the gateway's one JWKS machinery (auth/jwks.ts:
// cached, refetched for an unknown `kid` at most once per cooldown, no
// redirects, bounded size and time): nothing in an assertion chooses a URL,
// and an issuer not listed here causes no fetch at all.
import type { JWTVerifyGetKey } from 'jose';
import type { JwksRegistry } from '../../auth/jwks.js';
import type { EnterpriseIdpConfig } from '../../config/types.js';

export interface EnterpriseIdps {
  /** The key resolver of a listed issuer (compared exactly); undefined for any other. */
  keysOf(issuer: string): JWTVerifyGetKey | undefined;
}

export function enterpriseIdps(configured: readonly EnterpriseIdpConfig[], jwks: JwksRegistry): EnterpriseIdps {
  const byIssuer = new Map(configured.map((idp) => [idp.issuer, idp.jwksUri]));
  return {
    keysOf(issuer) {
      const jwksUri = byIssuer.get(issuer);
      return jwksUri === undefined ? undefined : jwks.get(issuer, jwksUri);
    },
  };
}
