// RFC 8414 authorization server metadata, and the same document at the
// OpenID Connect discovery paths (2025-11-25). `issuer` is exactly the URL
// base the document is served under (2026-07-28: it must equal the URL it was
// fetched by). Built from configuration only, never from request headers.
import { Hono } from 'hono';
import { AS_ENDPOINTS } from '../../config/reserved-paths.js';
import type { AsContext } from '../context.js';
import { endpointUrl } from '../context.js';
import { publicCors } from '../helpers/cors.js';
import { offeredGrantTypes, TOKEN_ENDPOINT_AUTH_METHODS } from '../clients/client-record.js';
import { routeScopes } from '../clients/resource-scope.js';
import { ID_JAG_GRANT_PROFILE } from '../idp/id-jag.js';
import { DPOP_ALGORITHMS } from '../../config/jws-algorithms.js';

function authorizationServerMetadata(ctx: AsContext): Record<string, unknown> {
  const scopes = new Set<string>();
  for (const route of ctx.resources.values()) for (const scope of routeScopes(route)) scopes.add(scope);
  // 2026-07-28: offline_access is not advertised (clients registered for refresh_token get refresh tokens anyway).
  scopes.delete('offline_access');
  return {
    issuer: ctx.issuer,
    authorization_endpoint: endpointUrl(ctx.issuer, AS_ENDPOINTS.authorize),
    token_endpoint: endpointUrl(ctx.issuer, AS_ENDPOINTS.token),
    ...(ctx.config.dynamicRegistration && { registration_endpoint: endpointUrl(ctx.issuer, AS_ENDPOINTS.register) }),
    revocation_endpoint: endpointUrl(ctx.issuer, AS_ENDPOINTS.revoke),
    jwks_uri: endpointUrl(ctx.issuer, AS_ENDPOINTS.jwks),
    scopes_supported: [...scopes],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: offeredGrantTypes(ctx.config),
    // ID-JAG draft-04 §7.2: the profile, never which IdPs are trusted (§8.4).
    ...(ctx.config.enterpriseIdps.length > 0 && { authorization_grant_profiles_supported: [ID_JAG_GRANT_PROFILE] }),
    token_endpoint_auth_methods_supported: [...TOKEN_ENDPOINT_AUTH_METHODS],
    revocation_endpoint_auth_methods_supported: [...TOKEN_ENDPOINT_AUTH_METHODS],
    code_challenge_methods_supported: ['S256'],
    client_id_metadata_document_supported: ctx.config.clientIdMetadataDocuments,
    authorization_response_iss_parameter_supported: true,
    // RFC 9449 §5.1: a proof at /token gets a DPoP-bound token.
    dpop_signing_alg_values_supported: [...DPOP_ALGORITHMS],
  };
}

/** Every path the document is served at: the root forms, and the path-inserted ones when the issuer has a path. */
function metadataPaths(issuer: string): string[] {
  const path = new URL(issuer).pathname.replace(/\/$/, '');
  const paths = ['/.well-known/oauth-authorization-server', '/.well-known/openid-configuration'];
  if (path) {
    paths.push(`/.well-known/oauth-authorization-server${path}`, `/.well-known/openid-configuration${path}`, `${path}/.well-known/openid-configuration`);
  }
  return paths;
}

export function metadataRoutes(ctx: AsContext): Hono {
  const app = new Hono();
  const body = JSON.stringify(authorizationServerMetadata(ctx));
  // A 2025-03-26 client sends MCP-Protocol-Version and gets the same document.
  for (const path of metadataPaths(ctx.issuer)) {
    app.use(path, publicCors);
    app.get(path, (c) => c.body(body, 200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=300' }));
  }
  return app;
}
