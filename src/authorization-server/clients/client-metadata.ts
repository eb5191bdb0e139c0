// RFC 7591 client metadata, as sent to /register or published in a Client ID
// Metadata Document (so always a dynamic client's): checked field by field,
// unknown fields ignored (RFC 7591 §2), nothing fetched (logo_uri, jwks_uri).
import { checkRedirectUri, type RedirectUriOptions } from '../../config/redirect-uri.js';
import { dynamicGrantRefusal } from './client-grants.js';
import { TOKEN_ENDPOINT_AUTH_METHODS, type GrantType, type TokenEndpointAuthMethod } from './client-record.js';

const MAX_REDIRECT_URIS = 20;
const MAX_TEXT = 1000;
const SCOPE = /^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$/;
const URL_FIELDS = ['client_uri', 'logo_uri', 'tos_uri', 'policy_uri'] as const;
const TEXT_FIELDS = ['client_name', 'software_id', 'software_version'] as const;

export interface ClientMetadata {
  redirectUris: string[];
  grantTypes: GrantType[];
  responseTypes: string[];
  tokenEndpointAuthMethod: TokenEndpointAuthMethod;
  applicationType: 'web' | 'native';
  scope?: string;
  /** Display and informational fields, as sent. */
  text: Partial<Record<(typeof URL_FIELDS)[number] | (typeof TEXT_FIELDS)[number], string>>;
}

export class ClientMetadataError extends Error {
  override readonly name = 'ClientMetadataError';
  constructor(
    readonly code: 'invalid_redirect_uri' | 'invalid_client_metadata',
    message: string,
  ) {
    super(message);
  }
}

export interface ParseOptions {
  /** RFC 7591's default is client_secret_basic; a metadata document's is none. */
  defaultAuthMethod: TokenEndpointAuthMethod;
}

export function parseClientMetadata(input: Record<string, unknown>, options: ParseOptions): ClientMetadata {
  const stated = input.application_type;
  if (stated !== undefined && stated !== 'web' && stated !== 'native') throw invalid('application_type must be web or native');
  // RFC 7591 / OpenID Connect: web unless stated; only a stated type narrows what its redirect URIs may be.
  const applicationType = stated ?? 'web';

  const authMethod = input.token_endpoint_auth_method ?? options.defaultAuthMethod;
  if (!TOKEN_ENDPOINT_AUTH_METHODS.includes(authMethod as TokenEndpointAuthMethod)) {
    throw invalid(`token_endpoint_auth_method must be one of ${TOKEN_ENDPOINT_AUTH_METHODS.join(', ')}`);
  }
  const tokenEndpointAuthMethod = authMethod as TokenEndpointAuthMethod;

  const grantTypes = unique(stringArray(input.grant_types, 'grant_types') ?? ['authorization_code']);
  // Only dynamic clients are described by metadata: the grants they may have are decided in client-grants.
  for (const grant of grantTypes) {
    const refusal = dynamicGrantRefusal(grant);
    if (refusal) throw invalid(refusal);
  }
  if (grantTypes.length === 0) throw invalid('grant_types must not be empty');

  const usesCode = grantTypes.includes('authorization_code');
  const responseTypes = unique(stringArray(input.response_types, 'response_types') ?? (usesCode ? ['code'] : []));
  for (const type of responseTypes) if (type !== 'code') throw invalid(`response type ${type} is not supported (only code)`);
  if (usesCode !== responseTypes.includes('code')) throw invalid('response_types code and grant_types authorization_code go together');

  const redirectUris = redirectUriList(input.redirect_uris, { nativeSchemes: applicationType === 'native', ...(stated !== undefined && { only: stated }) });
  if (usesCode && redirectUris.length === 0) throw new ClientMetadataError('invalid_redirect_uri', 'redirect_uris is required for the authorization_code grant');

  let scope: string | undefined;
  if (input.scope !== undefined) {
    if (typeof input.scope !== 'string' || input.scope.length > MAX_TEXT || (input.scope !== '' && !SCOPE.test(input.scope))) {
      throw invalid('scope must be a space-separated list of scope tokens');
    }
    scope = input.scope || undefined;
  }

  const text: ClientMetadata['text'] = {};
  for (const field of TEXT_FIELDS) {
    const value = input[field];
    if (value === undefined) continue;
    if (typeof value !== 'string' || value.length > MAX_TEXT) throw invalid(`${field} must be a string of at most ${MAX_TEXT} characters`);
    text[field] = value;
  }
  for (const field of URL_FIELDS) {
    const value = input[field];
    if (value === undefined) continue;
    if (typeof value !== 'string' || value.length > MAX_TEXT || !isWebUrl(value)) throw invalid(`${field} must be an http(s) URL`);
    text[field] = value;
  }
  return { redirectUris, grantTypes: grantTypes as GrantType[], responseTypes, tokenEndpointAuthMethod, applicationType, scope, text };
}

function redirectUriList(value: unknown, rules: RedirectUriOptions): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw new ClientMetadataError('invalid_redirect_uri', 'redirect_uris must be an array');
  if (value.length > MAX_REDIRECT_URIS) throw new ClientMetadataError('invalid_redirect_uri', `at most ${MAX_REDIRECT_URIS} redirect URIs`);
  for (const uri of value) {
    const verdict = checkRedirectUri(uri, rules);
    if (!verdict.ok) throw new ClientMetadataError('invalid_redirect_uri', verdict.reason);
  }
  return unique(value as string[]);
}

function stringArray(value: unknown, field: string): string[] | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length > 10 || !value.every((v) => typeof v === 'string')) throw invalid(`${field} must be an array of strings`);
  return value as string[];
}

function isWebUrl(value: string): boolean {
  return /^[\x21-\x7E]+$/.test(value) && URL.canParse(value) && /^https?:$/.test(new URL(value).protocol);
}

const unique = (values: string[]) => [...new Set(values)];

const invalid = (message: string) => new ClientMetadataError('invalid_client_metadata', message);
