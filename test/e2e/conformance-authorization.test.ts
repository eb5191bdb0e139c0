/**
 * The conformance suite's `authorization` command (RFC 8414 metadata, then an authorization_code
 * + PKCE grant with `resource`) driven without a browser: the CLI prints an authorization URL
 * for a human, and `followAuthorization` plays that human.
 *
 * It runs against the external AS (oidc-provider) until the built-in AS exists; pointing it at
 * the built-in AS is a matter of `issuer`, a client registered at its `/register`, and a page
 * handler for its login and consent pages.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followAuthorization } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { startOidcProvider, type OidcProviderHandle } from '../helpers/oidc-provider.js';
import { checkOutcomes, runAuthorizationConformance } from '../helpers/conformance.js';

const RESOURCE = 'http://127.0.0.1:1/mcp';

let oidc: OidcProviderHandle;

beforeAll(async () => {
  oidc = await startOidcProvider({ resources: [RESOURCE], scopes: ['mcp:read'] });
});

afterAll(async () => {
  await oidc?.close();
});

/** Dynamic registration of a public client whose redirect URI is the CLI's callback server. */
async function registerPublicClient(issuer: string, redirectUri: string): Promise<string> {
  const metadata = (await (await fetch(`${issuer}/.well-known/openid-configuration`)).json()) as { registration_endpoint: string };
  const res = await fetch(metadata.registration_endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { client_id: string }).client_id;
}

describe('conformance `authorization` command', () => {
  it('completes the browser leg and reports every check (external AS)', async () => {
    const callbackPort = await freePort();
    const clientId = await registerPublicClient(oidc.issuer, `http://127.0.0.1:${callbackPort}/callback`);
    const authorizationUrls: URL[] = [];

    const run = await runAuthorizationConformance({
      issuer: oidc.issuer,
      clientId,
      resource: RESOURCE,
      callbackPort,
      userAgent: (url, redirectUri) => {
        authorizationUrls.push(url);
        return followAuthorization(url, redirectUri);
      },
    });

    const [url] = authorizationUrls;
    expect(url?.searchParams.get('code_challenge_method')).toBe('S256');
    expect(url?.searchParams.get('resource')).toBe(RESOURCE);
    expect(url?.searchParams.has('scope')).toBe(false);
    expect(run.results.map((r) => [r.scenario, checkOutcomes(r)])).toEqual([
      [
        'authorization-server-metadata-endpoint',
        [
          // oidc-provider does not advertise Client ID Metadata Documents
          'authorization-server-metadata-cimd: WARNING — Authorization server metadata does not include "client_id_metadata_document_supported"',
          'authorization-server-metadata: SUCCESS',
        ],
      ],
      [
        'authorization-code-grant',
        // The CLI asks for no `scope`; oidc-provider refuses that (RFC 6749 §3.3 lets an AS refuse
        // or apply a default). The built-in AS must apply a default for this check to pass.
        ['authorization-code-grant: FAILURE — Authorization error: access_denied'],
      ],
    ]);
  }, 90_000);
});
