/**
 * `match: { when: <CEL> }`: the library (@bufbuild/cel) against cel-spec's
 * conformance suite for the core language; conditions checked at load with
 * file:line issues (syntax, unknown names, size, nested comprehensions);
 * decisions over claims, method, tool, uri and arguments (docs/policies.md's
 * examples: groups, an email domain, a repository owner, a path prefix),
 * against a plain-JS oracle over generated inputs; a condition that cannot be
 * evaluated refuses rather than skips; `explain` shows the rule and decides
 * with --claims and --arguments.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig } from '../../src/config/load.js';
import { MAX_WHEN_LENGTH, whenProblem } from '../../src/config/cel-when.js';
import { evaluateOperation, type PolicyCaller } from '../../src/policy/evaluate.js';
import { explainCommand } from '../../src/policy/explain.js';
import { compilePolicy, type RoutePolicy } from '../../src/policy/route-policy.js';
import { conformanceCases, runCase } from '../helpers/cel-conformance.js';
import { gatewayYaml, jwtRoute } from '../helpers/security-fixtures.js';

const CORE_SECTIONS = ['basic', 'comparisons', 'conversions', 'dynamic', 'fp_math', 'integer_math', 'lists', 'logic', 'macros', 'plumbing', 'string', 'timestamps'];

describe('@bufbuild/cel against the cel-spec conformance suite (core language)', () => {
  const cases = conformanceCases(CORE_SECTIONS);
  it(`holds enough cases to mean something (${cases.length})`, () => {
    expect(cases.length).toBeGreaterThan(800);
    expect(new Set(cases.map((c) => c.section))).toEqual(new Set(CORE_SECTIONS));
  });
  it('passes every one of them', () => {
    const failures = cases.flatMap((c) => {
      const why = runCase(c);
      return why === undefined ? [] : [`${c.path}: ${c.test.expr} → ${why}`];
    });
    expect(failures).toEqual([]);
  });
});

const ISSUER = { issuer: 'https://idp.example.test', jwksUri: 'https://idp.example.test/jwks', alg: 'ES256' as const };
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-cel-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Writes a configuration whose one route has `rules`, and loads it. */
async function load(rules: unknown[]) {
  const sub = await mkdtemp(join(dir, 'c-'));
  await writeFile(join(sub, 'gateway.yaml'), stringify(gatewayYaml()));
  await writeFile(join(sub, 'route.yaml'), stringify(jwtRoute('/r/mcp', 'https://upstream.example.test/mcp', ISSUER, { rules })));
  return { file: join(sub, 'route.yaml'), config: loadConfig(sub, {}) };
}

