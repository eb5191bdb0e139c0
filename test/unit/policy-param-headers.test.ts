/**
 * Mcp-Param-* headers mean what the body says (MCP 2026-07-28, basic/transports/streamable-http
 * "Custom Headers from Tool Parameters" and "Server Validation"; server/tools "x-mcp-header"):
 * - which annotations a tool definition may carry (the conformance suite's invalid tools included);
 * - what a route remembers (replaced per tool, bounded, invalid definitions kept as such);
 * - the comparison, rule by rule, a corpus of tricky encodings, and a fast-check property whose
 *   oracle encodes values as the spec tells a client to, independently of src/;
 * - the learner and the filter teach the route from tools/list answers without changing a byte.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { parseJsonRpcBody } from '../../src/policy/json-rpc.js';
import { HEADER_MISMATCH, HeaderMismatchError } from '../../src/policy/mcp-headers.js';
import { checkParamHeaders } from '../../src/policy/param-headers.js';
import { MAX_PARAM_CHARS_PER_TOOL, MAX_PARAM_HEADERS_PER_TOOL, readToolParamHeaders } from '../../src/policy/tool-param-headers.js';
import { ToolParamRegistry } from '../../src/policy/tool-param-registry.js';
import { toolsListFilter } from '../../src/policy/tools-list-filter.js';
import { toolsListLearner } from '../../src/policy/tools-list-learner.js';
import { ToolsListAnswers } from '../../src/policy/tools-list-answers.js';
import { thrownBy } from '../helpers/rejection.js';

type Headers = Record<string, string>;
const NEW = '2026-07-28';
const OLD = '2025-11-25';
const b64 = (s: string) => `=?base64?${Buffer.from(s, 'utf8').toString('base64')}?=`;

/** The spec's example tool (streamable-http.mdx lines 413-433), with an integer, a boolean and a nested argument. */
const EXECUTE_SQL = {
  name: 'execute_sql',
  inputSchema: {
    type: 'object',
    properties: {
      region: { type: 'string', 'x-mcp-header': 'Region' },
      priority: { type: 'integer', 'x-mcp-header': 'Priority' },
      dry_run: { type: 'boolean', 'x-mcp-header': 'DryRun' },
      target: { type: 'object', properties: { tenant: { type: 'string', 'x-mcp-header': 'Tenant' } } },
      query: { type: 'string' },
    },
    required: ['region', 'query'],
  },
};

function registryOf(...tools: unknown[]): ToolParamRegistry {
  const registry = new ToolParamRegistry();
  registry.learn(tools);
  return registry;
}

const call = (args: unknown, name = 'execute_sql', id: unknown = 7) => parseJsonRpcBody(Buffer.from(JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } })));
const withVersion = (headers: Headers, version = NEW): Headers => ({ 'mcp-protocol-version': version, ...headers });
const sql = registryOf(EXECUTE_SQL);
const passes = (args: unknown, headers: Headers, version = NEW) => checkParamHeaders(withVersion(headers, version), call(args), sql);
const mismatch = (args: unknown, headers: Headers, version = NEW) => thrownBy(() => passes(args, headers, version), HeaderMismatchError);

