/**
 * cel-spec's conformance tests (the `simple` suite, as @bufbuild/cel-spec
 * ships it) run against @bufbuild/cel, for the tests a gateway condition can
 * meet: no protobuf message types, no bindings, no extension libraries; each
 * expected value compared by CEL type (int is bigint, uint CelUint, double
 * number, bytes Uint8Array, list, map) and each expected error required.
 */
import { tests } from '@bufbuild/cel-spec/testdata/conformance.js';
import { celUint, isCelError, isCelList, isCelMap, isCelUint, run } from '@bufbuild/cel';

interface ProtoValue {
  [kind: string]: unknown;
}

interface Original {
  name?: string;
  expr: string;
  container?: string;
  bindings?: Record<string, unknown>;
  typeEnv?: unknown[];
  disableMacros?: boolean;
  value?: ProtoValue;
  evalError?: unknown;
  anyEvalErrors?: unknown;
}

interface Suite {
  name: string;
  suites?: Suite[];
  tests?: Array<{ original: unknown }>;
}

export interface ConformanceCase {
  section: string;
  path: string;
  test: Original;
}

const SIMPLE_KINDS = new Set(['int64Value', 'uint64Value', 'doubleValue', 'stringValue', 'boolValue', 'nullValue', 'listValue', 'mapValue', 'bytesValue']);

function isSimple(value: ProtoValue): boolean {
  const [kind] = Object.keys(value);
  if (kind === undefined || !SIMPLE_KINDS.has(kind)) return false;
  if (kind === 'listValue') return ((value.listValue as { values?: ProtoValue[] }).values ?? []).every(isSimple);
  if (kind === 'mapValue') return ((value.mapValue as { entries?: Array<{ key: ProtoValue; value: ProtoValue }> }).entries ?? []).every((e) => isSimple(e.key) && isSimple(e.value));
  return true;
}

/** Every conformance case of `sections` a gateway condition can meet (see above). */
export function conformanceCases(sections: readonly string[]): ConformanceCase[] {
  const found: ConformanceCase[] = [];
  const walk = (suite: Suite, path: string[]) => {
    for (const { original } of suite.tests ?? []) {
      const test = original as Original;
      const section = path[0] ?? '';
      if (!sections.includes(section) || test.container || Object.keys(test.bindings ?? {}).length > 0 || (test.typeEnv?.length ?? 0) > 0 || test.disableMacros) continue;
      const error = test.evalError !== undefined || test.anyEvalErrors !== undefined;
      if (!error && !(test.value && isSimple(test.value))) continue;
      found.push({ section, path: [...path, test.name ?? ''].join('/'), test });
    }
    for (const inner of suite.suites ?? []) walk(inner, [...path, inner.name]);
  };
  walk(tests as Suite, []);
  return found;
}

const sameNumber = (a: number, b: number) => (Number.isNaN(a) && Number.isNaN(b)) || a === b;
const doubleOf = (x: unknown) => (typeof x === 'number' ? x : Number(x));

/** Whether @bufbuild/cel's value is the expected one, type included. */
function matches(expected: ProtoValue, got: unknown): boolean {
  const [kind] = Object.keys(expected);
  const x = expected[kind!];
  switch (kind) {
    case 'int64Value':
      return typeof got === 'bigint' && got === BigInt(x as string);
    case 'uint64Value':
      return isCelUint(got) && got.value === BigInt(x as string);
    case 'doubleValue':
      return typeof got === 'number' && sameNumber(got, doubleOf(x));
    case 'stringValue':
    case 'boolValue':
      return got === x;
    case 'nullValue':
      return got === null;
    case 'bytesValue':
      return got instanceof Uint8Array && Buffer.from(got).equals(Buffer.from((x as string | undefined) ?? '', 'base64'));
    case 'listValue': {
      const values = (x as { values?: ProtoValue[] }).values ?? [];
      if (!isCelList(got)) return false;
      const items = [...got];
      return items.length === values.length && values.every((v, i) => matches(v, items[i]));
    }
    case 'mapValue': {
      const entries = (x as { entries?: Array<{ key: ProtoValue; value: ProtoValue }> }).entries ?? [];
      if (!isCelMap(got) || got.size !== entries.length) return false;
      return entries.every(({ key, value }) => {
        const [keyKind] = Object.keys(key);
        const k = key[keyKind!];
        const celKey = keyKind === 'uint64Value' ? celUint(BigInt(k as string)) : keyKind === 'int64Value' ? BigInt(k as string) : k;
        return matches(value, got.get(celKey as string));
      });
    }
    default:
      return false;
  }
}

/** Runs one case: undefined when @bufbuild/cel gives the expected value or error, else what it gave. */
export function runCase({ test }: ConformanceCase): string | undefined {
  let got: unknown;
  try {
    got = run(test.expr);
  } catch (err) {
    got = err;
  }
  const wantsError = test.evalError !== undefined || test.anyEvalErrors !== undefined;
  if (wantsError) return isCelError(got) || got instanceof Error ? undefined : `a value (${String(got)}) where an error was expected`;
  if (got instanceof Error) return `error: ${got.message}`;
  return matches(test.value!, got) ? undefined : `got ${String(got)}`;
}
