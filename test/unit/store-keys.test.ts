import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import * as keys from '../../src/store/key-names.js';

describe('store keys', () => {
  it('hashKeyPart is sha256 base64url', () => {
    expect(keys.hashKeyPart('abc')).toBe(createHash('sha256').update('abc').digest('base64url'));
    expect(keys.hashKeyPart('abc')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('moving a `:` between parts never yields the same key', () => {
    expect(keys.consentKey('iss', 'a:b', 'c')).not.toBe(keys.consentKey('iss', 'a', 'b:c'));
    expect(keys.sessionBindingKey('/x:y', 'z')).not.toBe(keys.sessionBindingKey('/x', 'y:z'));
    expect(keys.rateLimitKey('a', '*')).not.toBe(keys.rateLimitKey('a', '**'));
  });

  it('no raw id, `:` or `*` from a variable part reaches the key', () => {
    const secret = 'code:*:secret';
    const all = [
      keys.sessionBindingKey(secret, secret),
      keys.clientKey(secret),
      keys.authorizationCodeKey(secret),
      keys.refreshTokenKey(secret),
      keys.refreshFamilyKey(secret),
      keys.grantKey(secret),
      keys.consentKey(secret, secret, secret),
      keys.pendingAuthorizationKey(secret),
      keys.idpTokenKey(secret),
      keys.rateLimitKey(secret, secret),
    ];
    for (const key of all) {
      expect(key).not.toContain('secret');
      expect(key).not.toContain('*');
      expect(key).toMatch(/^[a-z-]+(:[A-Za-z0-9_-]{43})+$/);
    }
    expect(new Set(all.map((key) => key.split(':')[0])).size).toBe(all.length);
  });
});