describe('conditions are checked at load, with file:line', () => {
  const bad: Array<[string, RegExp]> = [
    ['claims.groups.exists(g, g == "a"', /not a CEL expression/],
    ['claim.email == "x"', /unknown name claim: a condition reads claims, method, tool, uri, arguments/],
    ['claims.groups.exists(g, arguments.paths.all(p, p.startsWith(g)))', /may not be nested/],
    [`size([${'1,'.repeat(450)}1]) > 0`, /too large/],
  ];
  for (const [when, message] of bad) {
    it(`refuses ${when.slice(0, 50)}`, async () => {
      const { file, config } = await load([{ match: { method: 'tools/call', when }, deny: true }]);
      const err = await config.catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as Error).message).toMatch(new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:\\d+:\\d+: rules\\[0\\]\\.match\\.when: `));
      expect((err as Error).message).toMatch(message);
    });
  }
  it('refuses one longer than the limit', async () => {
    const { config } = await load([{ match: { when: `tool == "${'x'.repeat(MAX_WHEN_LENGTH)}"` }, deny: true }]);
    await expect(config).rejects.toThrow(/rules\[0\]\.match\.when/);
  });
  it('property: whatever text is written, the check answers (never throws) and accepts only what parses', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 80 }), (text) => {
        const problem = whenProblem(text);
        expect(problem === undefined || typeof problem === 'string').toBe(true);
      }),
    );
  });
});

const DOCUMENTED_RULES = [
  { match: { method: 'tools/call', when: '!("admins" in claims.groups)', tool: 'delete_*' }, deny: true },
  { match: { method: 'tools/call', tool: 'create_issue', when: 'arguments.owner != "acme"' }, deny: true },
  { match: { method: 'tools/call', tool: 'read_file', when: '!arguments.path.startsWith("/srv/shared/")' }, deny: true },
  { match: { method: 'tools/call', when: '!claims.email.endsWith("@acme.example")' }, deny: true },
];

describe('decisions over claims and arguments', () => {
  let policy: RoutePolicy;
  beforeAll(async () => {
    const { config } = await load(DOCUMENTED_RULES);
    policy = compilePolicy((await config).routes[0]!);
  });
  const caller = (claims: Record<string, unknown>): PolicyCaller => ({ subject: 'alice', clientId: 'c', scopes: ['mcp:read'], claims });
  const call = (name: string, args?: Record<string, unknown>) => ({ method: 'tools/call', name, ...(args && { arguments: args }) });

  it('groups, a repository owner, a path prefix and an email domain, as docs/policies.md writes them', () => {
    const member = caller({ groups: ['admins'], email: 'a@acme.example' });
    const outsider = caller({ groups: ['dev'], email: 'b@acme.example' });
    expect(evaluateOperation(policy, call('delete_repo'), member).allow).toBe(true);
    expect(evaluateOperation(policy, call('delete_repo'), outsider)).toMatchObject({ allow: false, reason: 'deny', rule: { index: 0 } });
    expect(evaluateOperation(policy, call('create_issue', { owner: 'acme' }), outsider).allow).toBe(true);
    expect(evaluateOperation(policy, call('create_issue', { owner: 'evil' }), outsider)).toMatchObject({ allow: false, rule: { index: 1 } });
    expect(evaluateOperation(policy, call('read_file', { path: '/srv/shared/a.txt' }), outsider).allow).toBe(true);
    expect(evaluateOperation(policy, call('read_file', { path: '/etc/passwd' }), outsider)).toMatchObject({ allow: false, rule: { index: 2 } });
    expect(evaluateOperation(policy, call('echo'), caller({ groups: [], email: 'x@elsewhere.example' }))).toMatchObject({ allow: false, rule: { index: 3 } });
  });

  it('a condition that cannot be evaluated (a missing claim or argument) refuses: a deny rule is never sidestepped', () => {
    expect(evaluateOperation(policy, call('delete_repo'), caller({ email: 'a@acme.example' }))).toMatchObject({ allow: false, reason: 'condition', rule: { index: 0 } });
    expect(evaluateOperation(policy, call('read_file', {}), caller({ groups: [], email: 'a@acme.example' }))).toMatchObject({ allow: false, reason: 'condition' });
    expect(evaluateOperation(policy, call('read_file', { path: 7 }), caller({ groups: [], email: 'a@acme.example' }))).toMatchObject({ allow: false, reason: 'condition' });
  });

  it('property: the decision is what a plain-JS reading of the same rules says', () => {
    const tools = fc.constantFrom('delete_repo', 'create_issue', 'read_file', 'echo');
    fc.assert(
      fc.property(
        tools,
        fc.array(fc.constantFrom('admins', 'dev', 'ops', 'Admins'), { maxLength: 3 }),
        fc.tuple(fc.string({ maxLength: 6 }), fc.constantFrom('@acme.example', '@acme.example.evil', '@other.example', '')).map(([a, b]) => a + b),
        fc.constantFrom('acme', 'evil', 'ACME'),
        fc.constantFrom('/srv/shared/x', '/srv/sharedx', '/etc/passwd', '/srv/shared/'),
        (tool, groups, email, owner, path) => {
          const decision = evaluateOperation(policy, call(tool, { owner, path }), caller({ groups, email }));
          const denied =
            (tool.startsWith('delete_') && !groups.includes('admins')) ||
            (tool === 'create_issue' && owner !== 'acme') ||
            (tool === 'read_file' && !path.startsWith('/srv/shared/')) ||
            !email.endsWith('@acme.example');
          expect(decision.allow).toBe(!denied);
        },
      ),
    );
  });

  it('reads method, tool and uri by kind: tool is empty outside tools/call, uri outside resources/read', async () => {
    const { config } = await load([
      { match: { when: 'method == "resources/read" && uri.startsWith("file:///secret/")' }, deny: true },
      { match: { when: 'tool == "" && method == "tools/call"' }, deny: true },
    ]);
    const p = compilePolicy((await config).routes[0]!);
    const anyone = caller({});
    expect(evaluateOperation(p, { method: 'resources/read', name: 'file:///secret/key' }, anyone).allow).toBe(false);
    expect(evaluateOperation(p, { method: 'resources/read', name: 'file:///public/x' }, anyone).allow).toBe(true);
    expect(evaluateOperation(p, { method: 'tools/call', name: 'x' }, anyone).allow).toBe(true);
  });
});

describe('explain shows the condition and decides with --claims and --arguments', () => {
  it('names the rule with its when, and the reason', async () => {
    const sub = await mkdtemp(join(dir, 'e-'));
    await writeFile(join(sub, 'gateway.yaml'), stringify(gatewayYaml()));
    await writeFile(join(sub, 'route.yaml'), stringify(jwtRoute('/r/mcp', 'https://upstream.example.test/mcp', ISSUER, { rules: DOCUMENTED_RULES })));
    const lines: string[] = [];
    const out = { log: (l: string) => lines.push(l), error: (l: string) => lines.push(l) };
    const args = { route: '/r/mcp', tool: 'create_issue', scopes: 'mcp:read', claims: '{"groups":["dev"],"email":"a@acme.example"}' };
    expect(await explainCommand(sub, { ...args, arguments: '{"owner":"evil"}' }, out)).toBe(0);
    expect(lines.join('\n')).toContain('decision  deny');
    expect(lines.join('\n')).toContain('when: "arguments.owner != \\"acme\\""');
    lines.length = 0;
    expect(await explainCommand(sub, { ...args, arguments: '{"owner":"acme"}' }, out)).toBe(0);
    expect(lines[0]).toContain('decision  allow');
    lines.length = 0;
    expect(await explainCommand(sub, { ...args, arguments: '[1]' }, out)).toBe(2);
    expect(lines.join('\n')).toContain('--arguments must be a JSON object');
  });
});
