// Which MCP server (RFC 8707 resource) and which scopes a request gets.
// `resource` must be one of the gateway's canonical route URIs, compared
// exactly; without it, a gateway with one route (or a default_resource) uses
// that route — what a 2025-03-26 client, which sends none, needs.
import type { RouteConfig } from '../../config/types.js';
import type { AsContext } from '../context.js';
import { clientScopeBound } from './client-grants.js';
import type { ClientRecord } from './client-record.js';

const OFFLINE_ACCESS = 'offline_access';

export type Resolved<T> = { ok: true; value: T } | { ok: false; error: 'invalid_target' | 'invalid_scope' | 'invalid_grant'; description: string };

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
 * the client's registered grant types) and one the client may have (a
 * configured client's bound, client-grants; a dynamic client's is the
 * user's consent). Without `scope`, the route's required scopes.
 */
export function resolveScopes(route: RouteConfig, client: ClientRecord, requested: string | undefined): Resolved<string[]> {
  const known = knownScopes(route);
  const bound = clientScopeBound(client);
  const asked = requested === undefined ? undefined : requested.split(' ').filter((s) => s !== '');
  const wanted = asked === undefined || asked.length === 0 ? route.requiredScopes : asked;
  const granted: string[] = [];
  for (const scope of wanted) {
    if (scope === OFFLINE_ACCESS) continue;
    if (!known.has(scope)) return { ok: false, error: 'invalid_scope', description: 'a requested scope is not supported by this MCP server' };
    if (bound && !bound.includes(scope)) return { ok: false, error: 'invalid_scope', description: 'a requested scope is not allowed for this client' };
    if (!granted.includes(scope)) granted.push(scope);
  }
  return { ok: true, value: granted };
}

/** client_credentials: without `scope`, the client's configured scopes that the route knows (else the route's required ones). */
export function resolveMachineScopes(route: RouteConfig, client: ClientRecord, requested: string | undefined): Resolved<string[]> {
  const bound = clientScopeBound(client);
  const asked = requested?.split(' ').filter((s) => s !== '') ?? [];
  if (asked.length > 0 || !bound) return resolveScopes(route, client, requested);
  const known = knownScopes(route);
  return { ok: true, value: bound.filter((scope) => known.has(scope)) };
}

/**
 * What a grant issued earlier may still be given, under the configuration
 * loaded now: its resource must still be served here (else invalid_grant),
 * and of its scopes only those the route and the client still allow. A grant
 * that held scopes and has none left is invalid_grant: a reload withdrew
 * everything it was for.
 */
export function stillGrantable(ctx: AsContext, client: ClientRecord, resource: string, scopes: readonly string[]): Resolved<string[]> {
  const route = ctx.resources.get(resource);
  if (!route) return { ok: false, error: 'invalid_grant', description: 'the resource of this grant is no longer served here' };
  const known = knownScopes(route);
  const bound = clientScopeBound(client);
  const kept = scopes.filter((scope) => known.has(scope) && (!bound || bound.includes(scope)));
  if (scopes.length > 0 && kept.length === 0) return { ok: false, error: 'invalid_grant', description: 'none of the scopes of this grant is allowed any more' };
  return { ok: true, value: kept };
}

/** Of `scopes`, those the route knows and the client may have, in order, once each; offline_access never (no refresh token follows). */
export function grantableScopes(route: RouteConfig, client: ClientRecord, scopes: readonly string[]): string[] {
  const known = knownScopes(route);
  const bound = clientScopeBound(client);
  return [...new Set(scopes)].filter((scope) => scope !== OFFLINE_ACCESS && known.has(scope) && (!bound || bound.includes(scope)));
}

/**
 * Every scope the route names: what it advertises (`scopes_supported`, which MCP
 * calls the minimal set for basic functionality), what it requires, and what
 * its rules require. A rule's scope is what its 403 challenge asks for, so the
 * AS grants it even when it is not advertised: else step-up would end on
 * invalid_scope for the very scope the route asked for.
 */
export function routeScopes(route: RouteConfig): string[] {
  const scopes = new Set([...route.scopesSupported, ...route.requiredScopes]);
  for (const rule of route.rules) for (const scope of rule.requireScopes ?? []) scopes.add(scope);
  return [...scopes];
}

const knownScopes = (route: RouteConfig): ReadonlySet<string> => new Set(routeScopes(route));
