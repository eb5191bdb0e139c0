/**
 * The conformance suite's (0.2.0 prerelease) `http-custom-header-server-validation` scenario
 * (SEP-2243: Mcp-Param-* headers held to the body, base64 values decoded) through the gateway, in
 * front of the stateless 2026-07-28 fixture given a tool with `x-mcp-header` annotations whose
 * headers it does not check (its own validating tool left out). Run directly it fails the checks
 * that need that comparison; through the gateway every check passes, the gateway's work: it learnt
 * the tool's annotations from the scenario's own tools/list. ServerLiteralMissingBase64Suffix
 * (`=?base64?SGVsbG8=`, a literal: the sentinel needs both markers) passes through the gateway too
 * since it reads such a value as the literal it is (SECURITY.md "One reading of the routing headers").
 *
 *   conformance CLI ─▶ token hop ─▶ gateway (JWT check) ─▶ stateless 2026-07-28 server
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runServerConformance, startTokenInjectingHop, type ConformanceRun, type TokenInjectingHop } from '../helpers/conformance.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/net.js';
import { startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { startStatelessServer, type StatelessServer } from '../helpers/stateless-mcp-server.js';

const SCENARIO = 'http-custom-header-server-validation';
const EXECUTE_SQL = {
  name: 'execute_sql',
  description: 'The specification\'s example tool',
  inputSchema: {
    type: 'object',
    properties: { region: { type: 'string', 'x-mcp-header': 'Region' }, query: { type: 'string' } },
    required: ['region', 'query'],
  },
};

let upstream: StatelessServer;
let issuer: TestIssuer;
let gateway: TestGateway;
let front: TokenInjectingHop;
let token: string;

beforeAll(async () => {
  upstream = await startStatelessServer({ tools: [EXECUTE_SQL], customHeaderTool: false });
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

/** `name: STATUS` of every check of the run's one scenario. */
const outcomes = (run: ConformanceRun) => Object.fromEntries(run.results.flatMap((r) => r.checks.map((c) => [c.name, c.status])));

/** What the fixture alone fails: it compares no Mcp-Param header with the body. */
const FIXTURE_ALONE_FAILS = [
  'ServerRejectsInvalidBase64Padding',
  'ServerRejectsInvalidBase64PaddingErrorCode',
  'ServerRejectsInvalidBase64Chars',
  'ServerRejectsInvalidBase64CharsErrorCode',
  'ServerRejectsMissingCustomHeader',
  'ServerRejectsMissingCustomHeaderErrorCode',
];

const failed = (run: ConformanceRun) => Object.entries(outcomes(run)).filter(([, status]) => status !== 'SUCCESS').map(([name]) => name).sort();

describe(`conformance 0.2.0 ${SCENARIO} at the 2026-07-28 wire`, () => {
  it('the checks the fixture alone fails pass through the gateway (which learnt the tool from the scenario\'s tools/list)', async () => {
    const direct = await runServerConformance(upstream.url, { scenario: SCENARIO, specVersion: '2026-07-28' });
    expect(failed(direct), direct.stdout).toEqual([...FIXTURE_ALONE_FAILS].sort());
    const before = upstream.methods.length;
    const through = await runServerConformance(front.url, { scenario: SCENARIO, specVersion: '2026-07-28' });
    expect(failed(through), through.stdout).toEqual([]);
    for (const name of FIXTURE_ALONE_FAILS) expect(outcomes(through)[name], name).toBe('SUCCESS');
    expect(Object.keys(outcomes(through)).length).toBeGreaterThanOrEqual(10);
    // The run reached the upstream through the gateway: its tools/list, and the calls that agree.
    expect(upstream.methods.slice(before)).toContain('tools/list');
    expect(upstream.methods.slice(before).filter((m) => m === 'tools/call').length).toBeGreaterThanOrEqual(2);
  }, 120_000);
});
