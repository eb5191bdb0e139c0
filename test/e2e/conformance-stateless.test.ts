/**
 * The conformance suite's (0.2.0 prerelease) server scenarios that apply to an intermediary pass
 * through the gateway (DESIGN §7.5): `dns-rebinding-protection` and `server-stateless`, at the
 * 2026-07-28 wire, every check SUCCESS (SKIPPED only where the scenario itself says a check does
 * not apply). The same scenarios run directly against the upstream first, so a failure through the
 * gateway is the gateway's.
 *
 *   conformance CLI ─▶ token hop ─▶ gateway (JWT check) ─▶ stateless 2026-07-28 server
 *
 * The upstream is test/helpers/stateless-mcp-server.ts: no server in node_modules speaks the
 * stateless wire, so it is a fixture written from the specification. The token hop stands in for an OAuth client, as in
 * conformance.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runServerConformance, startTokenInjectingHop, type ConformanceRun, type TokenInjectingHop } from '../helpers/conformance.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/net.js';
import { startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { startStatelessServer, type StatelessServer } from '../helpers/stateless-mcp-server.js';


let upstream: StatelessServer;
let issuer: TestIssuer;
let gateway: TestGateway;
let front: TokenInjectingHop;
let token: string;

beforeAll(async () => {
  upstream = await startStatelessServer();
  issuer = await startTestIssuer('RS256');
  const port = await freePort();
  front = await startTokenInjectingHop(`http://127.0.0.1:${port}/mcp`, () => token);
  const publicUrl = new URL(front.url).origin;
  gateway = await startTestGateway({
    'gateway.yaml': { listen: { host: '127.0.0.1', port }, public_url: publicUrl, log_level: 'warn' },
    'stateless.yaml': {
      path: '/mcp',
      upstream: upstream.url,
      authorization_servers: [issuer.issuer],
      token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['RS256'] } },
      scopes_supported: ['mcp:read'],
      required_scopes: ['mcp:read'],
      upstream_auth: { kind: 'none' },
    },
  });
  token = await issuer.mint({ aud: `${publicUrl}/mcp`, sub: 'conformance', client_id: 'conformance-cli', scope: 'mcp:read', exp: Math.floor(Date.now() / 1000) + 900 });
});

afterAll(async () => {
  await front?.close();
  await gateway?.stop();
  await issuer?.close();
  await upstream?.close();
});

/** Every check that is neither SUCCESS nor a SKIPPED the scenario justified, with its message. */
function notPassed(run: ConformanceRun): string[] {
  return run.results.flatMap((r) => r.checks.filter((c) => c.status !== 'SUCCESS' && c.status !== 'SKIPPED').map((c) => `${r.scenario} ${c.id}: ${c.status} ${c.errorMessage ?? ''}`));
}

/**
 * What the fixture alone gets wrong on purpose: it checks no Host or Origin (most servers put
 * behind a gateway do not), so the protection the scenario sees through the gateway is the gateway's.
 */
const FIXTURE_ALONE: Record<string, string[]> = {
  'dns-rebinding-protection': ['dns-rebinding-protection localhost-host-rebinding-rejected: FAILURE Expected HTTP 4xx for invalid Host/Origin headers, got 200'],
  'server-stateless': [],
};

describe('conformance 0.2.0 intermediary scenarios at the 2026-07-28 wire', () => {
  for (const scenario of Object.keys(FIXTURE_ALONE)) {
    it(`${scenario}: every check passes through the gateway`, async () => {
      const direct = await runServerConformance(upstream.url, { scenario, specVersion: '2026-07-28' });
      expect(direct.results.map((r) => r.scenario)).toEqual([scenario]);
      expect(notPassed(direct).map((line) => line.trim()), direct.stdout).toEqual(FIXTURE_ALONE[scenario]);
      const before = upstream.methods.length;
      const through = await runServerConformance(front.url, { scenario, specVersion: '2026-07-28' });
      expect(through.results.map((r) => r.scenario)).toEqual([scenario]);
      expect(notPassed(through), through.stdout).toEqual([]);
      const passed = through.results[0]!.checks.filter((c) => c.status === 'SUCCESS').length;
      expect(passed).toBeGreaterThanOrEqual(scenario === 'server-stateless' ? 30 : 2);
      // The run really reached the upstream through the gateway.
      expect(upstream.methods.length).toBeGreaterThan(before);
    }, 120_000);
  }
});
