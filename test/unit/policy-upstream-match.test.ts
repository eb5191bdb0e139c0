/**
 * `match: { upstream }` on an aggregated route (DESIGN §8.2, issue 22 item 4): it applies to what is
 * sent to that upstream alone — tools and prompts by shown name, completions by their ref, and
 * reads, subscriptions and resource completions by where the session serves the URI (`servedBy`,
 * which the route's forwarder gives the policy step) — and `explain` names the upstream.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { evaluate, evaluateOperation } from '../../src/policy/evaluate.js';
import { explainCommand } from '../../src/policy/explain.js';
import { compilePolicy, type RoutePolicy } from '../../src/policy/route-policy.js';
import { gatewayYaml, jwtRoute } from '../helpers/security-fixtures.js';

const ISSUER = { issuer: 'https://idp.example.test', jwksUri: 'https://idp.example.test/jwks', alg: 'ES256' as const };
const RULES = [
  { match: { upstream: 'docs', method: 'resources/*' }, deny: true },
  { match: { upstream: 'github', method: 'prompts/get' }, require_scopes: ['mcp:admin'] },
  { match: { upstream: 'docs', method: 'completion/complete' }, deny: true },
  { match: { upstream: 'github', method: 'tools/call' }, require_scopes: ['mcp:write'] },
];
let dir: string;
let policy: RoutePolicy;

function aggregatedRoute(path: string, rules: unknown[]) {
  const { upstream: _one, ...route } = jwtRoute(path, 'https://unused.example.test/mcp', ISSUER, { rules });
  return { ...route, upstreams: { github: { upstream: 'https://github.example.test/mcp' }, docs: { upstream: 'https://docs.example.test/mcp' } } };
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-upstream-match-'));
  await writeFile(join(dir, 'gateway.yaml'), stringify(gatewayYaml()));
  await writeFile(join(dir, 'all.yaml'), stringify(aggregatedRoute('/all/mcp', RULES)));
  await writeFile(join(dir, 'one.yaml'), stringify(jwtRoute('/one/mcp', 'https://one.example.test/mcp', ISSUER)));
  policy = compilePolicy((await loadConfig(dir)).routes.find((r) => r.path === '/all/mcp')!);
});

afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

const reader = { subject: 'alice', clientId: 'app', scopes: ['mcp:read'] };
const message = (method: string, params: Record<string, unknown>) => ({ jsonrpc: '2.0', id: 1, method, params });
const decide = (method: string, params: Record<string, unknown>, servedBy?: ReadonlyMap<string, string>) => evaluate(policy, { messages: [message(method, params)] }, reader, servedBy);

describe('match.upstream on resources: by where the session serves the URI', () => {
  it('a read, subscription or unsubscription the session serves from the named upstream matches; from another, or unplaced, it does not', () => {
    const docs = new Map([['demo://a', 'docs']]);
    const github = new Map([['demo://a', 'github']]);
    for (const method of ['resources/read', 'resources/subscribe', 'resources/unsubscribe']) {
      expect(decide(method, { uri: 'demo://a' }, docs)).toMatchObject({ allow: false, reason: 'deny', rule: { index: 0 } });
      expect(decide(method, { uri: 'demo://a' }, github).allow).toBe(true);
      expect(decide(method, { uri: 'demo://a' }, new Map()).allow).toBe(true);
      expect(decide(method, { uri: 'demo://a' }).allow).toBe(true);
    }
  });

  it('a completion: a ref/prompt by its shown name, a ref/resource by where its URI is served', () => {
    const argument = { name: 'a', value: '' };
    expect(decide('completion/complete', { ref: { type: 'ref/prompt', name: 'docs__search' }, argument }).reason).toBe('deny');
    expect(decide('completion/complete', { ref: { type: 'ref/prompt', name: 'github__search' }, argument }).allow).toBe(true);
    expect(decide('completion/complete', { ref: { type: 'ref/resource', uri: 'demo://{id}' }, argument }, new Map([['demo://{id}', 'docs']])).reason).toBe('deny');
    expect(decide('completion/complete', { ref: { type: 'ref/resource', uri: 'demo://{id}' }, argument }, new Map([['demo://{id}', 'github']])).allow).toBe(true);
  });

  it('prompts and tools by their shown names, as before', () => {
    expect(decide('prompts/get', { name: 'github__triage' })).toMatchObject({ allow: false, reason: 'scope', requiredScopes: ['mcp:read', 'mcp:admin'] });
    expect(decide('prompts/get', { name: 'docs__triage' }).allow).toBe(true);
    expect(evaluateOperation(policy, { method: 'tools/call', name: 'github__create_issue' }, reader).reason).toBe('scope');
    expect(evaluateOperation(policy, { method: 'tools/call', name: 'docs__create_issue' }, reader).allow).toBe(true);
  });

  it('property: a rule naming an upstream matches a read exactly when the session serves its URI from that upstream', () => {
    const uri = fc.stringMatching(/^x[a-z]{0,4}:\/\/[a-z]{1,6}(\/[a-z0-9]{1,4}){0,3}$/);
    fc.assert(
      fc.property(fc.array(fc.tuple(uri, fc.constantFrom('github', 'docs', undefined)), { minLength: 1, maxLength: 6 }), (placed) => {
        const servedBy = new Map(placed.flatMap(([u, upstream]) => (upstream ? [[u, upstream] as const] : [])));
        for (const [u] of placed) {
          const denied = servedBy.get(u) === 'docs';
          expect(decide('resources/read', { uri: u }, servedBy).allow).toBe(!denied);
        }
        // A batch is refused when any of its reads is served by the named upstream.
        const batch = evaluate(policy, { messages: placed.map(([u], i) => ({ jsonrpc: '2.0', id: i, method: 'resources/read', params: { uri: u } })) }, reader, servedBy);
        expect(batch.allow).toBe(!placed.some(([u]) => servedBy.get(u) === 'docs'));
      }),
      { numRuns: 200 },
    );
  });
});

describe('explain names the upstream', () => {
  async function explain(args: Record<string, string | boolean>) {
    const lines: string[] = [];
    const code = await explainCommand(dir, { route: '/all/mcp', scopes: 'mcp:read', ...args }, { log: (l) => lines.push(l), error: (l) => lines.push(l) });
    return { code, text: lines.join('\n') };
  }

  it('a tool or prompt by its shown name, a URI as --upstream gives it', async () => {
    expect(await explain({ tool: 'github__create_issue' })).toMatchObject({ code: 0, text: expect.stringContaining('upstream  github (its own name: create_issue)') });
    const read = await explain({ uri: 'demo://a', upstream: 'docs' });
    expect(read.code).toBe(0);
    expect(read.text).toContain('decision  deny');
    expect(read.text).toContain('upstream  docs');
    const unplaced = await explain({ uri: 'demo://a' });
    expect(unplaced.text).toContain('decision  allow');
    expect(unplaced.text).toContain('--upstream names it');
    const json = await explain({ uri: 'demo://a', upstream: 'docs', json: true });
    expect(JSON.parse(json.text)).toMatchObject({ decision: 'deny', upstream: 'docs', rule: { index: 0 } });
  });

  it('refuses an upstream the route lacks, one that contradicts a shown name, and --upstream on a route of one upstream (exit 2)', async () => {
    expect(await explain({ uri: 'demo://a', upstream: 'nope' })).toMatchObject({ code: 2, text: expect.stringContaining("nope is not one of /all/mcp's upstreams (github, docs)") });
    expect(await explain({ tool: 'github__create_issue', upstream: 'docs' })).toMatchObject({ code: 2, text: expect.stringContaining("github__create_issue is github's, not docs's") });
    expect(await explain({ route: '/one/mcp', uri: 'demo://a', upstream: 'docs' })).toMatchObject({ code: 2, text: expect.stringContaining('--upstream applies only to a route with upstreams') });
  });
});
