// Which MCP server (RFC 8707 resource) and which scopes a request gets.
// `resource` must be one of the gateway's canonical route URIs, compared
// exactly; without it, a gateway with one route (or a default_resource) uses
// that route — what a 2025-03-26 client, which sends none, needs.
import type { RouteConfig } from '../config/types.js';
import type { AsContext } from './context.js';
import type { ClientRecord } from './client-record.js';

export const OFFLINE_ACCESS = 'offline_access';

export type Resolved<T> = { ok: true; value: T } | { ok: false; error: 'invalid_target' | 'invalid_scope'; description: string };

export function resolveResource(ctx: AsContext, requested: string | undefined): Resolved<RouteConfig> {
  if (requested === undefined || requested === '') {
    const fallback = ctx.config.defaultResource ?? (ctx.resources.size === 1 ? [...ctx.resources.keys()][0] : undefined);
    const route = fallback === undefined ? undefined : ctx.resources.get(fallback);
    if (!route) return { ok: false, error: 'invalid_target', description: 'resource is required: this gateway serves several MCP servers' };
    return { ok: true, value: route };
  }
  const route = ctx.resources.get(requested);
  if (!route) return { ok: false, error: 'invalid_target', description: 'resource is not an MCP server of this gateway' };
  return { ok: true, value: route };
}

/**
 * The scopes granted for `requested` (space-separated): each must be one the
 * route knows (offline_access is accepted and dropped: refresh tokens follow
 * the client's registered grant types) and one the client may have. Without
 * `scope`, the route's required scopes.
 */
export function resolveScopes(route: RouteConfig, client: ClientRecord, requested: string | undefined): Resolved<string[]> {
  const known = new Set([...route.scopesSupported, ...route.requiredScopes]);
  const asked = requested === undefined ? undefined : requested.split(' ').filter((s) => s !== '');
  const wanted = asked === undefined || asked.length === 0 ? route.requiredScopes : asked;
  const granted: string[] = [];
  for (const scope of wanted) {
    if (scope === OFFLINE_ACCESS) continue;
    if (!known.has(scope)) return { ok: false, error: 'invalid_scope', description: 'a requested scope is not supported by this MCP server' };
    if (client.allowedScopes && !client.allowedScopes.includes(scope)) {
      return { ok: false, error: 'invalid_scope', description: 'a requested scope is not allowed for this client' };
    }
    if (!granted.includes(scope)) granted.push(scope);
  }
  return { ok: true, value: granted };
}
