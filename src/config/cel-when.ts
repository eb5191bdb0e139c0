// `match: { when: <CEL expression> }`: a rule's condition over the verified
// token's `claims`, the request's `method`, `tool`, `uri` and the call's
// `arguments`, in CEL (cel.dev) as @bufbuild/cel implements it (it passes
// cel-spec's conformance suite for the core language, and its `matches()`
// runs RE2, in linear time). Checked once at load, where an issue is placed at
// the `when` line: it must parse, name only those variables, and stay small
// (length, nodes, comprehension nesting), and a comprehension's body may read
// only its own variables and literals, so no expression's cost grows faster
// than the request it reads: `x in list`, `x.contains(s)` over a value from
// outside the loop are themselves linear in that value, and inside a loop over
// the request they would cost the product of the two (K-review: 10 000 paths
// took 2.4 s). Test such a value outside the loop, or compare with literals.
import { parse } from '@bufbuild/cel';
import type { Expr } from '@bufbuild/cel-spec/cel/expr/syntax_pb.js';
import { z } from 'zod';

export const WHEN_VARIABLES = ['claims', 'method', 'tool', 'uri', 'arguments'] as const;
/** Characters of one expression: a policy condition, not a program. */
export const MAX_WHEN_LENGTH = 1024;
/** Nodes of its syntax tree (macros expanded). */
export const MAX_WHEN_NODES = 400;
/** Comprehensions (all, exists, exists_one, map, filter) inside one another: one, so the cost is linear in what is read. */
export const MAX_WHEN_NESTING = 1;

interface Shape {
  nodes: number;
  nesting: number;
  idents: Set<string>;
  bound: Set<string>;
  /** Names a comprehension's body reads that are not that comprehension's own variables. */
  readInLoop: Set<string>;
}

/**
 * Walks the tree: counts nodes, the deepest comprehension nesting, the names read, the names
 * comprehensions bind and the outside names a loop body reads (`loop`: the body's own variables).
 */
function measure(expr: Expr | undefined, shape: Shape, depth = 0, loop?: ReadonlySet<string>): void {
  if (!expr || shape.nodes > MAX_WHEN_NODES) return;
  shape.nodes++;
  const kind = expr.exprKind;
  const walk = (part: Expr | undefined) => measure(part, shape, depth, loop);
  switch (kind.case) {
    case 'identExpr':
      shape.idents.add(kind.value.name);
      if (loop && !loop.has(kind.value.name)) shape.readInLoop.add(kind.value.name);
      return;
    case 'selectExpr':
      return walk(kind.value.operand);
    case 'callExpr':
      walk(kind.value.target);
      for (const arg of kind.value.args) walk(arg);
      return;
    case 'listExpr':
      for (const element of kind.value.elements) walk(element);
      return;
    case 'structExpr':
      for (const entry of kind.value.entries) {
        if (entry.keyKind.case === 'mapKey') walk(entry.keyKind.value);
        walk(entry.value);
      }
      return;
    case 'comprehensionExpr': {
      const c = kind.value;
      shape.nesting = Math.max(shape.nesting, depth + 1);
      const own = new Set([c.iterVar, c.iterVar2, c.accuVar].filter((name) => name !== ''));
      for (const name of own) shape.bound.add(name);
      walk(c.iterRange);
      for (const part of [c.accuInit, c.loopCondition, c.loopStep, c.result]) measure(part, shape, depth + 1, own);
      return;
    }
    default:
      return;
  }
}

/** Why `text` is not a usable condition, or undefined. */
export function whenProblem(text: string): string | undefined {
  let expr: Expr;
  try {
    expr = parse(text).expr;
  } catch (err) {
    // "syntax error: <input>:1:17: found ( but …": the column is the expression's own.
    return `not a CEL expression: ${(err as Error).message.replace(/^syntax error: <input>:/, 'at ')}`;
  }
  const shape: Shape = { nodes: 0, nesting: 0, idents: new Set(), bound: new Set(), readInLoop: new Set() };
  measure(expr, shape);
  if (shape.nodes > MAX_WHEN_NODES) return `the expression is too large (over ${MAX_WHEN_NODES} nodes): split it into several rules`;
  if (shape.nesting > MAX_WHEN_NESTING) return 'comprehensions (all, exists, map, filter…) may not be nested: their cost would grow with the product of the lists';
  const unknown = [...shape.idents].filter((name) => !(WHEN_VARIABLES as readonly string[]).includes(name) && !shape.bound.has(name));
  if (unknown.length > 0) return `unknown name${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}: a condition reads ${WHEN_VARIABLES.join(', ')}`;
  if (shape.readInLoop.size > 0) {
    return `a comprehension's body (all, exists, map, filter…) may read only its own variables and literals, not ${[...shape.readInLoop].join(', ')}: its cost would grow with the product of the two; test that value outside the loop`;
  }
  return undefined;
}

export const WhenSchema = z
  .string()
  .min(1)
  .max(MAX_WHEN_LENGTH)
  .superRefine((text, ctx) => {
    const problem = whenProblem(text);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  })
  .describe(`a CEL condition (cel.dev) over ${WHEN_VARIABLES.join(', ')}; the rule applies only when it is true`);
