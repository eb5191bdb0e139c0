/**
 * The official MCP conformance suite's server scenarios through an aggregated route (`upstreams:`,
 * DESIGN §8.2, issue 22) with one upstream, the unmodified reference "everything" server, give
 * the same results as directly against it:
 *
 *   direct:  conformance CLI ──────────────────────────────────────────────────▶ server-everything
 *   gateway: conformance CLI ─▶ token hop ─▶ gateway, /mcp with upstreams: { everything } ─▶ server-everything
 *
 * Through an aggregated route the gateway is the MCP server the client sees: it answers
 * initialize, ping and the session's lifecycle itself and merges the lists. Each of the
 * upstream's tools and prompts is renamed to its own name (`rename:`, read from the server at
 * start), so the suite calls the names it would call directly. As in conformance.test.ts, most
 * checks fail against server-everything (it lacks the suite's fixture tools); they must fail the
 * same way through the route. Checks are compared by id and status (where both fail, the route's
 * error text is its own), and each difference is listed below with why.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { freePort } from '../helpers/net.js';
import { mintClientCredentialsToken, startOidcProvider, type OidcProviderHandle } from '../helpers/oidc-provider.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';
import { minus, runServerConformance, sideBySide, startTokenInjectingHop, type ConformanceCheck, type ConformanceRun, type TokenInjectingHop } from '../helpers/conformance.js';

/** A check as compared here: id and status. Where both runs fail a check, the route's error text is its own (it answers unknown names and session-less requests itself). */
const outcome = (c: ConformanceCheck) => `${c.id}: ${c.status}`;

/** Checks of one scenario that come out differently through the aggregated route: every line only one run has matches a pattern of its side, and every pattern matches. */
interface Difference {
  scenario: string | RegExp;
  direct: RegExp[];
  gateway: RegExp[];
  why: string;
}

/** A stateless (2026-07-28) request reaches the route: it serves that revision without a session (docs/aggregation.md), server-everything (SDK 1.x) does not. */
const STATELESS = 'the scenario runs at the 2026-07-28 wire, which server-everything does not serve ("Server not initialized", no valid message of that revision) and the route serves without a session, its answers valid in that revision\'s schema (both lack the scenario\'s fixture tools, so its own checks fail alike)';

