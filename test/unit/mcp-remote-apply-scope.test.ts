/**
 * Why `mcp-remote` 0.15.1 cannot step up where the step-up scope spells `scopes_supported` (issue 24
 * item 3; docs/clients.md, "mcp-remote's applyScope"; the demo advertised that before it advertised
 * the minimal set, mcp:read, as MCP asks), pinned
 * on its own unmodified code: `NodeOAuthClientProvider.applyScope` (dist/chunk-KJCT2FXL.js:35320-35336,
 * upstream src/lib/node-oauth-client-provider.ts) runs on every authorization URL the SDK builds and
 * decides whether the URL's `scope` came from the server or from mcp-remote itself. It decides by
 * string equality: a scope equal to its effective scope (the first 401's `scope`) or to the
 * protected resource's `scopes_supported` joined with spaces is taken for its own and replaced by the
 * effective scope. On a 403 insufficient_scope the SDK asks for the union of the token's scope and
 * the challenge's (computeScopeUnion, :27811, called at :31098); where that union reads exactly like `scopes_supported`
 * — a server advertising "mcp:read mcp:write" — the step-up is turned back into the first scope. The MCP
 * authorization spec (2025-11-25 and 2026-07-28) says clients MUST NOT assume any set relation between
 * the challenged scopes and `scopes_supported` and MUST treat the challenge's scopes as authoritative.
 *
 * Property over scope alphabets: the URL keeps its scope S unless S equals the first scope I or
 * scopes_supported.join(' ') character for character, and then it reads I. So a step-up (S ⊋ I) is
 * undone exactly when S spells scopes_supported in its order.
 */
import { readdir } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi, type MockInstance } from 'vitest';

interface Provider {
  applyScope(url: URL): void;
}
type ProviderClass = new (options: Record<string, unknown>) => Provider;

const require = createRequire(import.meta.url);
const packageJson = require.resolve('mcp-remote/package.json');
const dist = join(packageJson, '..', 'dist');

/** mcp-remote's provider class, from whichever bundle chunk exports it. */
async function providerClass(): Promise<ProviderClass> {
  for (const file of (await readdir(dist)).filter((f) => /^chunk-.*\.js$/.test(f))) {
    const chunk = (await import(pathToFileURL(join(dist, file)).href)) as { NodeOAuthClientProvider?: ProviderClass };
    if (chunk.NodeOAuthClientProvider) return chunk.NodeOAuthClientProvider;
  }
  throw new Error('no chunk of mcp-remote exports NodeOAuthClientProvider');
}

let Provider: ProviderClass;
let stderr: MockInstance<(...args: unknown[]) => void>;
const KEPT = 'Authorizing with the scope the server asked for';

beforeAll(async () => {
  Provider = await providerClass();
  stderr = vi.spyOn(console, 'error').mockImplementation(() => undefined);
});
afterAll(() => stderr.mockRestore());

/** The scope mcp-remote sends when the SDK asks for `requested`, and whether it said it kept the server's. */
function sent(firstScope: string, scopesSupported: string[], requested: string): { scope: string | null; keptLogged: boolean } {
  const provider = new Provider({
    serverUrlHash: 'unit',
    wwwAuthenticateScope: firstScope,
    protectedResourceMetadata: { resource: 'http://127.0.0.1/demo/mcp', scopes_supported: scopesSupported },
  });
  const url = new URL('http://127.0.0.1/authorize');
  url.searchParams.set('scope', requested);
  stderr.mockClear();
  provider.applyScope(url);
  return { scope: url.searchParams.get('scope'), keptLogged: stderr.mock.calls.some((c) => String(c[0]).includes(KEPT)) };
}

/** The SDK's step-up scope: the token's scope, then the challenge's, each scope once, in first-seen order. */
const union = (...scopes: string[]) => [...new Set(scopes.flatMap((s) => s.split(/\s+/).filter(Boolean)))].join(' ');

describe('mcp-remote 0.15.1 applyScope: a scope that reads like scopes_supported is taken for its own', () => {
  it('is the version these findings are about', () => {
    expect((require(packageJson) as { version: string }).version).toBe('0.15.1');
  });

  it('where scopes_supported is mcp:read mcp:write: the step-up scope "mcp:read mcp:write" spells it and is replaced by mcp:read', () => {
    const demo = ['mcp:read', 'mcp:write'];
    // The gateway's challenge names every scope the call needs (MCP 2025-11-25's recommended form)…
    expect(sent('mcp:read', demo, union('mcp:read', 'mcp:read mcp:write'))).toEqual({ scope: 'mcp:read', keptLogged: false });
    // …and a challenge naming only the missing scope (2026-07-28's example) would not help: the SDK's union reads the same.
    expect(sent('mcp:read', demo, union('mcp:read', 'mcp:write'))).toEqual({ scope: 'mcp:read', keptLogged: false });
  });

  it('through the test route (a third scope advertised) and the demo (the minimal set, mcp:read) the same step-up is kept', () => {
    expect(sent('mcp:read', ['mcp:read', 'mcp:write', 'mcp:admin'], 'mcp:read mcp:write')).toEqual({ scope: 'mcp:read mcp:write', keptLogged: true });
    expect(sent('mcp:read', ['mcp:read'], 'mcp:read mcp:write')).toEqual({ scope: 'mcp:read mcp:write', keptLogged: true });
  });

  it('for any first scope, scopes_supported and requested scope: kept unless it spells one of the two, then the first scope', () => {
    const alphabet = ['mcp:read', 'mcp:write', 'mcp:admin', 'files:read'];
    const scopeList = fc.uniqueArray(fc.constantFrom(...alphabet), { minLength: 1, maxLength: alphabet.length });
    fc.assert(
      fc.property(scopeList, scopeList, scopeList, (first, supported, requested) => {
        const [firstScope, requestedScope] = [first.join(' '), requested.join(' ')];
        const ours = requestedScope === firstScope || requestedScope === supported.join(' ');
        const outcome = sent(firstScope, supported, requestedScope);
        expect(outcome).toEqual(ours ? { scope: firstScope, keptLogged: false } : { scope: requestedScope, keptLogged: true });
      }),
      { numRuns: 300 },
    );
  });

  it('a step-up (a strict superset of the first scope) is undone exactly when it spells scopes_supported in order', () => {
    const alphabet = ['mcp:read', 'mcp:write', 'mcp:admin'];
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.constantFrom(...alphabet), { minLength: 1, maxLength: 2 }),
        fc.uniqueArray(fc.constantFrom(...alphabet), { minLength: 1, maxLength: 3 }),
        fc.shuffledSubarray(alphabet, { minLength: 1 }),
        (first, challenge, supported) => {
          const stepUp = union(first.join(' '), challenge.join(' '));
          fc.pre(stepUp !== first.join(' '));
          const { scope } = sent(first.join(' '), supported, stepUp);
          expect(scope).toBe(stepUp === supported.join(' ') ? first.join(' ') : stepUp);
        },
      ),
      { numRuns: 300 },
    );
  });
});
