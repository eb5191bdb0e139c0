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
    issues: result.error.issues.flatMap((issue) =>
      // One issue per unknown key, each at its own line.
      issue.code === 'unrecognized_keys' ? issue.keys.map((key) => at(issue.path, unknownKey(schema, data, issue.path, key), key)) : [at(issue.path, issue.message)],
    ),
  };
}

function missing(howToGive: string | undefined): string {
  return howToGive === undefined ? 'required, but missing' : `required, but missing: ${howToGive}`;
}

function unknownKey(schema: z.ZodType, data: unknown, path: readonly PropertyKey[], key: string): string {
  const suggestion = nearestKnownKey(schema, data, path, key);
  return suggestion === undefined ? 'unknown key' : `unknown key (did you mean ${suggestion}?)`;
}
