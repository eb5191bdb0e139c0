/**
 * The MCP conformance suite's `authorization` scenarios (RFC 8414 metadata, then an
 * authorization_code + PKCE grant with `resource`) against the built-in authorization server,
 * with the CLI's browser leg played by the headless user (consent page, then the dev login).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followAuthorization } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { checkOutcomes, runAuthorizationConformance } from '../helpers/conformance.js';
import { headlessUser, startAsGateway, type AsGateway } from '../helpers/authorization-server.js';

let gateway: AsGateway;

beforeAll(async () => {
  gateway = await startAsGateway({ upstream: 'http://127.0.0.1:9/mcp' });
});
afterAll(async () => {
  await gateway?.stop();
});

async function registerPublicClient(redirectUri: string): Promise<string> {
  const res = await fetch(`${gateway.issuer}/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: 'MCP conformance suite', redirect_uris: [redirectUri], grant_types: ['authorization_code'], token_endpoint_auth_method: 'none' }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { client_id: string }).client_id;
}

describe('conformance `authorization` against the built-in AS', () => {
  it('passes every check', async () => {
    const callbackPort = await freePort();
    const clientId = await registerPublicClient(`http://127.0.0.1:${callbackPort}/callback`);
    const resource = `${gateway.issuer}/everything/mcp`;
    const authorizationUrls: URL[] = [];
    const run = await runAuthorizationConformance({
      issuer: gateway.issuer,
      clientId,
      resource,
      callbackPort,
      userAgent: (url, redirectUri) => {
        authorizationUrls.push(url);
        return followAuthorization(url, redirectUri, { onPage: headlessUser('conformance') });
      },
    });
    expect(authorizationUrls[0]?.searchParams.get('resource')).toBe(resource);
    expect(run.results.map((r) => [r.scenario, checkOutcomes(r)])).toEqual([
      ['authorization-server-metadata-endpoint', ['authorization-server-metadata-cimd: SUCCESS', 'authorization-server-metadata: SUCCESS']],
      ['authorization-code-grant', ['authorization-code-grant: SUCCESS']],
    ]);
    expect(run.exitCode).toBe(0);
  }, 90_000);
});
