// Reading scopes and the client id out of JWT claims or an introspection
// response, which spell them in several ways depending on the IdP.

/** `scope` (RFC 9068 / RFC 7662: space-separated) or `scp` (array, or a string as Entra ID sends it). */
export function scopesFrom(claims: Readonly<Record<string, unknown>>): string[] {
  const value = claims.scope ?? claims.scp;
  if (typeof value === 'string') return value.split(' ').filter((s) => s !== '');
  if (Array.isArray(value)) return value.filter((s): s is string => typeof s === 'string' && s !== '');
  return [];
}

/** `client_id` (RFC 9068, RFC 7662), else OpenID's `azp`; empty when the token names none. */
export function clientIdFrom(claims: Readonly<Record<string, unknown>>): string {
  if (typeof claims.client_id === 'string') return claims.client_id;
  if (typeof claims.azp === 'string') return claims.azp;
  return '';
}
