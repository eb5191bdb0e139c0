// "Did you mean": for an unknown key, the known key of that mapping nearest to
// it by edit distance, found by walking the schema along the key's path.
import { z } from 'zod';
import type { ConfigPath } from './yaml-file.js';

/** Farther than this, a suggestion is a guess that misleads more than it helps. */
const MAX_DISTANCE = 3;

/** The known key nearest to `key` in the mapping at `path`, or undefined when none is close. */
export function nearestKnownKey(schema: z.ZodType, data: unknown, path: ConfigPath, key: string): string | undefined {
  let best: { key: string; distance: number } | undefined;
  for (const known of knownKeysAt(schema, data, path)) {
    const distance = editDistance(key.toLowerCase(), known);
    if (distance <= Math.min(MAX_DISTANCE, Math.floor(known.length / 2)) && (!best || distance < best.distance)) best = { key: known, distance };
  }
  return best?.key;
}

/** The keys the schema allows in the mapping that `path` reaches in `data`. */
export function knownKeysAt(schema: z.ZodType, data: unknown, path: ConfigPath): string[] {
  const node = unwrap(schema);
  if (node instanceof z.ZodUnion) {
    return [...new Set(chosenOptions(node, data).flatMap((option) => knownKeysAt(option as z.ZodType, data, path)))];
  }
  if (path.length === 0) return node instanceof z.ZodObject ? Object.keys(node.shape) : [];
  const [step, ...rest] = path;
  const child = isRecord(data) || Array.isArray(data) ? (data as Record<PropertyKey, unknown>)[step as PropertyKey] : undefined;
  if (node instanceof z.ZodObject && typeof step === 'string') {
    const field = (node.shape as Record<string, z.ZodType>)[step];
    return field ? knownKeysAt(field, child, rest) : [];
  }
  if (node instanceof z.ZodArray && typeof step === 'number') return knownKeysAt(node.element as z.ZodType, child, rest);
  return [];
}

/** A discriminated union's option named by the data (`kind: static`), else every option. */
function chosenOptions(union: z.ZodUnion, data: unknown): readonly z.core.SomeType[] {
  const discriminator = (union._zod.def as { discriminator?: string }).discriminator;
  if (discriminator === undefined || !isRecord(data)) return union.options;
  const named = union.options.filter((option) => {
    const field = unwrap(option as z.ZodType);
    const literal = field instanceof z.ZodObject ? (field.shape as Record<string, z.ZodType>)[discriminator] : undefined;
    return literal instanceof z.ZodLiteral && literal.values.has(data[discriminator] as never);
  });
  return named.length > 0 ? named : union.options;
}

/** Past `.optional()` and `.default()`, to the schema that describes the value. */
function unwrap(schema: z.ZodType): z.ZodType {
  let node = schema;
  while (node instanceof z.ZodOptional || node instanceof z.ZodDefault || node instanceof z.ZodNullable) node = node.unwrap() as z.ZodType;
  return node;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Levenshtein distance, one row at a time (keys are short). */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current.push(Math.min(substitution, (previous[j] as number) + 1, (current[j - 1] as number) + 1));
    }
    previous = current;
  }
  return previous[b.length] as number;
}
