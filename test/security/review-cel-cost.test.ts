/**
 * Review (round 3), day-two's `match: { when }`: the policy step evaluates a condition synchronously,
 * on the event loop, over the client's arguments (up to max_body_bytes). Nesting comprehensions was
 * refused, but `x in list` (or `contains`, `startsWith` of an outside value) is linear itself: inside
 * one comprehension over the request it was quadratic (10 000 paths took 2.4 s) and the load-time
 * check let it through. Now a comprehension's body may read only its own variables and literals
 * (cel-when.ts), so its cost is linear in what it walks. Fails while such a body is accepted.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { whenProblem } from '../../src/config/cel-when.js';
import { compileCondition } from '../../src/policy/cel-condition.js';
import { operationOf, parseJsonRpcBody } from '../../src/policy/json-rpc.js';

const decide = (expr: string, items: string[]) => {
  const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'read', arguments: { paths: items } } }));
  return compileCondition(expr).test({ operation: operationOf(parseJsonRpcBody(body).messages[0]!)!, claims: { groups: ['a'] } });
};

const MACROS = ['all', 'exists', 'exists_one', 'filter', 'map'] as const;
const OUTSIDE = ['arguments.paths', 'arguments', 'claims.groups', 'claims', 'tool', 'uri', 'method'] as const;

describe('review (LOW): CEL conditions cannot cost the product of two request values', () => {
  it('the review\'s `p in arguments.paths` inside a comprehension is refused at load; a loop over literals still loads and decides', () => {
    expect(whenProblem('arguments.paths.all(p, p in arguments.paths)')).toMatch(/may read only its own variables and literals, not arguments/);
    expect(whenProblem("arguments.paths.all(p, p.startsWith('/public/'))")).toBeUndefined();
    expect(whenProblem("arguments.paths.all(p, p in ['/a', '/b'])")).toBeUndefined();
    // The outside value tested outside the loop: linear, allowed.
    expect(whenProblem("'/a' in arguments.paths && arguments.paths.all(p, p.size() < 100)")).toBeUndefined();
    expect(decide("arguments.paths.all(p, p.startsWith('/public/'))", ['/public/a', '/public/b'])).toBe('match');
    expect(decide("arguments.paths.all(p, p.startsWith('/public/'))", ['/public/a', '/etc/passwd'])).not.toBe('match');
  });

  it('property: any macro whose body reads a request value (`in`, contains, startsWith, ==, either side) is refused; the same body over a literal loads', () => {
    const op = fc.constantFrom(
      (a: string, b: string) => `${a} in ${b}`,
      (a: string, b: string) => `${a}.contains(${b})`,
      (a: string, b: string) => `${b}.startsWith(${a})`,
      (a: string, b: string) => `${a} == ${b}`,
      (a: string, b: string) => `size(${b}) > size(${a})`,
    );
    fc.assert(
      fc.property(fc.constantFrom(...MACROS), fc.constantFrom(...OUTSIDE), op, fc.boolean(), (macro, outside, body, extraTerm) => {
        const inner = body('x', outside) + (extraTerm ? " || x == 'y'" : '');
        const bodyExpr = macro === 'map' ? `arguments.paths.map(x, ${inner}).size() > 0` : macro === 'filter' ? `arguments.paths.filter(x, ${inner}).size() > 0` : `arguments.paths.${macro}(x, ${inner})`;
        expect(whenProblem(bodyExpr)).toMatch(/may read only its own variables and literals/);
        const literal = body('x', outside.endsWith('s') || outside === 'claims' || outside === 'arguments' ? "['a']" : "'a'");
        const safe = macro === 'map' || macro === 'filter' ? `arguments.paths.${macro}(x, ${literal}).size() > 0` : `arguments.paths.${macro}(x, ${literal})`;
        expect(whenProblem(safe) ?? '').not.toMatch(/may read only its own variables/);
      }),
      { numRuns: 200 },
    );
  });
});
