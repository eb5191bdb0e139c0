// Runs a zod schema over a parsed file and turns its issues into located
// `file:line:col` issues.
import type { z } from 'zod';
import type { ConfigIssue } from './config-error.js';
import { nearestKnownKey } from './did-you-mean.js';
import type { Locate } from './yaml-file.js';

export type Validated<T> = { value: T; issues: [] } | { value: undefined; issues: ConfigIssue[] };

/** `howToGive(path)`: another way to give a missing key (an environment variable), added to its message. */
export function validate<S extends z.ZodType>(schema: S, data: unknown, at: Locate, howToGive?: (path: readonly PropertyKey[]) => string | undefined): Validated<z.output<S>> {
  const result = schema.safeParse(data, {
    // zod's default ("expected string, received undefined") hides that the key is simply absent.
    error: (issue) => (issue.code === 'invalid_type' && issue.input === undefined ? missing(howToGive?.(issue.path ?? [])) : undefined),
  });
  if (result.success) return { value: result.data, issues: [] };
  return {
    value: undefined,
    issues: result.error.issues.flatMap((issue) => unwrapUnion(issue, data)).flatMap((issue) =>
      // One issue per unknown key, each at its own line.
      issue.code === 'unrecognized_keys' ? issue.keys.map((key) => at(issue.path, unknownKey(schema, data, issue.path, key), key)) : [at(issue.path, issue.message)],
    ),
  };
}

type Issue = z.core.$ZodIssue;

/**
 * A value none of a union's forms accepts: when exactly one form fits its
 * shape (its type matches and every key it complains about is one the value
 * has, as `{ stdio: { max_processes: two } }` fits only the stdio form), that
 * form's own issues, at their own lines; otherwise the union's one message.
 */
function unwrapUnion(issue: Issue, data: unknown): Issue[] {
  if (issue.code !== 'invalid_union') return [issue];
  const value = issue.path.reduce<unknown>((at, key) => (isRecord(at) ? at[key as string] : undefined), data);
  const fitting = issue.errors.filter((option) => option.every((inner) => fits(inner, value)));
  if (fitting.length !== 1) return [issue];
  return fitting[0]!.flatMap((inner) => unwrapUnion({ ...inner, path: [...issue.path, ...inner.path] } as Issue, data));
}

function fits(issue: Issue, value: unknown): boolean {
  if (issue.path.length === 0) return issue.code !== 'invalid_type' && issue.code !== 'invalid_union';
  return isRecord(value) && Object.hasOwn(value, issue.path[0] as string);
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function missing(howToGive: string | undefined): string {
  return howToGive === undefined ? 'required, but missing' : `required, but missing: ${howToGive}`;
}

function unknownKey(schema: z.ZodType, data: unknown, path: readonly PropertyKey[], key: string): string {
  const suggestion = nearestKnownKey(schema, data, path, key);
  return suggestion === undefined ? 'unknown key' : `unknown key (did you mean ${suggestion}?)`;
}
