// parseJsonRpcBody as the one reading of a body, and the policy step's bounded
// audit: duplicates, case and Unicode variants, batch ids, ids readers round,
// bounds on names and batches, one summary line for the rest of a big batch.
import { describe, expect, it } from 'vitest';
import { MAX_BATCH_MESSAGES, MAX_NAME_LENGTH, parseJsonRpcBody } from '../../src/policy/json-rpc.js';
import { MAX_AUDITED_LINES, MAX_AUDITED_MESSAGES } from '../../src/policy/decision-audit.js';
import { createPolicyStep } from '../../src/policy/policy-step.js';
import { GatewayError } from '../../src/errors/gateway-error.js';
import type { AuditEvent } from '../../src/observability/audit.js';
import type { AuthContext } from '../../src/auth/principal.js';
import type { RouteConfig } from '../../src/config/types.js';
import { bodyRefusal } from '../helpers/rejection.js';
import { watchLoopBlocks } from '../helpers/loop-blocks.js';

const parse = (text: string) => parseJsonRpcBody(Buffer.from(text));
const refusal = (text: string): string => bodyRefusal(text).description;
const call = (params: string, extra = '') => `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":${params}${extra}}`;

describe('parseJsonRpcBody: one reading', () => {
  it('[J47] refuses duplicate members anywhere, and variants of the members it reads', () => {
    const ambiguousBodies = [
      call('{"name":"shell","name":"echo"}'),
      call('{"name":"echo","arguments":{"a":1,"a":2}}'),
      '{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call","params":{"name":"shell"}}',
      call('{"name":"echo","Name":"shell"}'),
      call('{"name":"echo","NAME":"shell"}'),
      call('{"name":"echo","ｎａｍｅ":"shell"}'),
      '{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"shell"}}',
      '{"jsonrpc":"2.0","id":1,"method":"ping","METHOD":"tools/call","params":{"name":"shell"}}',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"paramſ":{"name":"shell"}}',
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"},"Params":{"name":"shell"}}',
      '{"jsonrpc":"2.0","id":1,"Id":2,"method":"ping"}',
      '{"jsonrpc":"2.0","JSONRPC":"1.0","id":1,"method":"ping"}',
      '{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///ok","URI":"file:///secret/x"}}',
      call('{"name":"echo","_meta":{},"_Meta":{}}'),
      // Another spelling of an MCP method, or a name a C reader cuts at NUL.
      '{"jsonrpc":"2.0","id":1,"method":"Tools/Call","params":{"name":"shell"}}',
      '{"jsonrpc":"2.0","id":1,"method":"TOOLS/CALL","params":{"name":"shell"}}',
      call('{"name":"shell\\u0000x"}'),
      call('{"name":"shell\\n"}'),
      // Lone surrogates; ids readers round or sign differently.
      call('{"name":"she\\ud800ll"}'),
      '{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}',
      '{"jsonrpc":"2.0","id":-0,"method":"ping"}',
      '{"jsonrpc":"2.0","id":1e400,"method":"ping"}',
    ];
    for (const body of ambiguousBodies) expect(refusal(body), body).toMatch(/more than one way|not JSON|visible ASCII/);
    for (const body of ['\ufeff{"jsonrpc":"2.0","id":1,"method":"ping"}', '{"jsonrpc":"2.0","id":1,"method":"ping"}\u0000', '{"jsonrpc":"2.0","id":1,"method":"ping"} {}']) {
      expect(refusal(body)).toMatch(/not JSON/);
    }
    expect(refusal('{"jsonrpc":"2.0","id":{},"method":"ping"}')).toMatch(/id is not/);
    expect(refusal('{"jsonrpc":"2.0","id":1,"method":"tools call\\t"}')).toMatch(/visible ASCII/);
  });

  it('[J47] keeps valid MCP traffic: exact members, escapes that decode to them, custom methods', () => {
    expect(parse(call('{"name":"echo","arguments":{"Name":1,"name":2},"_meta":{"progressToken":1}}')).messages[0]).toMatchObject({ params: { name: 'echo' } });
    expect(parse('{"jsonrpc":"2.0","id":1,"\\u006dethod":"tools/call","params":{"n\\u0061me":"echo"}}').messages[0]).toMatchObject({ method: 'tools/call', params: { name: 'echo' } });
    expect(parse('{"jsonrpc":"2.0","id":"é😀","method":"x-vendor/DoThing","params":[1,2]}').messages[0]).toMatchObject({ method: 'x-vendor/DoThing' });
    expect(parse('{"jsonrpc":"2.0","id":1.5,"method":"logging/setLevel","params":{"level":"info"}}').batch).toBe(false);
  });

  it('[J48] refuses a batch that repeats an id (by type and value); keeps 1 and "1" apart, and requests apart from responses', () => {
    const batch = (...messages: string[]) => `[${messages.join(',')}]`;
    const req = (id: string, method = 'ping') => `{"jsonrpc":"2.0","id":${id},"method":"${method}"}`;
    const res = (id: string) => `{"jsonrpc":"2.0","id":${id},"result":{}}`;
    for (const body of [
      batch(req('1', 'tools/list'), req('1')),
      batch(req('"a"'), req('2'), req('"a"')),
      batch(req('null'), req('null')),
      batch(req('1'), req('1.0')),
      batch(req('10'), req('1e1')),
      batch(res('3'), res('3')),
    ]) {
      expect(refusal(body), body).toMatch(/repeats an id/);
    }
    expect(parse(batch(req('1'), req('"1"'), res('1'), '{"jsonrpc":"2.0","method":"notifications/initialized"}', '{"jsonrpc":"2.0","method":"notifications/initialized"}')).messages).toHaveLength(5);
  });

  it('[J57] bounds batches and names before any rule runs', () => {
    const batch = (n: number) => `[${Array.from({ length: n }, (_, i) => `{"jsonrpc":"2.0","id":${i},"method":"ping"}`).join(',')}]`;
    expect(parse(batch(MAX_BATCH_MESSAGES)).messages).toHaveLength(MAX_BATCH_MESSAGES);
    expect(refusal(batch(MAX_BATCH_MESSAGES + 1))).toMatch(new RegExp(`batch of more than ${MAX_BATCH_MESSAGES}`));
    const name = (length: number) => 'a'.repeat(length);
    expect(parse(call(`{"name":"${name(MAX_NAME_LENGTH)}"}`)).messages).toHaveLength(1);
    for (const body of [
      call(`{"name":"${name(MAX_NAME_LENGTH + 1)}"}`),
      `{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"${name(MAX_NAME_LENGTH + 1)}"}}`,
      `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///${name(MAX_NAME_LENGTH)}"}}`,
      `{"jsonrpc":"2.0","id":1,"method":"x/${name(MAX_NAME_LENGTH)}"}`,
    ]) {
      expect(refusal(body)).toMatch(/longer than 4096/);
    }
    // A 4 MiB name is refused in well under the time ten globs took over it.
    const work = watchLoopBlocks();
    expect(refusal(call(`{"name":"${name(4 * 1024 * 1024 - 100)}"}`))).toMatch(/longer than/);
    // CPU time, which a loaded machine does not stretch as it does the wall clock.
    expect(work.stop().totalCpuMs).toBeLessThan(500);
  });
});

