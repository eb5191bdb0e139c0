/**
 * The official MCP conformance suite's server scenarios give the same results through the
 * gateway as directly against the upstream (the unmodified reference "everything" server):
 *
 *   direct:  conformance CLI ───────────────────────────────────────────────────────────▶ server-everything
 *   gateway: conformance CLI ─▶ token hop ─▶ gateway (JWT check) ─▶ recording hop ─▶ server-everything
 *
 * The token hop adds `Authorization: Bearer <jwt>` (a client_credentials token from the real
 * oidc-provider, audience = the route's resource) and stands in for an OAuth-capable client: the
 * CLI has no way to send a token. It is also the gateway's front door (like an ingress), so its
 * origin is the gateway's public_url. The recording hop proves what reached the upstream.
 *
 * Every scenario of the suite (`--suite all`: active, pending, draft and extension; about 2 s a
 * run) runs directly and through the gateway, twice: each scenario at its own revision, then all
 * at the 2026-07-28 wire. Both runs use the same upstream process, one after the other. Each
 * check is compared by id, status and message (ports and UUIDs elided): most checks fail against
 * server-everything (it lacks the suite's fixture tools, e.g. `test_sampling`, and the stateless
 * wire), and they must fail the same way through the gateway.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/net.js';
import { mintClientCredentialsToken, startOidcProvider, type OidcProviderHandle } from '../helpers/oidc-provider.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';
import {
  compareRuns,
  conformanceNodeVersion,
  runServerConformance,
  startTokenInjectingHop,
  sideBySide,
  type ExpectedDifference,
  type TokenInjectingHop,
} from '../helpers/conformance.js';

/**
 * Where the gateway's answer is deliberately not the upstream's: the gateway does what the
 * specification asks where this upstream does not.
 */
const JUSTIFIED: ExpectedDifference[] = [
  {
    scenario: 'server-session-lifecycle',
    direct: 'server-session-terminated-returns-404: FAILURE — Expected 404 on terminated session ID, got 400',
    gateway: 'server-session-terminated-returns-404: SUCCESS',
    why:
      'the gateway forgets a session binding once the upstream accepted its DELETE and answers the ' +
      'terminated id itself with 404 (transports: "MUST respond ... with HTTP 404"); server-everything answers 400',
  },
  {
    scenario: 'dns-rebinding-protection',
    direct: 'localhost-host-rebinding-rejected: FAILURE — Expected HTTP 4xx for invalid Host/Origin headers, got 200',
    gateway: 'localhost-host-rebinding-rejected: SUCCESS',
    why: 'Origin http://evil.example.com is neither the gateway\'s nor an allowed origin: 403 before forwarding (SECURITY H41)',
  },
  {
    scenario: 'tasks-request-headers',
    direct: 'tasks-headers-reject-mismatched-method: FAILURE — expected -32020 HeaderMismatch; got -32000',
    gateway: 'tasks-headers-reject-mismatched-method: SUCCESS',
    why: 'an Mcp-Method header that contradicts the body is refused with 400 and JSON-RPC -32020 (docs/policies.md, "What is judged"; 2026-07-28)',
  },
];

/** At both wires: server-everything (SDK 1.x) does not check the 2026-07-28 routing headers; the gateway does. */
const HEADER_MISMATCH: ExpectedDifference = {
  scenario: 'server-stateless',
  direct: 'sep-2575-http-server-header-mismatch-400: FAILURE — Expected HTTP 400 and JSON-RPC error -32020, got status 400 with code -32000',
  gateway: 'sep-2575-http-server-header-mismatch-400: SUCCESS',
  why: 'a 2026-07-28 request whose Mcp-Method or Mcp-Name header contradicts its body is refused with 400 and JSON-RPC -32020 before forwarding (DESIGN §4a)',
};

/** Gateway bugs the suite found; each entry fails the test once the bug is fixed, so it gets removed. */
const KNOWN_GATEWAY_BUGS: ExpectedDifference[] = [];

