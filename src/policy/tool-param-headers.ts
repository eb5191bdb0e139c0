// Which tool arguments a 2026-07-28 client mirrors into `Mcp-Param-{Name}`
// headers: the `x-mcp-header` annotations of the tool's `inputSchema`, read by
// the rules of the specification (basic/transports/streamable-http.mdx,
// "Custom Headers from Tool Parameters", lines 371-409; server/tools.mdx
// lines 334-368). A definition that breaks a rule is one conforming clients
// drop from their list (line 402: "MUST reject tool definitions where any
// `x-mcp-header` value violates these constraints"), so the gateway marks it
// invalid rather than guessing what some client would mirror.
import { readNames, type ReadNames } from './member-names.js';

/** One annotated argument: the header that mirrors it and where it sits in `arguments`. */
export interface ParamHeader {
  /** `mcp-param-<name>` lower-cased, as Node keys headers (names are case-insensitive, line 572). */
  header: string;
  /** `Mcp-Param-<name>` as the server spelled it, for messages. */
  display: string;
  /** The chain of `properties` keys from the schema root (line 397). */
  path: readonly string[];
  /** The same keys as member names the gateway reads (one reading of each object on the path). */
  names: readonly ReadNames[];
}

/** What the gateway knows of one tool: its annotated arguments, or why clients must reject it. */
export type ToolParamHeaders = { readonly params: readonly ParamHeader[] } | { readonly invalid: string };

/** More annotations than this on one tool: refused (a header per argument; clients send a handful). */
export const MAX_PARAM_HEADERS_PER_TOOL = 64;
/** Most characters of annotation names and property keys (each counted one longer) kept for one tool. */
export const MAX_PARAM_CHARS_PER_TOOL = 4096;

const ANNOTATION = 'x-mcp-header';
/** RFC 9110 §5.6.2 `tchar` (line 379: "MUST match HTTP field-name token syntax (`1*tchar`)"); no control character fits. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Line 384: "primitive types (integer, string, boolean). Parameters with type `number` are not permitted." */
const PRIMITIVE_TYPES: ReadonlySet<unknown> = new Set(['string', 'integer', 'boolean']);

/** JSON Schema keywords whose value is one subschema (2020-12, and draft-07's spellings). */
const SUBSCHEMA = ['additionalProperties', 'items', 'additionalItems', 'contains', 'not', 'if', 'then', 'else', 'propertyNames', 'unevaluatedItems', 'unevaluatedProperties'];
/** Keywords whose value is an array of subschemas. */
const SUBSCHEMA_LISTS = ['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items'];
/** Keywords whose value maps names to subschemas (`properties` is walked apart: it alone keeps a chain reachable). */
const SUBSCHEMA_MAPS = ['patternProperties', 'dependentSchemas', '$defs', 'definitions', 'dependencies'];

class InvalidAnnotation extends Error {}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const own = (object: object, key: string) => Object.prototype.hasOwnProperty.call(object, key);

/** Reads a tool definition's `inputSchema`; a tool without one (or without annotations) has no Mcp-Param headers. */
export function readToolParamHeaders(inputSchema: unknown): ToolParamHeaders {
  const params: ParamHeader[] = [];
  try {
    if (isObject(inputSchema)) walk(inputSchema, [], false, params);
    checkUnique(params);
  } catch (err) {
    if (err instanceof InvalidAnnotation) return { invalid: err.message };
    throw err;
  }
  return { params };
}

/**
 * Visits every subschema. `path` is the `properties` chain from the root
 * when the schema is statically reachable (line 388), undefined once the
 * chain passed any other keyword; `annotatable`: the schema is a property
 * (the root is not one).
 */
function walk(schema: Record<string, unknown>, path: readonly string[] | undefined, annotatable: boolean, params: ParamHeader[]): void {
  if (own(schema, ANNOTATION)) {
    // Line 394: "An `x-mcp-header` annotation anywhere else makes the annotation — and thus the tool definition — invalid."
    if (path === undefined || !annotatable) throw new InvalidAnnotation('an x-mcp-header annotation is not on a property reached through properties alone');
    params.push(paramHeader(schema, path));
    if (params.length > MAX_PARAM_HEADERS_PER_TOOL) throw new InvalidAnnotation(`more than ${MAX_PARAM_HEADERS_PER_TOOL} x-mcp-header annotations (a bound of the gateway)`);
  }
  const properties = own(schema, 'properties') ? schema.properties : undefined;
  if (isObject(properties)) {
    for (const key of Object.keys(properties)) {
      const sub = properties[key];
      if (isObject(sub)) walk(sub, path && [...path, key], true, params);
    }
  }
  for (const keyword of SUBSCHEMA) visit(own(schema, keyword) ? schema[keyword] : undefined, params);
  for (const keyword of SUBSCHEMA_LISTS) {
    const list = own(schema, keyword) ? schema[keyword] : undefined;
    if (Array.isArray(list)) for (const sub of list) visit(sub, params);
  }
  for (const keyword of SUBSCHEMA_MAPS) {
    const map = own(schema, keyword) ? schema[keyword] : undefined;
    if (isObject(map)) for (const key of Object.keys(map)) visit(map[key], params);
  }
}

/** A subschema off the `properties` chain: any annotation in it is invalid. */
function visit(schema: unknown, params: ParamHeader[]): void {
  if (isObject(schema)) walk(schema, undefined, true, params);
}

function paramHeader(schema: Record<string, unknown>, path: readonly string[]): ParamHeader {
  const name = schema[ANNOTATION];
  // Lines 378-381: not empty, a token, no control characters.
  if (typeof name !== 'string' || !TOKEN.test(name)) throw new InvalidAnnotation('an x-mcp-header value is not an HTTP field-name token');
  if (!own(schema, 'type') || !PRIMITIVE_TYPES.has(schema.type)) throw new InvalidAnnotation('an x-mcp-header annotation is on a property whose type is not string, integer or boolean');
  return { header: `mcp-param-${name.toLowerCase()}`, display: `Mcp-Param-${name}`, path, names: path.map((key) => readNames(key)) };
}

/** Line 382: "case-insensitively unique among all `x-mcp-header` values in the `inputSchema`"; and the gateway's bound. */
function checkUnique(params: readonly ParamHeader[]): void {
  const seen = new Set<string>();
  let chars = 0;
  for (const { header, path } of params) {
    if (seen.has(header)) throw new InvalidAnnotation('two x-mcp-header annotations name the same header (case-insensitively)');
    seen.add(header);
    chars += header.length + path.reduce((sum, key) => sum + key.length + 1, 0);
  }
  if (chars > MAX_PARAM_CHARS_PER_TOOL) throw new InvalidAnnotation(`the x-mcp-header annotations and their property keys exceed ${MAX_PARAM_CHARS_PER_TOOL} characters`);
}