const DIFFERENCES: Difference[] = [
  { scenario: 'server-session-lifecycle', direct: [/^server-session-terminated-returns-404: FAILURE$/], gateway: [/^server-session-terminated-returns-404: SUCCESS$/], why: 'the route ends its own session on DELETE and answers its id 404 afterwards (server-everything answers 400)' },
  { scenario: 'dns-rebinding-protection', direct: [/^localhost-host-rebinding-rejected: FAILURE$/], gateway: [/^localhost-host-rebinding-rejected: SUCCESS$/], why: 'a foreign Origin is refused 403 before any route (SECURITY H41)' },
  { scenario: 'tasks-request-headers', direct: [/^tasks-headers-reject-mismatched-method: FAILURE$/], gateway: [/^tasks-headers-reject-mismatched-method: SUCCESS$/], why: 'an Mcp-Method header that contradicts the body is refused with -32020 before the route answers (DESIGN §4a)' },
  {
    scenario: 'server-stateless',
    direct: [/^sep-2575-(discover-capabilities-match-handlers|http-server-method-not-found-404|server-sends-subscription-ack|server-tags-subscription-id): FAILURE$/, /^sep-2575-http-server-header-mismatch-400: FAILURE$/, /^sep-2575-request-meta-client-info-optional: FAILURE$/, /^sep-2575-server-declares-prompts-in-discover: FAILURE$/, /^sep-2575-server-identifies-in-result-meta: WARNING$/, /^sep-2575-server-implements-discover: FAILURE$/, /^sep-2575-server-sends-(tools|prompts)-list-changed-on-subscription: SKIPPED$/, /^sep-2575-http-server-error-jsonrpc-id: FAILURE$/, /^sep-2575-request-meta-invalid-missing-(meta|protocol-version|client-capabilities): FAILURE$/, /^sep-2575-server-unsupported-version-error: FAILURE$/],
    gateway: [/^sep-2575-(discover-capabilities-match-handlers|http-server-method-not-found-404|server-sends-subscription-ack|server-tags-subscription-id|http-server-error-jsonrpc-id): SUCCESS$/, /^sep-2575-http-server-header-mismatch-400: SUCCESS$/, /^sep-2575-request-meta-client-info-optional: SUCCESS$/, /^sep-2575-server-declares-prompts-in-discover: SUCCESS$/, /^sep-2575-server-identifies-in-result-meta: SUCCESS$/, /^sep-2575-server-implements-discover: SUCCESS$/, /^sep-2575-server-sends-(tools|prompts)-list-changed-on-subscription: WARNING$/, /^sep-2575-request-meta-invalid-missing-(meta|protocol-version|client-capabilities): SUCCESS$/, /^sep-2575-server-unsupported-version-error: SUCCESS$/],
    why:
      'the route answers server/discover itself (capabilities, serverInfo in _meta; -32602 for _meta without the revision or the client capabilities; -32022 naming its revisions for one it does not serve) ' +
      'where server-everything has no such method; it serves subscriptions/listen (acknowledged, frames tagged with the listen id; server-everything changes no list when asked, so no list_changed comes) and answers a method nobody serves 404 with -32601 and the request id; ' + STATELESS,
  },
  { scenario: /^tools-call-(simple-text|error)$/, direct: [/^tools-call-(simple-text|error): SUCCESS$/], gateway: [/^tools-call-(simple-text|error): FAILURE$/], why: 'the suite calls a tool server-everything lacks: directly an isError result the check accepts; the route answers a name no upstream listed itself, with JSON-RPC -32602 "Unknown tool" (docs/aggregation.md), which the check does not' },
  { scenario: /^resources-(un)?subscribe$/, direct: [/^resources-(un)?subscribe: SUCCESS$/], gateway: [/^resources-(un)?subscribe: FAILURE$/], why: 'a subscription goes to the upstream that listed the URI; the suite\'s (test://watched-resource) is listed by none, so it is -32002 from the session\'s map, where server-everything accepts any' },
  {
    scenario: 'server-sse-polling',
    direct: [/^incoming-sse-event: (FAILURE|INFO)$/, /^server-sse-disconnect-resume: INFO$/, /^server-sse-priming-event: SUCCESS$/, /^server-sse-retry-field: WARNING$/, /^stream-closed: INFO$/],
    gateway: [/^server-sse-content-type: INFO$/],
    why: 'the route answers a POST as an event stream only when something of its requests goes before the answer (none here: server-everything lacks the suite\'s tools, which the route answers itself, as JSON), and its streams carry no event ids (docs/aggregation.md, "Not built yet"), so there is no stream to poll or resume',
  },
  { scenario: 'server-sse-multiple-streams', direct: [/^server-sse-streams-functional: SUCCESS$/], gateway: [/^server-sse-streams-functional: INFO$/], why: 'as above: the route answers these POSTs as JSON, with nothing to stream before their answers' },
  { scenario: /^(input-required-result-.*|tasks-.*|sep-2164-resource-not-found|caching|http-header-validation|http-custom-header-server-validation)$/, direct: [/^wire-schema-valid: FAILURE$/], gateway: [/^wire-schema-valid: SUCCESS$/], why: STATELESS },
  {
    scenario: 'tasks-dispatch-and-envelope',
    direct: [/^(sep-2663-tasks-result-removed-method-not-found|tasks-removed-tasks-list): FAILURE$/],
    gateway: [/^(sep-2663-tasks-result-removed-method-not-found|tasks-removed-tasks-list): SUCCESS$/],
    why: `the route answers tasks/result and tasks/list, which no upstream serves, 404 with -32601 as 2026-07-28 binds it; ${STATELESS}`,
  },
  {
    scenario: 'http-header-validation',
    direct: [/^sep-2243-server-(standard-setup|reject-invalid-headers|accepts-whitespace-header-value): FAILURE$/],
    gateway: [/^sep-2243-(header-name-case-insensitive|server-accepts-whitespace-header-value|server-reject-error-code|server-reject-invalid-headers): SUCCESS$/],
    why: `the route serves the scenario's requests and holds Mcp-Method and Mcp-Name to the body (-32020 at 400, DESIGN §4a) before answering; ${STATELESS}`,
  },
  { scenario: 'http-custom-header-server-validation', direct: [/^sep-2243-server-custom-setup: FAILURE$/], gateway: [/^sep-2243-server-no-xmcp-tool: FAILURE$/], why: `through the route the setup runs and finds no tool with x-mcp-header among server-everything's; ${STATELESS}` },
  {
    scenario: 'caching',
    direct: [/^sep-2549-(cache-scope-valid|(tools|prompts|resources|resources-templates)-list-caching-hints|ttl-non-negative): FAILURE$/, /^sep-2549-resources-read-caching-hints: SKIPPED$/],
    gateway: [/^sep-2549-(cache-scope-valid|(tools|prompts|resources|resources-templates)-list-caching-hints|resources-read-caching-hints|ttl-non-negative): SUCCESS$/],
    why: `to a 2026-07-28 client the route's merged lists, and a read of server-everything's (which gives no hints), say cacheScope private and ttlMs 0; ${STATELESS}`,
  },
  { scenario: /^sep-2640-skills-/, direct: [/^sep-2640-skills-(directory|enumeration|manifest): FAILURE$/], gateway: [/^sep-2640-.*: SKIPPED$/, /^wire-schema-valid: SUCCESS$/], why: `neither offers the skills extension; directly its setup fails (${STATELESS}), through the route discover answers and the checks are skipped` },
  { scenario: 'tasks-capability-negotiation', direct: [/^tasks-capability-negotiation: FAILURE$/], gateway: [/^(sep-2663-server-rejects-undeclared-client|sep-2663-tasks-methods-non-declaring|tasks-extension-advertised|tasks-per-request-meta-opt-in): FAILURE$/], why: `neither offers tasks; directly the setup fails, through the route discover answers and each check fails (${STATELESS})` },
];

