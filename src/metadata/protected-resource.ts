// RFC 9728 protected resource metadata, built from configuration only: never
// from Host or X-Forwarded-* (SECURITY B10), so nothing a request sends is reflected.
import type { RouteConfig } from '../config/types.js';
import { DPOP_ALGORITHMS } from '../config/jws-algorithms.js';

export interface ProtectedResourceMetadata {
  resource: string;
  authorization_servers: string[];
  scopes_supported: string[];
  bearer_methods_supported: ['header'];
  resource_name?: string;
  /** RFC 9728 §2 (RFC 9449): the proof algorithms a route with DPoP accepts. */
  dpop_signing_alg_values_supported?: string[];
  /** Said only when true (`dpop: required`): absent means false (RFC 9728 §2). */
  dpop_bound_access_tokens_required?: true;
}

/** The path under which a route's metadata is served (RFC 9728 §3.1: well-known segment inserted before the path). */
export function metadataPath(route: RouteConfig): string {
  return new URL(route.resourceMetadataUrl).pathname;
}

export function protectedResourceMetadata(route: RouteConfig): ProtectedResourceMetadata {
  return {
    resource: route.resource,
    authorization_servers: route.authorizationServers,
    // 2026-07-28: offline_access is the AS's business, not advertised by the resource.
    scopes_supported: route.scopesSupported.filter((s) => s !== 'offline_access'),
    bearer_methods_supported: ['header'],
    ...(route.dpop && { dpop_signing_alg_values_supported: [...DPOP_ALGORITHMS] }),
    ...(route.dpop?.required && { dpop_bound_access_tokens_required: true }),
  };
}
