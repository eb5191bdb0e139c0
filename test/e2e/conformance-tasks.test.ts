/**
 * The conformance suite's tasks-extension scenarios (io.modelcontextprotocol/tasks, SEP-2663, on
 * the 2026-07-28 wire) give the same per-check results through the gateway as directly against a
 * task-capable upstream, now that the gateway binds tasks to their principal (DESIGN.md §8.3, K67):
 * task ids the upstream creates are recorded for the caller, and nothing of each revision's own
 * methods and errors (tasks/get's -32602 for an unknown task, -32021 without the extension, -32601
 * for the removed tasks/result and tasks/list, -32020 for a routing header that disagrees) is
 * answered in the upstream's place.
 *
 *   direct:  conformance CLI ─────────────────────────────────────▶ stateless task server
 *   gateway: conformance CLI ─▶ token hop ─▶ gateway (JWT check) ─▶ stateless task server
 *
 * The upstream is test/helpers/stateless-task-server.ts (no server in node_modules speaks the
 * extension): one task store for every request, the shape whose tasks the gateway must bind.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareRuns, runServerConformance, sideBySide, startTokenInjectingHop, type TokenInjectingHop } from '../helpers/conformance.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/net.js';
import { startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { startStatelessTaskServer, type StatelessTaskServer } from '../helpers/stateless-task-server.js';

/** The extension's scenarios this fixture implements the tools of (MRTR input scenarios need tools it does not have). */
const SCENARIOS = [
  'tasks-lifecycle',
  'tasks-capability-negotiation',
  'tasks-wire-fields',
  'tasks-request-state-removal',
  'tasks-request-headers',
  'tasks-dispatch-and-envelope',
  'tasks-required-task-error',
];

let upstream: StatelessTaskServer;
let issuer: TestIssuer;
let gateway: TestGateway;
let front: TokenInjectingHop;
let token: string;

beforeAll(async () => {
  upstream = await startStatelessTaskServer();
  issuer = await startTestIssuer('RS256');
  const port = await freePort();
  front = await startTokenInjectingHop(`http://127.0.0.1:${port}/mcp`, () => token);
  const publicUrl = new URL(front.url).origin;
  gateway = await startTestGateway({
    'gateway.yaml': { listen: { host: '127.0.0.1', port }, public_url: publicUrl, log_level: 'warn' },
    'tasks.yaml': {
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

describe('conformance tasks-extension scenarios: directly vs through the gateway', () => {
  for (const scenario of SCENARIOS) {
    it(`${scenario}: the same per-check results, and the upstream's own errors`, async () => {
      const direct = await runServerConformance(upstream.url, { scenario });
      const through = await runServerConformance(front.url, { scenario });
      expect(through.results.map((r) => r.scenario)).toEqual([scenario]);
      expect(compareRuns(direct, through, []), sideBySide(direct, through)).toEqual({ unexpected: [], stale: [] });
      // Most checks pass directly: the comparison is between working runs, not two failures.
      const passed = through.results[0]!.checks.filter((c) => c.status === 'SUCCESS').length;
      expect(passed, sideBySide(direct, through)).toBeGreaterThanOrEqual(through.results[0]!.checks.length - 1);
    }, 120_000);
  }

  it("the unknown-task probe reached the upstream directly as sent, and through the gateway as an id of its shape the upstream cannot know", () => {
    const probe = 'tasks-conformance-nonexistent-12345';
    const gets = upstream.named.filter((n) => n.method === 'tasks/get' && typeof n.taskId === 'string');
    expect(gets.filter((n) => n.taskId === probe).length).toBe(1);
    const substitutes = gets.filter((n) => n.taskId !== probe && /^[a-z]{5}-[a-z]{11}-[a-z]{11}-[0-9]{5}$/.test(n.taskId as string));
    expect(substitutes.length).toBe(1);
  });
});