describe('policy step: bounded audit', () => {
  const route = {
    path: '/r/mcp',
    file: 'r.yaml',
    requiredScopes: [],
    rules: [{ match: { method: 'tools/call', tool: 'shell' }, deny: true, source: 'r.yaml:3' }],
    rateLimits: [],
    filterToolsList: false,
  } as unknown as RouteConfig;
  const auth = { issuer: 'i', subject: 'alice', clientId: 'c', scopes: [], expiresAt: 0, claims: {}, token: 't', tokenHash: 'h' } as AuthContext;
  const body = (n: number, denyAt?: number) =>
    Buffer.from(`[${Array.from({ length: n }, (_, i) => `{"jsonrpc":"2.0","id":${i},"method":"tools/call","params":{"name":"${i === denyAt ? 'shell' : 'echo'}"}}`).join(',')}]`);

  it('[J57] writes at most MAX_AUDITED_LINES lines and one summary line per batch, counting the calls it could not name', () => {
    for (const [n, denyAt] of [[1, undefined], [MAX_AUDITED_MESSAGES, undefined], [MAX_AUDITED_MESSAGES + 1, undefined], [MAX_AUDITED_LINES + 1, undefined], [100, undefined], [100, 73]] as const) {
      const lines: AuditEvent[] = [];
      const step = createPolicyStep(route, { audit: { enabled: true, record: (e) => lines.push(e) } });
      let status = 200;
      try {
        step.check({ method: 'POST', headers: {} }, body(n, denyAt), auth);
      } catch (err) {
        status = (err as GatewayError).status;
      }
      // Every message is a tools/call: each gets its line up to the bound.
      expect(lines.length).toBe(Math.min(n, MAX_AUDITED_LINES) + (n > MAX_AUDITED_LINES ? 1 : 0));
      if (n > MAX_AUDITED_LINES) {
        expect(lines.at(-1)).toMatchObject({ reason: 'batch_rest', messages: n - MAX_AUDITED_LINES, calls: n - MAX_AUDITED_LINES, refused: denyAt === undefined ? 0 : 1 });
        if (denyAt !== undefined) expect(lines.at(-1)).toMatchObject({ decision: 'deny', rule: 'r.yaml:3', status: 403 });
      }
      expect(status).toBe(denyAt === undefined ? 200 : 403);
    }
  });

  it('[J57] a refused body writes one line', () => {
    const lines: AuditEvent[] = [];
    const step = createPolicyStep(route, { audit: { enabled: true, record: (e) => lines.push(e) } });
    expect(() => step.check({ method: 'POST', headers: {} }, body(MAX_BATCH_MESSAGES + 1), auth)).toThrow(GatewayError);
    expect(lines).toEqual([expect.objectContaining({ decision: 'deny', reason: 'malformed', status: 400 })]);
  });
});
