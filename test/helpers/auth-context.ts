// A verified principal for tests that need one without minting a token.
import type { AuthContext } from '../../src/auth/principal.js';
import { hashKeyPart } from '../../src/store/key-names.js';

export function testAuthContext(token = 'client-token', overrides: Partial<AuthContext> = {}): AuthContext {
  return {
    issuer: 'https://idp.example',
    subject: 'alice',
    clientId: 'c1',
    scopes: ['mcp:read'],
    expiresAt: Math.floor(Date.now() / 1000) + 3600,
    claims: {},
    token,
    tokenHash: hashKeyPart(token),
    ...overrides,
  };
}
