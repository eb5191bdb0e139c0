// A client of the built-in AS, whichever way it became known: pre-registered
// in config, registered dynamically (RFC 7591), or described by a Client ID
// Metadata Document. Secrets are kept only as hashes.

import type { AuthorizationServerConfig } from '../../config/types.js';
import { JWT_BEARER_GRANT_TYPE } from '../../config/schema.js';

export const SUPPORTED_GRANT_TYPES = ['authorization_code', 'refresh_token', 'client_credentials', JWT_BEARER_GRANT_TYPE] as const;
export type GrantType = (typeof SUPPORTED_GRANT_TYPES)[number];

/** The grants /token accepts and the metadata lists under this configuration: jwt-bearer (ID-JAG) only with an enterprise IdP to trust. */
export function offeredGrantTypes(config: Pick<AuthorizationServerConfig, 'enterpriseIdps'>): GrantType[] {
  return SUPPORTED_GRANT_TYPES.filter((grant) => grant !== JWT_BEARER_GRANT_TYPE || config.enterpriseIdps.length > 0);
}

export const TOKEN_ENDPOINT_AUTH_METHODS = ['none', 'client_secret_basic', 'client_secret_post'] as const;
export type TokenEndpointAuthMethod = (typeof TOKEN_ENDPOINT_AUTH_METHODS)[number];

export type ClientKind = 'static' | 'dynamic' | 'metadata_document';

export interface ClientRecord {
  clientId: string;
  kind: ClientKind;
  redirectUris: string[];
  grantTypes: GrantType[];
  tokenEndpointAuthMethod: TokenEndpointAuthMethod;
  applicationType: 'web' | 'native';
  /** sha256 of the client secret, base64url; confidential clients only. */
  secretHash?: string;
  /** Self-asserted display data: shown escaped and marked as such, never fetched. */
  clientName?: string;
  clientUri?: string;
  logoUri?: string;
  /** `scope` as registered (RFC 7591), informational. */
  scope?: string;
  /** Pre-registered clients: the scopes they may be granted; undefined: any scope of the resource. */
  allowedScopes?: string[];
  /** Seconds since the epoch. */
  issuedAt: number;
  /** Milliseconds since the epoch: when a dynamic registration was last used (its lifetime restarts then). */
  lastUsedAt?: number;
}

export const isConfidential = (client: ClientRecord): boolean => client.tokenEndpointAuthMethod !== 'none';
