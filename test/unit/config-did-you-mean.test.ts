import { describe, expect, it } from 'vitest';
import { editDistance, knownKeysAt, nearestKnownKey } from '../../src/config/did-you-mean.js';
import { GatewayDocumentSchema, RouteSchema } from '../../src/config/schema.js';

describe('nearestKnownKey', () => {
  it('suggests the known key one typo away, at the top level and nested', () => {
    expect(nearestKnownKey(RouteSchema, { upstreem: 'x' }, [], 'upstreem')).toBe('upstream');
    expect(nearestKnownKey(RouteSchema, { token: { jwt: {} } }, ['token', 'jwt'], 'jwks_url')).toBe('jwks_uri');
    expect(nearestKnownKey(GatewayDocumentSchema, { limits: {} }, ['limits'], 'Store_Timeout')).toBe('store_timeout');
  });

  it('walks arrays and picks the option of a discriminated union the data names', () => {
    const data = { rules: [{ match: { tool: 'x' } }], upstream_auth: { kind: 'static', vaule: 'x' } };
    expect(nearestKnownKey(RouteSchema, data, ['rules', 0], 'require_scope')).toBe('require_scopes');
    expect(nearestKnownKey(RouteSchema, data, ['upstream_auth'], 'vaule')).toBe('value');
    expect(knownKeysAt(RouteSchema, data, ['upstream_auth']).sort()).toEqual(['header', 'kind', 'value']);
  });

  it('suggests nothing for a key far from every known one', () => {
    expect(nearestKnownKey(RouteSchema, {}, [], 'completely_unrelated')).toBeUndefined();
    expect(nearestKnownKey(RouteSchema, {}, [], 'xy')).toBeUndefined();
  });
});

describe('editDistance', () => {
  it('counts insertions, deletions and substitutions', () => {
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(editDistance('', 'abc')).toBe(3);
    expect(editDistance('same', 'same')).toBe(0);
  });
});
