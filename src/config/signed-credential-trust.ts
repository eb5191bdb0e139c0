// `upstream_auth: signed` hands upstreams JWTs signed with the built-in
// authorization server's key, `iss` the gateway's public URL. A route whose
// `token.jwt` trusts that issuer or the gateway's own key set would take such
// a credential, replayed by the upstream (or anyone who sees it), as an
// access token: an upstream could call the gateway as each of its callers.
// The built-in verifier refuses them (`typ` is `JWT`, not `at+jwt`, RFC 9068
// §4); a generic JWT route does not look at `typ`, so the configuration that
// would let one through is refused at load, by `check` and `serve` alike.
import type { RouteConfig, TokenConfig } from './types.js';
import { canonicalUrl } from './urls.js';
import type { ConfigPath } from './yaml-file.js';

export interface OwnIssuers {
  /** The gateway's public URL: the `iss` of the signed credentials. */
  publicUrl: string;
  /** The built-in authorization server's issuer, whose key signs them. */
  asIssuer: string;
}

const canonicalOrUndefined = (url: string) => (URL.canParse(url) ? canonicalUrl(url) : undefined);
const originOf = (url: string) => (URL.canParse(url) ? new URL(url).origin : undefined);

/** Each route (by index) whose tokens could be the signed credentials another route hands out: where, and why. */
export function signedCredentialTrust(routes: readonly RouteConfig[], own: OwnIssuers): Array<{ index: number; path: ConfigPath; message: string }> {
  if (!routes.some((r) => r.upstreamAuth.kind === 'signed')) return [];
  return routes.flatMap((route, index) => {
    const trusted = trustsSignedCredentials(route.token, own);
    return trusted ? [{ index, ...trusted }] : [];
  });
}

/** Where and why a route's tokens could be the gateway's own signed credentials; undefined when they cannot. */
export function trustsSignedCredentials(token: TokenConfig, own: OwnIssuers): { path: ConfigPath; message: string } | undefined {
  if (token.kind !== 'jwt') return undefined;
  const issuer = canonicalOrUndefined(token.issuer);
  if (issuer === own.publicUrl || issuer === own.asIssuer) {
    return { path: ['token', 'jwt', 'issuer'], message: 'this issuer is the gateway itself, whose key signs the upstream_auth: signed credentials of another route: they would pass here as access tokens (use the built-in tokens: no token: section)' };
  }
  const keys = token.jwksUri === undefined ? undefined : originOf(token.jwksUri);
  if (keys !== undefined && (keys === originOf(own.publicUrl) || keys === originOf(own.asIssuer))) {
    return { path: ['token', 'jwt', 'jwks_uri'], message: 'these keys are the gateway\'s own, which sign the upstream_auth: signed credentials of another route: they would pass here as access tokens' };
  }
  return undefined;
}
