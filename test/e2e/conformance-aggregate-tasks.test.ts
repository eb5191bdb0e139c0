/**
 * The conformance suite's tasks-extension scenarios (io.modelcontextprotocol/tasks, SEP-2663, on the
 * 2026-07-28 wire) through an aggregated route (`upstreams:`, DESIGN §8.2, issue 22) with one
 * task-capable upstream give the same per-check results as directly against it: the route shows
 * each task under an id of its own, routes tasks/get, tasks/update and tasks/cancel to the
 * upstream with the upstream's id (body and Mcp-Name), refuses an Mcp-Name that disagrees with the
 * body's task id itself (-32020, as the upstream would, which sees both rewritten), and answers an
 * unknown task id with the upstream's own error (docs/aggregation.md, "Tasks").
 *
 *   direct:  conformance CLI ──────────────────────────────────────────────────────▶ stateless task server
 *   gateway: conformance CLI ─▶ token hop ─▶ gateway, /mcp with upstreams: { tasks } ─▶ stateless task server
 *
 * The upstream's tools keep their own names (`rename:`), so the suite calls the names it would call
 * directly. The fixture (test/helpers/stateless-task-server.ts) has one task store for every request.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareRuns, runServerConformance, sideBySide, startTokenInjectingHop, type TokenInjectingHop } from '../helpers/conformance.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/net.js';
import { startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { startStatelessTaskServer, type StatelessTaskServer } from '../helpers/stateless-task-server.js';

const SCENARIOS = ['tasks-lifecycle', 'tasks-capability-negotiation', 'tasks-wire-fields', 'tasks-request-state-removal', 'tasks-request-headers', 'tasks-dispatch-and-envelope', 'tasks-required-task-error'];

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
      upstreams: { tasks: { upstream: upstream.url, rename: { greet: 'greet', slow_compute: 'slow_compute', failing_job: 'failing_job' } } },
      authorization_servers: [issuer.issuer],
      token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['RS256'] } },
      scopes_supported: ['mcp:read'],
      required_scopes: ['mcp:read'],
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

describe('conformance tasks-extension scenarios: directly vs through an aggregated route', () => {
  for (const scenario of SCENARIOS) {
    it(`${scenario}: the same per-check results`, async () => {
      const direct = await runServerConformance(upstream.url, { scenario });
      const through = await runServerConformance(front.url, { scenario });
      expect(through.results.map((r) => r.scenario)).toEqual([scenario]);
      expect(compareRuns(direct, through, []), sideBySide(direct, through)).toEqual({ unexpected: [], stale: [] });
      const passed = through.results[0]!.checks.filter((c) => c.status === 'SUCCESS').length;
      expect(passed, sideBySide(direct, through)).toBeGreaterThanOrEqual(through.results[0]!.checks.length - 1);
    }, 120_000);
  }
});
