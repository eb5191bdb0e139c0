// A rule's `when` condition, planned once per configuration load (checked
// already by config/cel-when.ts) and evaluated per message over what the
// request carries: the verified token's claims, the method, the tool,
// resource or prompt it names, and its params.arguments. Only `true` matches;
// anything else is false, or an error when the expression cannot be
// evaluated on this message (a missing claim or argument, a wrong type).
import { celEnv, isCelError, parse, plan, type CelInput } from '@bufbuild/cel';
import type { Operation } from './json-rpc.js';

/** What a condition reads of one message. */
export interface ConditionInput {
  operation: Operation;
  claims?: Readonly<Record<string, unknown>>;
}

export type ConditionResult = 'match' | 'no_match' | 'error';

export interface CompiledCondition {
  readonly text: string;
  test(input: ConditionInput): ConditionResult;
}

// The standard library only (its `matches` is RE2: linear in the text).
const ENV = celEnv();
const EMPTY: Readonly<Record<string, unknown>> = Object.freeze({});

/** The variables: `tool` and `uri` are empty unless the method carries that kind of name. */
function bindings({ operation, claims }: ConditionInput): Record<string, CelInput> {
  const { method, name } = operation;
  return {
    claims: (claims ?? EMPTY) as CelInput,
    method,
    tool: method === 'tools/call' ? (name ?? '') : '',
    uri: method === 'resources/read' ? (name ?? '') : '',
    arguments: (operation.arguments ?? EMPTY) as CelInput,
  };
}

export function compileCondition(text: string): CompiledCondition {
  const program = plan(ENV, parse(text));
  return {
    text,
    test(input) {
      let result: unknown;
      try {
        result = program(bindings(input));
      } catch {
        return 'error';
      }
      if (isCelError(result)) return 'error';
      return result === true ? 'match' : 'no_match';
    },
  };
}