const WIRES = [
  { name: 'each scenario at its own revision', specVersion: undefined, expected: [...JUSTIFIED, HEADER_MISMATCH, ...KNOWN_GATEWAY_BUGS], methods: ['DELETE', 'GET', 'POST'] },
  // server-everything (SDK 1.x) does not speak the stateless wire: nearly every check fails
  // directly. Extension scenarios (tasks) do not run at a dated --spec-version.
  { name: 'all at the 2026-07-28 wire', specVersion: '2026-07-28', expected: [HEADER_MISMATCH], methods: ['POST'] },
];

let everything: UpstreamHandle;
let recorder: RecordingHop;
let oidc: OidcProviderHandle;
let gateway: TestGateway;
let front: TokenInjectingHop;
let token: string;

beforeAll(async () => {
  everything = await startEverythingServer();
  recorder = await startRecordingHop(everything.url);
  const port = await freePort();
  front = await startTokenInjectingHop(`http://127.0.0.1:${port}/mcp`, () => token);
  const publicUrl = new URL(front.url).origin;
  const resource = `${publicUrl}/mcp`;
  oidc = await startOidcProvider({ resources: [resource], scopes: ['mcp:read'], accessTokenTtl: 900 });
  gateway = await startTestGateway({
    'gateway.yaml': { listen: { host: '127.0.0.1', port }, public_url: publicUrl, log_level: 'warn' },
    'everything.yaml': {
      path: '/mcp',
      upstream: recorder.url,
      authorization_servers: [oidc.issuer],
      token: { jwt: { issuer: oidc.issuer, jwks_uri: oidc.jwksUri } },
      scopes_supported: ['mcp:read'],
      required_scopes: ['mcp:read'],
      upstream_auth: { kind: 'none' },
    },
  });
  token = await mintClientCredentialsToken(oidc, { resource, scope: 'mcp:read' });
});

afterAll(async () => {
  await front?.close();
  await gateway?.stop();
  await oidc?.close();
  await recorder?.close();
  await everything?.close();
});

async function requestsByDecision(): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const { labels, value } of (await gateway.metrics.requests.get()).values) {
    counts[String(labels.decision)] = (counts[String(labels.decision)] ?? 0) + value;
  }
  return counts;
}

describe('MCP conformance suite, server scenarios: directly vs through the gateway', () => {
  it('runs the suite on Node >= 22', async () => {
    expect(Number(/^v(\d+)\./.exec(await conformanceNodeVersion())?.[1])).toBeGreaterThanOrEqual(22);
  });

  it('the gateway route refuses a request without the token the front hop adds', async () => {
    const res = await fetch(`${gateway.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain(`resource_metadata="${new URL(front.url).origin}/.well-known/oauth-protected-resource/mcp"`);
  });

  for (const wire of WIRES) {
    it(`gives the same per-check results (${wire.name})`, async () => {
      const direct = await runServerConformance(everything.url, { specVersion: wire.specVersion });
      const recordedBefore = recorder.requests.length;
      const decisionsBefore = await requestsByDecision();
      const through = await runServerConformance(front.url, { specVersion: wire.specVersion });

      expect(direct.results.length, direct.stdout).toBeGreaterThanOrEqual(40);
      expect(through.results.map((r) => r.scenario)).toEqual(direct.results.map((r) => r.scenario));
      expect(compareRuns(direct, through, wire.expected), sideBySide(direct, through)).toEqual({ unexpected: [], stale: [] });

      // The second run really went through the gateway, authenticated, and no token reached the upstream.
      const decisions = await requestsByDecision();
      const forwarded = recorder.requests.slice(recordedBefore);
      expect(forwarded.length).toBeGreaterThanOrEqual(direct.results.length);
      // (streams still closing may not be counted yet, hence no equality)
      expect((decisions.allow ?? 0) - (decisionsBefore.allow ?? 0)).toBeGreaterThan(forwarded.length / 2);
      expect(decisions.unauthenticated ?? 0).toBe(decisionsBefore.unauthenticated ?? 0);
      expect([...new Set(forwarded.map((r) => r.method))].sort()).toEqual(wire.methods);
      expect(forwarded.flatMap((r) => r.headers.filter(([name]) => name.toLowerCase() === 'authorization'))).toEqual([]);
    }, 90_000);
  }
});