/** What no listed difference accounts for, and the listed patterns nothing matched (fixed: remove them). */
function unexplained(direct: ConformanceRun, gateway: ConformanceRun): { unexpected: string[]; stale: string[] } {
  const unexpected: string[] = [];
  const used = new Set<RegExp>();
  for (const { scenario } of direct.results) {
    const lines = (run: ConformanceRun) => (run.results.find((r) => r.scenario === scenario)?.checks ?? []).map(outcome);
    const [d, g] = [lines(direct), lines(gateway)];
    const listed = DIFFERENCES.filter((x) => (typeof x.scenario === 'string' ? x.scenario === scenario : x.scenario.test(scenario)));
    const explained = (line: string, side: 'direct' | 'gateway') => {
      const pattern = listed.flatMap((x) => x[side]).find((p) => p.test(line));
      if (pattern) used.add(pattern);
      return pattern !== undefined;
    };
    for (const line of minus(d, g)) if (!explained(line, 'direct')) unexpected.push(`${scenario} direct only: ${line}`);
    for (const line of minus(g, d)) if (!explained(line, 'gateway')) unexpected.push(`${scenario} through the route only: ${line}`);
  }
  const stale = DIFFERENCES.flatMap((x) => [...x.direct, ...x.gateway].filter((p) => !used.has(p)).map((p) => `${String(x.scenario)}: ${String(p)}`));
  return { unexpected, stale };
}

let everything: UpstreamHandle;
let oidc: OidcProviderHandle;
let gateway: TestGateway;
let front: TokenInjectingHop;
let token: string;

/** Each tool and prompt of the server under its own name: the route then shows what the server shows. */
async function ownNames(url: string): Promise<Record<string, string>> {
  const client = new Client({ name: 'names', version: '1' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  try {
    const names = [...(await client.listTools()).tools, ...(await client.listPrompts()).prompts].map((t) => t.name);
    return Object.fromEntries(names.map((n) => [n, n]));
  } finally {
    await client.close();
  }
}

beforeAll(async () => {
  everything = await startEverythingServer();
  const port = await freePort();
  front = await startTokenInjectingHop(`http://127.0.0.1:${port}/mcp`, () => token);
  const publicUrl = new URL(front.url).origin;
  const resource = `${publicUrl}/mcp`;
  oidc = await startOidcProvider({ resources: [resource], scopes: ['mcp:read'], accessTokenTtl: 900 });
  gateway = await startTestGateway({
    'gateway.yaml': { listen: { host: '127.0.0.1', port }, public_url: publicUrl, log_level: 'warn' },
    'everything.yaml': {
      path: '/mcp',
      upstreams: { everything: { upstream: everything.url, rename: await ownNames(everything.url) } },
      authorization_servers: [oidc.issuer],
      token: { jwt: { issuer: oidc.issuer, jwks_uri: oidc.jwksUri } },
      scopes_supported: ['mcp:read'],
      required_scopes: ['mcp:read'],
    },
  });
  token = await mintClientCredentialsToken(oidc, { resource, scope: 'mcp:read' });
}, 60_000);

afterAll(async () => {
  await front?.close();
  await gateway?.stop();
  await oidc?.close();
  await everything?.close();
});

describe('MCP conformance suite, server scenarios: directly vs through an aggregated route of one upstream', () => {
  it('gives the same per-check results, but for the differences listed with why', async () => {
    const direct = await runServerConformance(everything.url);
    const through = await runServerConformance(front.url);
    expect(direct.results.length, direct.stdout).toBeGreaterThanOrEqual(40);
    expect(through.results.map((r) => r.scenario)).toEqual(direct.results.map((r) => r.scenario));
    expect(unexplained(direct, through), sideBySide(direct, through)).toEqual({ unexpected: [], stale: [] });
    // The route served the run: it listed the upstream's tools under their own names.
    const listed = through.results.find((r) => r.scenario === 'json-schema-2020-12')?.checks.map((c) => c.errorMessage ?? '').join(' ');
    expect(listed).toContain('Available tools: echo');
  }, 120_000);
});

