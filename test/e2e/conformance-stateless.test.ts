/**
 * Every server scenario of the conformance suite (the newest prerelease, `--suite all`) at the
 * 2026-07-28 wire, run directly against the stateless 2026-07-28 fixture and again through the
 * gateway, compared check by check (DESIGN §8.4, issue 24 item 6): no scenario is worse through the
 * gateway, and the scenarios that apply to an intermediary (http-header-validation,
 * http-custom-header-server-validation, server-stateless, caching, dns-rebinding-protection, the
 * input-required-result-* set, sep-2164-resource-not-found) pass every check through it. The
 * scores of both runs are the ones docs/conformance.md lists.
 *
 *   direct:  conformance CLI ─────────────────────────────────────────▶ stateless 2026-07-28 server
 *   gateway: conformance CLI ─▶ token hop ─▶ gateway (JWT check) ─▶ stateless 2026-07-28 server
 *
 * The upstream is test/helpers/stateless-mcp-server.ts, written from the specification with the
 * tools, prompts and resources the scenarios call (no published server carries them at this wire;
 * test/e2e/python-sdk-server-2026.test.ts puts the Python SDK's 2026-07-28 server behind the
 * gateway for the wire itself). The token hop stands in for an OAuth client, as in
 * conformance.test.ts.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compareRuns, runServerConformance, sideBySide, startTokenInjectingHop, type ConformanceRun, type ExpectedDifference, type TokenInjectingHop } from '../helpers/conformance.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/net.js';
import { startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { startStatelessServer, type StatelessServer } from '../helpers/stateless-mcp-server.js';

const WIRE = '2026-07-28';
const INTERMEDIARY = ['http-header-validation', 'http-custom-header-server-validation', 'server-stateless', 'caching', 'dns-rebinding-protection', 'sep-2164-resource-not-found'];
const isIntermediary = (scenario: string) => INTERMEDIARY.includes(scenario) || scenario.startsWith('input-required-result-');

/** Where the gateway's answer is deliberately not the upstream's. */
const JUSTIFIED: ExpectedDifference[] = [
  {
    scenario: 'dns-rebinding-protection',
    direct: 'localhost-host-rebinding-rejected: FAILURE — Expected HTTP 4xx for invalid Host/Origin headers, got 200',
    gateway: 'localhost-host-rebinding-rejected: SUCCESS',
    why: 'the fixture checks no Host or Origin (most servers put behind a gateway do not); the gateway refuses an Origin that is neither its own nor allowed (403, SECURITY H41)',
  },
];

let upstream: StatelessServer;
let issuer: TestIssuer;
let gateway: TestGateway;
let front: TokenInjectingHop;
let token: string;
let direct: ConformanceRun;
let through: ConformanceRun;

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
  direct = await runServerConformance(upstream.url, { specVersion: WIRE });
  const before = upstream.methods.length;
  through = await runServerConformance(front.url, { specVersion: WIRE });
  // The second run really reached the upstream through the gateway.
  expect(upstream.methods.length - before).toBeGreaterThan(60);
}, 300_000);

afterAll(async () => {
  await front?.close();
  await gateway?.stop();
  await issuer?.close();
  await upstream?.close();
});

/** `passed/scored` of a scenario: SUCCESS among SUCCESS and FAILURE (WARNING counts as scored too, as not passed). */
function score(run: ConformanceRun, scenario: string): string {
  const checks = run.results.find((r) => r.scenario === scenario)?.checks ?? [];
  const scored = checks.filter((c) => c.status === 'SUCCESS' || c.status === 'FAILURE' || c.status === 'WARNING');
  return `${scored.filter((c) => c.status === 'SUCCESS').length}/${scored.length}`;
}

/** `scenario → [direct, gateway]` of a markdown table whose rows read `| \`scenario\` | d/n | g/n |`. */
function tableOf(file: string): Map<string, [string, string]> {
  const text = readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
  return new Map([...text.matchAll(/^\| `([a-z0-9-]+)` \| (\d+\/\d+) \| (\d+\/\d+) \|/gm)].map((m) => [m[1]!, [m[2]!, m[3]!]]));
}

describe(`conformance suite, every server scenario at ${WIRE}: directly vs through the gateway`, () => {
  it('is the newest prerelease of the suite, 0.2.0-alpha.12 or later', () => {
    const version = (createRequire(import.meta.url)('@modelcontextprotocol/conformance/package.json') as { version: string }).version;
    const [, minor, alpha] = /^0\.(\d+)\.\d+(?:-alpha\.(\d+))?$/.exec(version) ?? [];
    expect(Number(minor) > 2 || (Number(minor) === 2 && (alpha === undefined || Number(alpha) >= 12)), version).toBe(true);
  });

  it('gives every check through the gateway as directly, but where the gateway does better on purpose', () => {
    expect(direct.results.length, direct.stdout).toBeGreaterThanOrEqual(40);
    expect(through.results.map((r) => r.scenario)).toEqual(direct.results.map((r) => r.scenario));
    expect(compareRuns(direct, through, JUSTIFIED), sideBySide(direct, through)).toEqual({ unexpected: [], stale: [] });
  });

  it('no scenario is worse through the gateway: every check that passes directly passes through it', () => {
    const worse = direct.results.flatMap(({ scenario, checks }) => {
      const passedThrough = new Set(through.results.find((r) => r.scenario === scenario)?.checks.filter((c) => c.status === 'SUCCESS').map((c) => `${c.id} ${c.name}`));
      return checks.filter((c) => c.status === 'SUCCESS' && !passedThrough.has(`${c.id} ${c.name}`)).map((c) => `${scenario}: ${c.id} ${c.name}`);
    });
    expect(worse).toEqual([]);
  });

  it('the scenarios that apply to an intermediary pass every check through the gateway', () => {
    const scenarios = through.results.filter((r) => isIntermediary(r.scenario));
    expect(scenarios.map((r) => r.scenario)).toEqual(expect.arrayContaining([...INTERMEDIARY, 'input-required-result-basic-elicitation', 'input-required-result-tampered-state']));
    expect(scenarios.length).toBeGreaterThanOrEqual(INTERMEDIARY.length + 14);
    const notPassed = scenarios.flatMap((r) => r.checks.filter((c) => c.status !== 'SUCCESS' && c.status !== 'SKIPPED' && c.status !== 'INFO').map((c) => `${r.scenario} ${c.id}: ${c.status} ${c.errorMessage ?? ''}`));
    expect(notPassed, through.stdout).toEqual([]);
  });

  it('docs/conformance.md lists every scenario with both scores', () => {
    const measured = new Map(direct.results.map(({ scenario }) => [scenario, [score(direct, scenario), score(through, scenario)]]));
    expect(Object.fromEntries(tableOf('docs/conformance.md')), sideBySide(direct, through)).toEqual(Object.fromEntries(measured));
  });
});