describe('which x-mcp-header annotations a tool may carry', () => {
  const schema = (properties: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({ type: 'object', properties, ...extra });
  const invalid = (inputSchema: unknown) => {
    const read = readToolParamHeaders(inputSchema);
    expect('invalid' in read, JSON.stringify(inputSchema)).toBe(true);
  };

  it('reads the header and the chain of properties keys, nested ones included', () => {
    const read = readToolParamHeaders(EXECUTE_SQL.inputSchema);
    expect('params' in read && read.params.map((p) => [p.header, p.display, p.path])).toEqual([
      ['mcp-param-region', 'Mcp-Param-Region', ['region']],
      ['mcp-param-priority', 'Mcp-Param-Priority', ['priority']],
      ['mcp-param-dryrun', 'Mcp-Param-DryRun', ['dry_run']],
      ['mcp-param-tenant', 'Mcp-Param-Tenant', ['target', 'tenant']],
    ]);
    // Every tchar is allowed by the spec (the gateway refuses `_` and `.` in header names, J50: such an argument cannot be sent with a value).
    expect(readToolParamHeaders(schema({ a: { type: 'string', 'x-mcp-header': "!#$%&'*+-.^_`|~09azAZ" } }))).toMatchObject({ params: [{ header: "mcp-param-!#$%&'*+-.^_`|~09azaz" }] });
  });

  it('knows no annotation in a property named x-mcp-header, nor in data keywords (const, default, examples, enum) or unknown keywords', () => {
    const data = { 'x-mcp-header': 'Region' };
    const read = readToolParamHeaders(schema({ 'x-mcp-header': { type: 'string' }, v: { type: 'object', const: data, default: data, examples: [data], enum: [data] } }, { 'x-vendor': { properties: { q: { type: 'string', 'x-mcp-header': 'Q' } } } }));
    expect(read).toEqual({ params: [] });
    expect(readToolParamHeaders(undefined)).toEqual({ params: [] });
    expect(readToolParamHeaders({ type: 'object' })).toEqual({ params: [] });
  });

  it('refuses the conformance suite\'s invalid tools (http-invalid-tool-headers): empty, object, array, null, number, duplicates, space, colon, non-ASCII, control character', () => {
    for (const property of [
      { type: 'string', 'x-mcp-header': '' },
      { type: 'object', 'x-mcp-header': 'Data' },
      { type: 'array', items: { type: 'string' }, 'x-mcp-header': 'Items' },
      { type: 'null', 'x-mcp-header': 'Nil' },
      { type: 'number', 'x-mcp-header': 'Score' },
      { type: 'string', 'x-mcp-header': 'My Region' },
      { type: 'string', 'x-mcp-header': 'Region:Primary' },
      { type: 'string', 'x-mcp-header': 'Région' },
      { type: 'string', 'x-mcp-header': 'Region\t1' },
      { type: 'string', 'x-mcp-header': 'Region\r\n' },
      { type: 'string', 'x-mcp-header': 42 },
      { 'x-mcp-header': 'NoType' },
      { type: ['string', 'null'], 'x-mcp-header': 'Union' },
    ]) {
      invalid(schema({ v: property }));
    }
    invalid(schema({ a: { type: 'string', 'x-mcp-header': 'Region' }, b: { type: 'string', 'x-mcp-header': 'Region' } }));
    invalid(schema({ a: { type: 'string', 'x-mcp-header': 'MyField' }, b: { type: 'string', 'x-mcp-header': 'myfield' } }));
    invalid(schema({ a: { type: 'string', 'x-mcp-header': 'Same' }, o: { type: 'object', properties: { b: { type: 'string', 'x-mcp-header': 'SAME' } } } }));
  });

  it('refuses an annotation off a chain of properties keys: the root, items, composition, conditionals, $defs, additionalProperties, patternProperties', () => {
    const annotated = { type: 'string', 'x-mcp-header': 'Region' };
    invalid({ type: 'string', 'x-mcp-header': 'Root' });
    for (const off of [
      { items: annotated },
      { prefixItems: [annotated] },
      { anyOf: [annotated] },
      { oneOf: [{ type: 'object' }, annotated] },
      { allOf: [annotated] },
      { not: annotated },
      { if: annotated },
      { then: annotated },
      { else: annotated },
      { $defs: { region: annotated } },
      { definitions: { region: annotated } },
      { additionalProperties: annotated },
      { patternProperties: { '^r': annotated } },
      { dependentSchemas: { a: annotated } },
      { contains: annotated },
    ]) {
      invalid(schema({}, off));
      // Below a property, the chain is broken all the same.
      invalid(schema({ outer: { type: 'object', ...off } }));
      invalid(schema({ list: { type: 'array', items: { type: 'object', properties: { x: { type: 'object', ...off } } } } }));
    }
    invalid(schema({ list: { type: 'array', items: { type: 'object', properties: { region: annotated } } } }));
    invalid(schema({ pick: { anyOf: [{ type: 'object', properties: { region: annotated } }] } }));
  });

  it('bounds what it keeps of one tool (fail closed: such a tool is treated as invalid)', () => {
    const many = Object.fromEntries(Array.from({ length: MAX_PARAM_HEADERS_PER_TOOL + 1 }, (_, i) => [`p${i}`, { type: 'string', 'x-mcp-header': `P${i}` }]));
    invalid(schema(many));
    const fewer = Object.fromEntries(Object.entries(many).slice(0, MAX_PARAM_HEADERS_PER_TOOL));
    expect(readToolParamHeaders(schema(fewer))).toMatchObject({ params: { length: MAX_PARAM_HEADERS_PER_TOOL } });
    invalid(schema({ ['k'.repeat(MAX_PARAM_CHARS_PER_TOOL)]: { type: 'string', 'x-mcp-header': 'Long' } }));
  });
});

describe('what a route remembers', () => {
  it('replaces a tool when it is listed again, forgets it when relisted without annotations, leaves other tools alone', () => {
    const registry = registryOf(EXECUTE_SQL, { name: 'echo', inputSchema: { type: 'object' } });
    expect(registry.of('echo')).toBeUndefined();
    expect(registry.of('execute_sql')).toMatchObject({ params: { length: 4 } });
    registry.learn([{ name: 'other', inputSchema: { type: 'object', properties: { z: { type: 'string', 'x-mcp-header': 'Zone' } } } }]);
    expect(registry.of('execute_sql')).toMatchObject({ params: { length: 4 } });
    registry.learn([{ name: 'execute_sql', inputSchema: { type: 'object', properties: { region: { type: 'string', 'x-mcp-header': 'Zone' } } } }]);
    expect(registry.of('execute_sql')).toMatchObject({ params: [{ header: 'mcp-param-zone' }] });
    registry.learn([{ name: 'execute_sql', inputSchema: { type: 'object' } }]);
    expect(registry.of('execute_sql')).toBeUndefined();
    expect(registry.of('other')).toBeDefined();
  });

  it('keeps a tool listed twice in one list, or spelled ambiguously, as invalid', () => {
    expect(registryOf(EXECUTE_SQL, { name: 'execute_sql', inputSchema: { type: 'object' } }).of('execute_sql')).toHaveProperty('invalid');
    expect(registryOf({ ...EXECUTE_SQL, InputSchema: { type: 'object' } }).of('execute_sql')).toHaveProperty('invalid');
    expect(registryOf({ name: 'bad', inputSchema: { type: 'object', properties: { n: { type: 'number', 'x-mcp-header': 'N' } } } }).of('bad')).toHaveProperty('invalid');
  });

  it('holds at most its bound of tools, forgetting the one learnt first', () => {
    const registry = new ToolParamRegistry(3);
    const tool = (name: string) => ({ name, inputSchema: EXECUTE_SQL.inputSchema });
    registry.learn([tool('a'), tool('b'), tool('c')]);
    registry.learn([tool('a'), tool('d')]);
    expect(registry.size).toBe(3);
    expect(['a', 'b', 'c', 'd'].map((n) => registry.of(n) !== undefined)).toEqual([true, false, true, true]);
  });
});

describe('checkParamHeaders, rule by rule', () => {
  const full = { region: 'us-west1', priority: 5, dry_run: false, target: { tenant: 'acme' }, query: 'SELECT 1' };
  const fullHeaders = { 'mcp-param-region': 'us-west1', 'mcp-param-priority': '5', 'mcp-param-dryrun': 'false', 'mcp-param-tenant': 'acme' };

  it('passes headers that mirror the body, and omitted ones for absent or null arguments', () => {
    expect(() => passes(full, fullHeaders)).not.toThrow();
    expect(() => passes({ region: 'us-west1', query: 'q' }, { 'mcp-param-region': 'us-west1' })).not.toThrow();
    expect(() => passes({ region: 'us-west1', priority: null, dry_run: null, target: null }, { 'mcp-param-region': 'us-west1' })).not.toThrow();
    // A chain through something that is not an object has no value (line 399).
    expect(() => passes({ target: 'acme' }, {})).not.toThrow();
    expect(() => passes({ target: ['acme'] }, {})).not.toThrow();
    expect(() => passes('not an object', {})).not.toThrow();
    // Unknown Mcp-Param headers are forwarded (line 548).
    expect(() => passes({ region: 'eu' }, { 'mcp-param-region': 'eu', 'mcp-param-shard': '7' })).not.toThrow();
  });

  it('refuses a header whose value differs from the body, with -32020 and the request id, never echoing the value', () => {
    const err = mismatch({ region: 'us' }, { 'mcp-param-region': 'eu<script>' });
    expect(err.status).toBe(400);
    expect(JSON.parse(err.body())).toEqual({ jsonrpc: '2.0', id: 7, error: { code: HEADER_MISMATCH, message: err.message } });
    expect(err.message).toContain('Mcp-Param-Region');
    expect(err.body()).not.toContain('script');
    mismatch({ target: { tenant: 'acme' } }, { 'mcp-param-tenant': 'evil' });
    mismatch({ priority: 5 }, { 'mcp-param-priority': '6' });
    mismatch({ dry_run: true }, { 'mcp-param-dryrun': 'false' });
  });

  it('refuses a header for an argument the body lacks or sets to null', () => {
    mismatch({}, { 'mcp-param-region': 'eu' });
    mismatch({ region: null }, { 'mcp-param-region': 'null' });
    mismatch({ target: {} }, { 'mcp-param-tenant': 'acme' });
    mismatch({ target: 'acme' }, { 'mcp-param-tenant': 'acme' });
    // At an older revision too: whoever reads the header reads a value the body does not have.
    mismatch({}, { 'mcp-param-region': 'eu' }, OLD);
  });

  it('refuses a missing header for an argument with a value from 2026-07-28 on, and lets older revisions (no headers) pass', () => {
    expect(mismatch({ region: 'eu' }, {}).message).toContain('missing');
    mismatch({ target: { tenant: 'acme' } }, {});
    mismatch({ region: 'eu' }, {}, '2027-01-15');
    expect(() => passes({ region: 'eu' }, {}, OLD)).not.toThrow();
    expect(() => checkParamHeaders({}, call({ region: 'eu' }), sql)).not.toThrow();
    expect(() => passes({ region: 'eu' }, {}, 'DRAFT-2026-v1')).not.toThrow();
    // Older revisions still have their present headers compared.
    mismatch({ region: 'us' }, { 'mcp-param-region': 'eu' }, OLD);
  });

  it('refuses an argument no header can mirror (a fraction, an unsafe integer, an object) when a header is sent or required', () => {
    for (const priority of [1.5, 2 ** 53, -(2 ** 53), { n: 1 }, [1]]) {
      mismatch({ priority }, { 'mcp-param-priority': String(priority) });
      mismatch({ priority }, {});
      expect(() => passes({ priority }, {}, OLD)).not.toThrow();
    }
  });

  it('refuses an argument spelled two ways a case-folding reader would confuse (400, not forwarded)', () => {
    const region = { 'mcp-param-region': 'us' };
    const tenant = { 'mcp-param-tenant': 'a' };
    const cases: Array<[unknown, Headers]> = [
      [{ region: 'us', Region: 'eu' }, region],
      [{ region: 'us', REGION: 'eu' }, region],
      [{ region: 'us', 'ＲＥＧＩＯＮ': 'eu' }, region],
      [{ target: { tenant: 'a', Tenant: 'b' } }, tenant],
      [{ Target: {}, target: { tenant: 'a' } }, tenant],
    ];
    for (const [args, headers] of cases) {
      const err = thrownBy(() => passes(args, headers), GatewayError);
      expect(err).not.toBeInstanceOf(HeaderMismatchError);
      expect(err.status).toBe(400);
    }
  });

  it('refuses a call to a tool clients must reject, from 2026-07-28 on; forwards calls to unknown tools', () => {
    const registry = registryOf({ name: 'bad', inputSchema: { type: 'object', properties: { n: { type: 'number', 'x-mcp-header': 'N' } } } });
    expect(thrownBy(() => checkParamHeaders(withVersion({}), call({ n: 1 }, 'bad'), registry), HeaderMismatchError).message).toMatch(/must reject/);
    expect(() => checkParamHeaders(withVersion({}, OLD), call({ n: 1 }, 'bad'), registry)).not.toThrow();
    expect(() => checkParamHeaders(withVersion({ 'mcp-param-region': 'x' }), call({ region: 'y' }, 'never_listed'), sql)).not.toThrow();
  });

  it('refuses Mcp-Param headers on a batch (id null), and ignores them on other methods', () => {
    const batch = parseJsonRpcBody(Buffer.from(JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'execute_sql', arguments: {} } }])));
    expect(thrownBy(() => checkParamHeaders({ 'mcp-param-region': 'eu' }, batch, sql), HeaderMismatchError).id).toBeNull();
    expect(() => checkParamHeaders({}, batch, sql)).not.toThrow();
    const list = parseJsonRpcBody(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/list"}'));
    expect(() => checkParamHeaders(withVersion({ 'mcp-param-region': 'eu' }), list, sql)).not.toThrow();
  });
});

