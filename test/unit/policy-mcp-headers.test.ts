import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { HEADER_MISMATCH, HeaderMismatchError, checkMcpHeaders, decodeHeaderValue, refuseMcpHeadersWithoutBody } from '../../src/policy/mcp-headers.js';
import { parseJsonRpcBody } from '../../src/policy/json-rpc.js';
import { thrownBy } from '../helpers/rejection.js';

const body = (value: unknown) => parseJsonRpcBody(Buffer.from(JSON.stringify(value)));
const toolCall = (name: string, id: unknown = 7) => body({ jsonrpc: '2.0', id, method: 'tools/call', params: { name } });
const b64 = (s: string) => `=?base64?${Buffer.from(s, 'utf8').toString('base64')}?=`;

const mismatch = (headers: Record<string, string | undefined>, request: ReturnType<typeof body>) => thrownBy(() => checkMcpHeaders(headers, request), HeaderMismatchError);

describe('checkMcpHeaders', () => {
  it('accepts absent headers and headers that equal the body', () => {
    expect(() => checkMcpHeaders({}, toolCall('echo'))).not.toThrow();
    expect(() => checkMcpHeaders({ 'mcp-method': 'tools/call', 'mcp-name': 'echo' }, toolCall('echo'))).not.toThrow();
    expect(() => checkMcpHeaders({ 'mcp-method': 'tools/list' }, body({ jsonrpc: '2.0', id: 1, method: 'tools/list' }))).not.toThrow();
    const read = body({ jsonrpc: '2.0', id: 1, method: 'resources/read', params: { uri: 'file:///a%20b' } });
    expect(() => checkMcpHeaders({ 'mcp-method': 'resources/read', 'mcp-name': b64('file:///a%20b') }, read)).not.toThrow();
    expect(() => checkMcpHeaders({ 'mcp-name': b64('outil-été') }, toolCall('outil-été'))).not.toThrow();
  });

  it('refuses a method or name the body contradicts, with the request id', () => {
    const err = mismatch({ 'mcp-method': 'tools/list' }, toolCall('delete_repo', 'abc'));
    expect(err.status).toBe(400);
    expect(JSON.parse(err.body())).toEqual({ jsonrpc: '2.0', id: 'abc', error: { code: HEADER_MISMATCH, message: err.message } });
    expect(HEADER_MISMATCH).toBe(-32020);

    expect(mismatch({ 'mcp-method': 'tools/call', 'mcp-name': 'echo' }, toolCall('delete_repo')).id).toBe(7);
    // Case matters, as in the policy's globs.
    mismatch({ 'mcp-method': 'Tools/Call' }, toolCall('echo'));
    mismatch({ 'mcp-name': 'Echo' }, toolCall('echo'));
    // A base64 value that decodes to something else, or does not decode.
    mismatch({ 'mcp-name': b64('echo2') }, toolCall('echo'));
    mismatch({ 'mcp-name': '=?base64?@@@?=' }, toolCall('echo'));
    // Headers joined from duplicates.
    mismatch({ 'mcp-method': 'tools/call, tools/call' }, toolCall('echo'));
    // Repeated headers whose joined value equals the body: an upstream may read only one of them.
    expect(() => checkMcpHeaders({ 'mcp-name': 'shell, x' }, toolCall('shell, x'), ['Mcp-Name', 'shell', 'MCP-NAME', 'x'])).toThrow(HeaderMismatchError);
    expect(() => checkMcpHeaders({ 'mcp-name': 'shell, x' }, toolCall('shell, x'), ['Mcp-Name', 'shell, x'])).not.toThrow();
  });

  it('leaves Mcp-Name on methods the policy names nothing for to the upstream (tasks/get carries a taskId)', () => {
    expect(() => checkMcpHeaders({ 'mcp-method': 'tasks/get', 'mcp-name': 'task-1' }, body({ jsonrpc: '2.0', id: 1, method: 'tasks/get', params: { taskId: 'task-1' } }))).not.toThrow();
    expect(() => checkMcpHeaders({ 'mcp-name': 'echo' }, body({ jsonrpc: '2.0', id: 1, method: 'tools/list' }))).not.toThrow();
  });

  it('refuses routing headers on a batch, id null', () => {
    const batch = body([{ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo' } }]);
    expect(mismatch({ 'mcp-method': 'tools/call' }, batch).id).toBeNull();
  });

  it('never echoes header values in the error', () => {
    const err = mismatch({ 'mcp-method': '<script>"x"' }, toolCall('echo'));
    expect(err.body()).not.toContain('script');
  });
});

describe('checkMcpHeaders: the headers 2026-07-28 requires', () => {
  const V26 = { 'mcp-protocol-version': '2026-07-28' };
  const request = (method: string, params?: Record<string, unknown>) => body({ jsonrpc: '2.0', id: 3, method, ...(params ? { params } : {}) });

  it('refuses a request of that revision without Mcp-Method, or without Mcp-Name where the method names something (-32020, the request id)', () => {
    const noMethod = mismatch({ ...V26 }, request('tools/list'));
    expect(noMethod.message).toMatch(/Mcp-Method header is missing/);
    expect(noMethod.id).toBe(3);
    for (const [method, params] of [['tools/call', { name: 'echo' }], ['prompts/get', { name: 'p' }], ['resources/read', { uri: 'file:///a' }]] as const) {
      expect(mismatch({ ...V26, 'mcp-method': method }, request(method, params)).message, method).toMatch(/Mcp-Name header is missing/);
    }
  });

  it('accepts what that revision sends, and asks nothing of notifications, batches and older revisions', () => {
    expect(() => checkMcpHeaders({ ...V26, 'mcp-method': 'tools/list' }, request('tools/list'))).not.toThrow();
    expect(() => checkMcpHeaders({ ...V26, 'mcp-method': 'tools/call', 'mcp-name': 'echo' }, request('tools/call', { name: 'echo' }))).not.toThrow();
    expect(() => checkMcpHeaders({ ...V26 }, body({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }))).not.toThrow();
    expect(() => checkMcpHeaders({ ...V26 }, body([{ jsonrpc: '2.0', id: 1, method: 'tools/list' }]))).not.toThrow();
    for (const revision of ['2025-11-25', '2025-06-18', 'draft', undefined]) {
      expect(() => checkMcpHeaders({ 'mcp-protocol-version': revision }, request('tools/call', { name: 'echo' })), String(revision)).not.toThrow();
    }
  });

  it('property: a single request is refused exactly when its revision is 2026-07-28 or later and a header it requires is absent', () => {
    const methods = fc.constantFrom(['tools/list', undefined], ['tools/call', 'name'], ['prompts/get', 'name'], ['resources/read', 'uri'], ['server/discover', undefined], ['subscriptions/listen', undefined]);
    const revisions = fc.constantFrom('2025-06-18', '2025-11-25', '2026-07-28', '2027-01-01', 'latest', undefined);
    fc.assert(
      fc.property(methods, revisions, fc.boolean(), fc.boolean(), ([method, member], revision, sendMethod, sendName) => {
        const value = member === 'uri' ? 'file:///a' : 'x';
        const headers: Record<string, string | undefined> = { 'mcp-protocol-version': revision };
        if (sendMethod) headers['mcp-method'] = method;
        if (sendName && member) headers['mcp-name'] = value;
        const required = revision !== undefined && /^\d{4}-/.test(revision) && revision >= '2026-07-28';
        const missing = !sendMethod || (member !== undefined && !sendName);
        let refused = false;
        try {
          checkMcpHeaders(headers, request(method, member ? { [member]: value } : undefined));
        } catch (err) {
          if (!(err instanceof HeaderMismatchError)) throw err;
          refused = true;
        }
        return refused === (required && missing);
      }),
    );
  });
});

describe('decodeHeaderValue', () => {
  it('decodes the base64 form and passes plain values', () => {
    expect(decodeHeaderValue('echo')).toBe('echo');
    expect(decodeHeaderValue(b64('Hello, 世界'))).toBe('Hello, 世界');
    expect(decodeHeaderValue('=?base64?aGk=?=')).toBe('hi');
    expect(decodeHeaderValue('=?base64?aGk?=')).toBeUndefined();
    expect(decodeHeaderValue('=?base64?//79?=')).toBeUndefined(); // not UTF-8
  });

  it('refuses plain values that are not visible ASCII: Node reads the bytes as latin1, an upstream may read UTF-8', () => {
    for (const raw of ['caf\xe9', 'caf\xc3\xa9', 'she\tll', 'shell\x7f', 'shell\x00', 'shell\x85', ' shell', 'shell ']) {
      expect(decodeHeaderValue(raw), JSON.stringify(raw)).toBeUndefined();
    }
    expect(decodeHeaderValue('my tool: v2')).toBe('my tool: v2');
    expect(decodeHeaderValue('')).toBe('');
  });

  it('takes a value opening with =? and holding a ?= only in the exact lower-case, canonical base64 form of UTF-8', () => {
    for (const raw of ['=?BASE64?aGk=?=', '=?Base64?aGk=?=', '=?b?aGk=?=', '=?utf-8?b?aGk=?=', '=?base64?aGk=?=x', '=?base64?aGl=?=', '=?base64?aGk==?=', '=?base64?aG k=?=', '=?base64?Pz8_?=', '=?base64?wK8=?=', '=?base64?7aCA?=', '=??=']) {
      expect(decodeHeaderValue(raw), raw).toBeUndefined();
    }
    expect(decodeHeaderValue('=?base64?Pz8/?=')).toBe('???');
    expect(decodeHeaderValue('=?base64??=')).toBe('');
    // A byte-order mark is part of the name, not dropped as TextDecoder would by default.
    expect(decodeHeaderValue(b64('\ufeffhi'))).toBe('\ufeffhi');
  });

  it('takes a value opening with =? but holding no ?= after it as the literal it is (the sentinel needs both markers; no decoder reads an encoded word without ?=)', () => {
    for (const raw of ['=?x', '=?', '=?base64?aGk=', '=?base64?SGVsbG8=', '=?base64?', '=?=']) expect(decodeHeaderValue(raw), raw).toBe(raw);
  });

  it('property: a visible-ASCII value opening with =? is literal exactly when no ?= follows the opening, else decoded only in the exact base64 form', () => {
    const visible = fc.string({ unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)), maxLength: 24 });
    fc.assert(
      fc.property(visible, (rest) => {
        const raw = `=?${rest}`;
        const decoded = decodeHeaderValue(raw);
        if (!rest.includes('?=')) return decoded === raw;
        const canonical = /^base64\?([A-Za-z0-9+/]*={0,2})\?=$/.exec(rest);
        if (decoded !== undefined) expect(canonical, raw).not.toBeNull();
        return decoded === undefined || b64(decoded) === raw;
      }),
    );
  });
});

describe('routing headers on GET and DELETE', () => {
  it('refuses Mcp-Method or Mcp-Name, whatever their value, with id null', () => {
    for (const headers of [{ 'mcp-method': 'tools/call' }, { 'mcp-name': 'shell' }, { 'mcp-method': '' }, { 'mcp-method': 'tools/call', 'mcp-name': 'x' }]) {
      expect(thrownBy(() => refuseMcpHeadersWithoutBody(headers), HeaderMismatchError).id).toBeNull();
    }
    expect(() => refuseMcpHeadersWithoutBody({ 'mcp-session-id': 's', 'mcp-protocol-version': '2025-06-18' })).not.toThrow();
  });
});

describe('Mcp-Param-* headers (x-mcp-header tool arguments)', () => {
  const call = toolCall('execute_sql');
  const raw = (...pairs: string[]) => pairs;
  const asObject = (pairs: readonly string[]) => {
    const out: Record<string, string> = {};
    for (let i = 0; i < pairs.length; i += 2) {
      const name = pairs[i]!.toLowerCase();
      out[name] = name in out ? `${out[name]}, ${pairs[i + 1]}` : pairs[i + 1]!;
    }
    return out;
  };
  const check = (pairs: string[]) => checkMcpHeaders(asObject(pairs), call, pairs);

  it('accepts plain and base64 values, with or without Mcp-Method and Mcp-Name, the spec\'s examples included', () => {
    expect(() => check(raw('Mcp-Method', 'tools/call', 'Mcp-Name', 'execute_sql', 'Mcp-Param-Region', 'us-west1'))).not.toThrow();
    expect(() => check(raw('Mcp-Param-Region', 'us-west1'))).not.toThrow();
    for (const value of ['=?base64?SGVsbG8sIOS4lueVjA==?=', '=?base64?IHBhZGRlZCA=?=', '=?base64?bGluZTEKbGluZTI=?=', '=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=', 'Seattle, WA', '42', 'true']) {
      expect(() => check(raw('Mcp-Param-Text', value)), value).not.toThrow();
    }
  });

  it('refuses a value that is neither visible ASCII nor the exact base64 form, with -32020 and the request id', () => {
    for (const value of [' padded', 'caf\xe9', 'line1\nline2'.replace('\n', '\t'), '=?BASE64?aGk=?=', '=?base64?aGk?=', '=?base64?//79?=']) {
      const err = thrownBy(() => check(raw('Mcp-Param-Text', value)), HeaderMismatchError);
      expect(err.id).toBe(7);
      expect(err.body()).not.toContain(value);
    }
  });

  it('refuses a repeated Mcp-Param header, whatever the spelling of its name: an upstream may read either value', () => {
    thrownBy(() => check(raw('Mcp-Param-Region', 'us-west1', 'MCP-PARAM-REGION', 'eu-west1')), HeaderMismatchError);
    thrownBy(() => check(raw('Mcp-Param-Region', 'us-west1', 'mcp-param-region', 'us-west1')), HeaderMismatchError);
    expect(() => check(raw('Mcp-Param-Region', 'us-west1', 'Mcp-Param-Zone', 'b'))).not.toThrow();
  });

  it('refuses a name outside letters, digits and - (it would be dropped on the way, J50) and an empty one', () => {
    for (const name of ['Mcp-Param-Region_Name', 'Mcp_Param_Region', 'Mcp-Param-Re.gion', 'Mcp-Param-']) {
      thrownBy(() => check(raw(name, 'x')), HeaderMismatchError);
    }
  });

  it('holds the headers to their form without the raw list too (Node\'s object alone)', () => {
    thrownBy(() => checkMcpHeaders({ 'mcp-param-text': ' padded' }, call), HeaderMismatchError);
    expect(() => checkMcpHeaders({ 'mcp-param-text': 'ok' }, call)).not.toThrow();
  });

  it('is refused on GET and DELETE like Mcp-Method', () => {
    thrownBy(() => refuseMcpHeadersWithoutBody({ 'mcp-param-region': 'us-west1' }), HeaderMismatchError);
  });

  it('property: any UTF-8 value in the base64 form is accepted and decodes to itself; its plain form is accepted exactly when visible ASCII without outer space', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), (value) => {
        expect(() => check(raw('Mcp-Param-V', b64(value)))).not.toThrow();
        expect(decodeHeaderValue(b64(value))).toBe(value);
        const plainOk = /^(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?$/.test(value) && !value.startsWith('=?');
        let threw = false;
        try {
          check(raw('Mcp-Param-V', value));
        } catch (err) {
          expect(err).toBeInstanceOf(HeaderMismatchError);
          threw = true;
        }
        expect(threw).toBe(!plainOk);
      }),
    );
  });
});
