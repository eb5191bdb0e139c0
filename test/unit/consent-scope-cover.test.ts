/**
 * Remembered consent never covers more than was approved (DESIGN §8.3: with a dynamic client's
 * registered scope no longer a bound, the user's consent is what bounds an interactive grant).
 * Property: after a user approved scope set A for (client, redirect URI, resource), a request for
 * R skips the consent page only when R ⊆ A; the latest approval replaces the earlier one, and
 * another client, redirect URI or resource is never covered.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { UserConsents } from '../../src/authorization-server/interactions/user-consents.js';
import type { AuthorizationRequest } from '../../src/authorization-server/interactions/interactions.js';
import { MemoryStore } from '../../src/store/memory-store.js';

const SCOPES = ['mcp:read', 'mcp:write', 'mcp:admin', 'files:read', 'offline_access'];

const request = (scopes: string[], over: Partial<AuthorizationRequest> = {}): AuthorizationRequest => ({
  clientId: 'client-1',
  redirectUri: 'http://127.0.0.1:5000/cb',
  registeredRedirectUri: 'http://127.0.0.1/cb',
  redirectUriSent: true,
  codeChallenge: 'x'.repeat(43),
  resource: 'http://127.0.0.1:8080/demo/mcp',
  scopes,
  ...over,
});

describe("a user's remembered consent covers only what they approved", () => {
  it('covers R after approvals A1…An exactly when R ⊆ An; never another client, redirect URI or resource', async () => {
    const scopeSet = fc.subarray(SCOPES);
    await fc.assert(
      fc.asyncProperty(fc.array(scopeSet, { minLength: 1, maxLength: 4 }), scopeSet, async (approvals, asked) => {
        const consents = new UserConsents(new MemoryStore({ maxEntries: 1000 }), 'http://127.0.0.1:8080');
        for (const approved of approvals) await consents.remember('alice', request(approved));
        const last = approvals.at(-1)!;
        expect(await consents.covers('alice', request(asked))).toBe(asked.every((s) => last.includes(s)));
        for (const other of [{ clientId: 'client-2' }, { registeredRedirectUri: 'http://127.0.0.1/other' }, { resource: 'http://127.0.0.1:8080/other/mcp' }]) {
          expect(await consents.covers('alice', request(asked, other))).toBe(false);
        }
        expect(await consents.covers('bob', request(asked))).toBe(false);
      }),
      { numRuns: 200 },
    );
  });
});