describe('a corpus of tricky encodings (body value, header as sent, accepted?)', () => {
  const corpus: Array<[unknown, string, boolean]> = [
    // Strings: as they are, or base64 of their UTF-8 (the spec's examples, lines 512-518).
    ['us-west1', 'us-west1', true],
    ['us-west1', b64('us-west1'), true],
    ['Hello, 世界', '=?base64?SGVsbG8sIOS4lueVjA==?=', true],
    ['Hello, 世界', 'Hello, ??', false],
    [' padded ', '=?base64?IHBhZGRlZCA=?=', true],
    [' padded ', 'padded', false],
    ['line1\nline2', '=?base64?bGluZTEKbGluZTI=?=', true],
    ['=?base64?literal?=', '=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=', true],
    ['literal', '=?base64?literal?=', false],
    ['US-WEST1', 'us-west1', false],
    ['café', b64('café'), true],
    ['café', b64('cafe\u0301'), false],
    ['', '', true],
    ['', b64(''), true],
    ['a b', 'a b', true],
    // Integers: the decimal form only, whatever the JSON spelling of the body.
    [1, '1', true],
    [1, '1.0', false],
    [1, '01', false],
    [1, '+1', false],
    [1, ' 1', false],
    [1, '1e0', false],
    [1, b64('1'), true],
    [-7, '-7', true],
    [0, '0', true],
    [0, '-0', false],
    [2 ** 53 - 1, '9007199254740991', true],
    [-(2 ** 53 - 1), '-9007199254740991', true],
    ['1', '1', true],
    // Booleans: lower case.
    [true, 'true', true],
    [true, 'True', false],
    [true, 'TRUE', false],
    [true, '1', false],
    [false, 'false', true],
    [false, '', false],
    ['true', 'true', true],
  ];
  const tool = { name: 't', inputSchema: { type: 'object', properties: { v: { type: 'string', 'x-mcp-header': 'V' } } } };
  const registry = registryOf(tool);

  it.each(corpus.map(([value, header, ok]) => [JSON.stringify(value), JSON.stringify(header), ok, value, header] as const))('%s with %s: %s', (_v, _h, ok, value, header) => {
    const run = () => checkParamHeaders(withVersion({ 'mcp-param-v': header }), call({ v: value }, 't'), registry);
    if (ok) expect(run).not.toThrow();
    else thrownBy(run, HeaderMismatchError);
  });

  it('reads 1.0 and 1e0 in the body as the integer 1 (as every JSON reader does), mirrored as "1"', () => {
    for (const spelling of ['1.0', '1e0', '10e-1']) {
      const request = parseJsonRpcBody(Buffer.from(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"v":${spelling}}}}`));
      expect(() => checkParamHeaders(withVersion({ 'mcp-param-v': '1' }), request, registry)).not.toThrow();
      thrownBy(() => checkParamHeaders(withVersion({ 'mcp-param-v': spelling }), request, registry), HeaderMismatchError);
    }
  });
});

// ---- The property: an oracle written from the spec's client rules, not from src/. ----

type Kind = 'string' | 'integer' | 'boolean';
interface Annotated {
  /** Header name as the server spelled it. */
  name: string;
  kind: Kind;
  /** Nested under `outer` or not. */
  nested: boolean;
}
/** How the generated request treats one annotated argument. */
type Treatment = 'spec' | 'always-base64' | 'omit' | 'other-value' | 'reformat';

/** Lines 472-476 and 478-508: the header a conforming client sends (the gateway also wants base64 for any value opening with `=?`). */
function specHeader(value: string | number | boolean): string {
  const text = typeof value === 'string' ? value : String(value);
  const plain = /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(text) || text === '';
  return plain && !text.startsWith('=?') ? text : `=?base64?${Buffer.from(text, 'utf8').toString('base64')}?=`;
}
/** What the header says, read as line 498 tells a reader to. */
const oracleDecode = (header: string) => (header.startsWith('=?base64?') && header.endsWith('?=') ? Buffer.from(header.slice(9, -2), 'base64').toString('utf8') : header);
const canonical = (value: string | number | boolean) => (typeof value === 'boolean' ? (value ? 'true' : 'false') : String(value));

const valueOf = (kind: Kind): fc.Arbitrary<string | number | boolean> =>
  kind === 'string'
    ? fc.oneof(fc.string({ unit: 'grapheme', maxLength: 12 }), fc.constantFrom(' x', 'x ', '=?base64?aGk=?=', '=?x', '', 'a\tb', 'été'))
    : kind === 'integer'
      ? fc.oneof(fc.integer(), fc.constantFrom(0, -1, Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER))
      : fc.boolean();

const annotations = fc.uniqueArray(
  fc.record({ name: fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,8}$/), kind: fc.constantFrom<Kind>('string', 'integer', 'boolean'), nested: fc.boolean() }),
  { minLength: 1, maxLength: 4, selector: (a) => a.name.toLowerCase() },
);

const scenario = annotations.chain((list) =>
  fc.record({
    list: fc.constant(list),
    version: fc.constantFrom(NEW, OLD),
    outerIsObject: fc.boolean(),
    args: fc.tuple(
      ...list.map((a) => fc.record({ value: fc.option(valueOf(a.kind), { nil: undefined }), isNull: fc.boolean(), treatment: fc.constantFrom<Treatment>('spec', 'spec', 'always-base64', 'omit', 'other-value', 'reformat'), other: valueOf(a.kind) })),
    ),
  }),
);

function schemaOf(list: readonly Annotated[]) {
  const top: Record<string, unknown> = { query: { type: 'string' } };
  const inner: Record<string, unknown> = {};
  list.forEach((a, i) => ((a.nested ? inner : top)[`arg${i}`] = { type: a.kind, 'x-mcp-header': a.name }));
  top.outer = { type: 'object', properties: inner };
  return { type: 'object', properties: top };
}

function reformat(value: string | number | boolean): string {
  if (typeof value === 'number') return `${value}.0`;
  if (typeof value === 'boolean') return value ? 'True' : 'FALSE';
  return specHeader(value.toUpperCase() === value ? `${value}x` : value.toUpperCase());
}

describe('property: the gateway passes a call exactly when every mirrored argument and its header agree', () => {
  it('random annotated schemas, values and header treatments, at 2026-07-28 and 2025-11-25', () => {
    fc.assert(
      fc.property(scenario, ({ list, version, outerIsObject, args }) => {
        const registry = registryOf({ name: 'tool', inputSchema: schemaOf(list) });
        const top: Record<string, unknown> = { query: 'q' };
        const inner: Record<string, unknown> = {};
        const headers: Headers = { 'mcp-protocol-version': version };
        let agree = true;
        list.forEach((a, i) => {
          const { value, isNull, treatment, other } = args[i]!;
          const container = a.nested ? inner : top;
          const reachable = !a.nested || outerIsObject;
          if (value !== undefined) container[`arg${i}`] = isNull ? null : value;
          const present = reachable && value !== undefined && !isNull;
          let header: string | undefined;
          if (treatment === 'spec') header = present ? specHeader(value) : undefined;
          else if (treatment === 'always-base64') header = present ? `=?base64?${Buffer.from(canonical(value), 'utf8').toString('base64')}?=` : undefined;
          else if (treatment === 'other-value') header = specHeader(other);
          else if (treatment === 'reformat') header = value === undefined ? undefined : reformat(value);
          if (header !== undefined) headers[`mcp-param-${a.name.toLowerCase()}`] = header;
          // The oracle (lines 555-566): present value ⇒ header decoding to its canonical form
          // (a missing header tolerated before 2026-07-28); no value ⇒ no header.
          if (present) agree &&= header === undefined ? version !== NEW : oracleDecode(header) === canonical(value);
          else agree &&= header === undefined;
        });
        top.outer = outerIsObject ? inner : 'not an object';
        let passed = true;
        try {
          checkParamHeaders(headers, call(top, 'tool'), registry);
        } catch (err) {
          expect(err).toBeInstanceOf(HeaderMismatchError);
          passed = false;
        }
        expect(passed).toBe(agree);
      }),
      { numRuns: 1000 },
    );
  });
});

/** The tools/list requests (by id) one POST forwarded: their answers alone teach. */
const askedFor = (...ids: Array<string | number>) => ToolsListAnswers.of({ batch: ids.length > 1, messages: ids.map((id) => ({ jsonrpc: '2.0', id, method: 'tools/list' })) })!;

describe('learning from tools/list answers', () => {
  const answer = JSON.stringify({ jsonrpc: '2.0', id: 3, result: { tools: [EXECUTE_SQL, { name: 'echo', inputSchema: { type: 'object' } }] } });
  const feed = (transform: ReturnType<ReturnType<typeof toolsListLearner>>, input: Buffer, cut: number) => {
    const out = [transform!.push(input.subarray(0, cut)), transform!.push(input.subarray(cut)), transform!.end()];
    return Buffer.concat(out);
  };

  it('the learner reads JSON and event-stream answers, passing every byte as it came, whatever the chunking', () => {
    const sseBody = Buffer.from(`\ufeffevent: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\nid: 1\ndata: ${answer}\n\n`);
    fc.assert(
      fc.property(fc.constantFrom('application/json', 'text/event-stream'), fc.nat(), (type, at) => {
        const registry = new ToolParamRegistry();
        const input = type === 'application/json' ? Buffer.from(answer) : sseBody;
        const out = feed(toolsListLearner((tools) => registry.learn(tools), 1 << 20, askedFor(3))({ 'content-type': type }), input, at % input.length);
        expect(out.equals(input)).toBe(true);
        expect(registry.of('execute_sql')).toMatchObject({ params: { length: 4 } });
      }),
      { numRuns: 200 },
    );
  });

  it('learns nothing, and changes nothing, from an answer over the bound, unreadable, ambiguous or encoded', () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ 'content-type': 'application/json' }, answer.replace('"result"', '"result":null,"result"')],
      [{ 'content-type': 'application/json' }, answer.replace('"tools"', '"Tools":[],"tools"')],
      [{ 'content-type': 'application/json' }, answer.slice(0, -3)],
      [{ 'content-type': 'text/event-stream' }, `data: ${answer.slice(0, 40)}\n\n`],
    ];
    for (const [headers, body] of cases) {
      const registry = new ToolParamRegistry();
      const input = Buffer.from(body);
      expect(feed(toolsListLearner((tools) => registry.learn(tools), 1 << 20, askedFor(3))(headers), input, 10).equals(input)).toBe(true);
      expect(registry.size, body.slice(0, 60)).toBe(0);
    }
    const registry = new ToolParamRegistry();
    const input = Buffer.from(answer);
    expect(feed(toolsListLearner((tools) => registry.learn(tools), 100, askedFor(3))({ 'content-type': 'application/json' }), input, 60).equals(input)).toBe(true);
    expect(registry.size).toBe(0);
    expect(toolsListLearner(() => undefined, 100, askedFor(3))({ 'content-type': 'application/json', 'content-encoding': 'gzip' })).toBeUndefined();
    expect(toolsListLearner(() => undefined, 100, askedFor(3))({ 'content-type': 'text/plain' })).toBeUndefined();
  });

  it('an answer the gateway made (an aggregated list) teaches from its value exactly what its text, strictly read, would', () => {
    // Tool definitions with annotations, lone surrogates (which JSON.stringify escapes and the strict reader refuses),
    // backslashes before a "u" (not an escape), and nesting around the strict reader's bound of 256.
    const nested = (depth: number): unknown => (depth <= 0 ? { type: 'string' } : { type: 'object', properties: { x: nested(depth - 1) } });
    const text = fc.constantFrom('plain', 'caf\u00e9', '\ud800 written out', 'a \\ud800 backslash', '\ud800', 'x\udfffy', '\ud83d\ude00', 'Region');
    const tool = fc.record({
      name: fc.constantFrom('execute_sql', 'echo', 'other'),
      description: text,
      inputSchema: fc.oneof(fc.constant(EXECUTE_SQL.inputSchema), fc.integer({ min: 120, max: 130 }).map(nested), fc.constant({ type: 'object' })),
    });
    fc.assert(
      fc.property(fc.array(tool, { maxLength: 4 }), fc.constantFrom<Array<string | number>>([3], [3, 4], [4]), (tools, ids) => {
        const payload = ids.length === 1 ? { jsonrpc: '2.0', id: ids[0], result: { tools } } : ids.map((id) => ({ jsonrpc: '2.0', id, result: { tools } }));
        const body = JSON.stringify(payload);
        const byText = new ToolParamRegistry();
        feed(toolsListLearner((t) => byText.learn(t), 1 << 20, askedFor(3))({ 'content-type': 'application/json' }), Buffer.from(body), 5);
        const byValue = new ToolParamRegistry();
        const reader = toolsListLearner((t) => byValue.learn(t), 1 << 20, askedFor(3))({ 'content-type': 'application/json' })!;
        reader.readValue!(payload, body);
        for (const name of ['execute_sql', 'echo', 'other']) expect(byValue.of(name)).toEqual(byText.of(name));
        expect(byValue.size).toBe(byText.size);
      }),
      { numRuns: 300 },
    );
  });

  it('the filter teaches the route the whole list, tools the caller may not see included', () => {
    const registry = new ToolParamRegistry();
    const filter = toolsListFilter({ mayCall: (name) => name === 'echo', maxBytes: 1 << 20, learn: (tools) => registry.learn(tools), asked: askedFor(3) })({ 'content-type': 'application/json' })!;
    const out = JSON.parse(Buffer.concat([filter.push(Buffer.from(answer)), filter.end()]).toString()) as { result: { tools: Array<{ name: string }> } };
    expect(out.result.tools.map((t) => t.name)).toEqual(['echo']);
    expect(registry.of('execute_sql')).toMatchObject({ params: { length: 4 } });
  });
});
