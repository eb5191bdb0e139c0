// The one place that decides which grants and which scopes a client may use.
// A dynamic client (RFC 7591 registration or Client ID Metadata Document) is
// anonymous: it gets only the grants that need a user's consent
// (authorization_code, and refresh_token after it). A machine token
// (client_credentials) and a token on an enterprise IdP's assertion (the
// jwt-bearer grant, ID-JAG) are for confidential clients the operator
// configured, within the scopes configured for each. A configured client's
// `scopes` bound every scope it may obtain. A dynamic client's registered
// `scope` bounds nothing (DESIGN §8.3): registration is open to anyone, so the
// bound protected nothing and broke step-up (the SDKs register with the first
// challenge's scope); the user's consent to each wider scope set bounds it.
import { JWT_BEARER_GRANT_TYPE } from '../../config/schema.js';
import type { ClientRecord, GrantType } from './client-record.js';

/** Grants only a client that authenticates at /token may use. */
const CONFIDENTIAL_ONLY: readonly GrantType[] = ['client_credentials', JWT_BEARER_GRANT_TYPE];

/** What an anonymously registered client may be registered for, and use. */
const DYNAMIC_CLIENT_GRANT_TYPES: readonly GrantType[] = ['authorization_code', 'refresh_token'];

/** Why a dynamic client may not be registered with `grant`; undefined when it may. */
export function dynamicGrantRefusal(grant: string): string | undefined {
  if ((DYNAMIC_CLIENT_GRANT_TYPES as readonly string[]).includes(grant)) return undefined;
  if (grant === 'client_credentials' || grant === JWT_BEARER_GRANT_TYPE) return `${grant} is only for clients configured by the operator, not for registered clients`;
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
  // A machine token, or one on an assertion's word (ID-JAG draft §8.1), needs a client that can prove who it is.
  return !CONFIDENTIAL_ONLY.includes(grant) || client.tokenEndpointAuthMethod !== 'none';
}

/** The scopes `client` may ever be granted; undefined: any scope of the resource the user consents to. */
export function clientScopeBound(client: ClientRecord): readonly string[] | undefined {
  return client.kind === 'static' ? client.allowedScopes : undefined;
}
