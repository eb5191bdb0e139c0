/**
 * What the built-in AS grants for a route: every scope the route names (advertised, required, or
 * required by a rule), so a step-up for the scope a 403 challenge asks for never ends on
 * invalid_scope, even when the route advertises only the minimal set MCP asks `scopes_supported`
 * to be (2025-11-25 and 2026-07-28, "Scope Selection Strategy"). The demo is such a route: its
 * protected resource metadata names mcp:read, its rules ask for mcp:write by step-up. A configured
 * client stays bounded by its `scopes`; a scope no part of the route names is refused.
 */
import { describe, expect, it } from 'vitest';
import type { RouteConfig } from '../../src/config/types.js';
import { DEMO_ROUTE_PATH, demoConfig } from '../../src/demo/demo.js';
import { resolveScopes, routeScopes } from '../../src/authorization-server/clients/resource-scope.js';
import type { ClientRecord } from '../../src/authorization-server/clients/client-record.js';
import { protectedResourceMetadata } from '../../src/metadata/protected-resource.js';

const dynamic: ClientRecord = {
  clientId: 'dyn',
  kind: 'dynamic',
  redirectUris: ['http://127.0.0.1/cb'],
  grantTypes: ['authorization_code'],
  tokenEndpointAuthMethod: 'none',
  applicationType: 'native',
  scope: 'mcp:read',
  issuedAt: 0,
};
const configured: ClientRecord = { ...dynamic, clientId: 'ci', kind: 'static', allowedScopes: ['mcp:read'] };

const route = (overrides: Partial<RouteConfig>) => ({ scopesSupported: ['mcp:read'], requiredScopes: ['mcp:read'], rules: [], ...overrides }) as RouteConfig;

describe('the scopes a route grants', () => {
  it('include the scopes its rules require, advertised or not; a scope no part of the route names is refused', () => {
    const r = route({ rules: [{ match: { method: 'tools/call', tool: 'add_*' }, requireScopes: ['mcp:write'] }] });
    expect(routeScopes(r)).toEqual(['mcp:read', 'mcp:write']);
    expect(resolveScopes(r, dynamic, 'mcp:read mcp:write')).toEqual({ ok: true, value: ['mcp:read', 'mcp:write'] });
    expect(resolveScopes(r, dynamic, 'mcp:read mcp:admin')).toMatchObject({ ok: false, error: 'invalid_scope' });
    // A configured client's scopes still bound it.
    expect(resolveScopes(r, configured, 'mcp:read mcp:write')).toMatchObject({ ok: false, error: 'invalid_scope' });
  });

  it('the demo advertises the minimal set (mcp:read) and grants every scope any of its challenges asks for', async () => {
    const config = await demoConfig(8080, 'http://127.0.0.1:3000/mcp');
    const demo = config.routes.find((r) => r.path === DEMO_ROUTE_PATH)!;
    expect(protectedResourceMetadata(demo).scopes_supported).toEqual(['mcp:read']);
    for (const r of config.routes) {
      expect(protectedResourceMetadata(r).scopes_supported, r.path).toEqual(['mcp:read']);
      const challenged = new Set([...r.requiredScopes, ...r.rules.flatMap((rule) => rule.requireScopes ?? [])]);
      expect([...challenged].sort(), r.path).toEqual(['mcp:read', 'mcp:write']);
      expect(resolveScopes(r, dynamic, [...challenged].join(' ')), r.path).toMatchObject({ ok: true });
    }
  });
});
