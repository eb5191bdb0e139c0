/**
 * Legacy HTTP+SSE upstreams (`upstream: { sse: URL }`, issue 14): the unmodified
 * server-everything in its `sse` mode behind the real gateway, reached by the
 * real MCP SDK client over Streamable HTTP, gives the same tools and results as
 * a direct SSEClientTransport connection to it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { connectWithToken } from '../helpers/mcp-client.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml, jwtRoute, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';

let everything: UpstreamHandle;
let issuer: TestIssuer;
let gw: TestGateway;
let routeUrl: string;
let aliceToken: string;

beforeAll(async () => {
  [everything, issuer] = await Promise.all([startEverythingServer('sse'), startTestIssuer('RS256')]);
  gw = await startTestGateway({
    'gateway.yaml': gatewayYaml(),
    'everything.yaml': jwtRoute('/everything/mcp', '', issuer, { upstream: { sse: everything.url } }),
  });
  routeUrl = `${gw.url}/everything/mcp`;
  aliceToken = await issuer.mint({ aud: 'https://mcp.example.test/everything/mcp', sub: 'alice' });
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([everything?.close(), issuer?.close()]);
});

async function direct(): Promise<Client> {
  const client = new Client({ name: 'direct', version: '0' });
  await client.connect(new SSEClientTransport(new URL(everything.url)));
  return client;
}

describe('an sse route', () => {
  it('lists the same tools as a direct SSE connection', async () => {
    const [through, straight] = await Promise.all([connectWithToken(routeUrl, aliceToken), direct()]);
    try {
      const [a, b] = await Promise.all([through.listTools(), straight.listTools()]);
      expect(a.tools.length).toBeGreaterThan(5);
      expect(a).toEqual(b);
      const echo = await through.callTool({ name: 'echo', arguments: { message: 'hi' } });
      expect(echo).toEqual(await straight.callTool({ name: 'echo', arguments: { message: 'hi' } }));
    } finally {
      await Promise.all([through.close(), straight.close()]);
    }
  });
});
