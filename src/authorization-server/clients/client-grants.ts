// The one place that decides which grants and which scopes a client may use.
// A dynamic client (RFC 7591 registration or Client ID Metadata Document) is
// anonymous: it gets only the grants that need a user's consent
// (authorization_code, and refresh_token after it). A machine token
// (client_credentials) is for clients the operator configured, within the
// scopes configured for each. A client's registered `scope` (dynamic) or
// configured `scopes` (static) bounds every scope it may later obtain.
import type { ClientRecord, GrantType } from './client-record.js';

/** What an anonymously registered client may be registered for, and use. */
const DYNAMIC_CLIENT_GRANT_TYPES: readonly GrantType[] = ['authorization_code', 'refresh_token'];

/** Why a dynamic client may not be registered with `grant`; undefined when it may. */
export function dynamicGrantRefusal(grant: string): string | undefined {
  if ((DYNAMIC_CLIENT_GRANT_TYPES as readonly string[]).includes(grant)) return undefined;
  if (grant === 'client_credentials') return 'client_credentials is only for clients configured by the operator, not for registered clients';
  if (grant === 'implicit' || grant === 'password') return `the ${grant} grant is not supported (OAuth 2.1)`;
  return `grant type ${grant} is not supported`;
}

/**
 * Whether `client` may use `grant` now. Checked again at /token, so a record
 * stored before this rule (a dynamic client registered with
 * client_credentials) gets nothing from it.
 */
export function mayUseGrant(client: ClientRecord, grant: GrantType): boolean {
  if (!client.grantTypes.includes(grant)) return false;
  if (client.kind !== 'static') return DYNAMIC_CLIENT_GRANT_TYPES.includes(grant);
  // A machine token needs a client that can prove who it is.
  return grant !== 'client_credentials' || client.tokenEndpointAuthMethod !== 'none';
}

/** The scopes `client` may ever be granted; undefined: any scope of the resource. */
export function clientScopeBound(client: ClientRecord): readonly string[] | undefined {
  if (client.kind === 'static') return client.allowedScopes;
  return client.scope === undefined ? undefined : client.scope.split(' ').filter((s) => s !== '');
}
