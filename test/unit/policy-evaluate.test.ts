import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { evaluate, evaluateOperation, type PolicyCaller } from '../../src/policy/evaluate.js';
import { parseJsonRpcBody, type JsonRpcMessage } from '../../src/policy/json-rpc.js';
import { compilePolicy, describeRule } from '../../src/policy/route-policy.js';
import type { RuleConfig } from '../../src/config/types.js';
import { bodyRefusal } from '../helpers/rejection.js';

const RULES: RuleConfig[] = [
  { match: { method: 'tools/call', tool: 'delete_*' }, requireScopes: ['mcp:write'], source: 'github.yaml:10' },
  { match: { method: 'tools/call', tool: 'shell' }, deny: true, source: 'github.yaml:11' },
  { match: { method: 'resources/read', uri: 'file:///secret/**' }, requireScopes: ['mcp:admin'], source: 'github.yaml:12' },
  { match: { method: 'prompts/get', prompt: 'admin_*' }, requireScopes: ['mcp:admin'] },
  { match: { tool: 'deploy' }, allowClients: ['ci-bot'], requireScopes: ['mcp:write'] },
  { match: { tool: 'payroll' }, allowSubjects: ['alice'] },
  { match: { method: 'tools/call', tool: 'delete_everything' }, deny: true },
  { match: { method: 'sampling/*' }, deny: true },
];

const policy = compilePolicy({ path: '/github/mcp', file: 'github.yaml', requiredScopes: ['mcp:read'], rules: RULES });

const caller = (scopes: string[], more: Partial<PolicyCaller> = {}): PolicyCaller => ({ subject: 'bob', clientId: 'cli', scopes, ...more });
const call = (name: string, id: number | undefined = 1): JsonRpcMessage => ({ jsonrpc: '2.0', ...(id !== undefined && { id }), method: 'tools/call', params: { name, arguments: {} } });
const one = (message: JsonRpcMessage, who: PolicyCaller) => evaluate(policy, { messages: [message] }, who);

describe('evaluate: one message', () => {
  it('allows what no rule matches on the route scopes alone', () => {
    const d = one(call('echo'), caller(['mcp:read']));
    expect(d).toMatchObject({ allow: true, reason: 'route', requiredScopes: ['mcp:read'] });
    expect(d.rule).toBeUndefined();
    expect(d.status).toBeUndefined();
  });

  it('refuses a missing route scope too (explain runs without authenticate)', () => {
    expect(one(call('echo'), caller([]))).toMatchObject({ allow: false, status: 403, reason: 'scope', requiredScopes: ['mcp:read'] });
  });

  it('asks for everything the operation needs: route scopes plus the rule scopes', () => {
    const d = one(call('delete_repo'), caller(['mcp:read']));
    expect(d).toMatchObject({ allow: false, status: 403, reason: 'scope', requiredScopes: ['mcp:read', 'mcp:write'] });
    expect(d.rule).toEqual({ index: 0, source: 'github.yaml:10', description: 'match { method: tools/call, tool: "delete_*" } → require_scopes [mcp:write]' });
    expect(one(call('delete_repo'), caller(['mcp:read', 'mcp:write']))).toMatchObject({ allow: true, reason: 'rule', rule: { index: 0 } });
  });

  it('first match wins', () => {
    // delete_everything matches rule 0 before the deny rule 6.
    expect(one(call('delete_everything'), caller(['mcp:read', 'mcp:write']))).toMatchObject({ allow: true, rule: { index: 0 } });
  });

  it('deny: no scope allows it', () => {
    const d = one(call('shell'), caller(['mcp:read', 'mcp:write', 'mcp:admin']));
    expect(d).toMatchObject({ allow: false, status: 403, reason: 'deny', rule: { index: 1 } });
  });

  it('globs are case-sensitive', () => {
    expect(one(call('Delete_repo'), caller(['mcp:read']))).toMatchObject({ allow: true, reason: 'route' });
    expect(one(call('SHELL'), caller(['mcp:read']))).toMatchObject({ allow: true });
  });

  it('matches resources/read by uri and prompts/get by name, each only on its own method', () => {
    const read = (uri: string): JsonRpcMessage => ({ jsonrpc: '2.0', id: 2, method: 'resources/read', params: { uri } });
    expect(one(read('file:///secret/a/b.txt'), caller(['mcp:read']))).toMatchObject({ allow: false, reason: 'scope', requiredScopes: ['mcp:read', 'mcp:admin'] });
    expect(one(read('file:///public/a.txt'), caller(['mcp:read']))).toMatchObject({ allow: true, reason: 'route' });
    const prompt = (name: string): JsonRpcMessage => ({ jsonrpc: '2.0', id: 3, method: 'prompts/get', params: { name } });
    expect(one(prompt('admin_reset'), caller(['mcp:read']))).toMatchObject({ allow: false, rule: { index: 3 } });
    // A tool named like a prompt rule is not a prompt.
    expect(one(call('admin_reset'), caller(['mcp:read']))).toMatchObject({ allow: true, reason: 'route' });
    // A `tool` pattern never matches another method's name.
    expect(one({ jsonrpc: '2.0', id: 4, method: 'prompts/get', params: { name: 'shell' } }, caller(['mcp:read']))).toMatchObject({ allow: true });
  });

  it('allow_clients and allow_subjects: not listed → denied by policy, whatever the scopes', () => {
    const all = ['mcp:read', 'mcp:write'];
    expect(one(call('deploy'), caller(all, { clientId: 'ci-bot' }))).toMatchObject({ allow: true, rule: { index: 4 } });
    expect(one(call('deploy'), caller(all, { clientId: 'laptop' }))).toMatchObject({ allow: false, reason: 'client' });
    // Listed client, missing scope: a scope refusal (step-up helps).
    expect(one(call('deploy'), caller(['mcp:read'], { clientId: 'ci-bot' }))).toMatchObject({ allow: false, reason: 'scope', requiredScopes: ['mcp:read', 'mcp:write'] });
    expect(one(call('payroll'), caller(all, { subject: 'alice' }))).toMatchObject({ allow: true });
    expect(one(call('payroll'), caller(all, { subject: 'mallory' }))).toMatchObject({ allow: false, reason: 'subject' });
  });

  it('method globs: * stays within a segment', () => {
    expect(one({ jsonrpc: '2.0', id: 9, method: 'sampling/createMessage' }, caller(['mcp:read']))).toMatchObject({ allow: false, reason: 'deny' });
    expect(one({ jsonrpc: '2.0', id: 9, method: 'sampling/a/b' }, caller(['mcp:read']))).toMatchObject({ allow: true });
  });

  it('passes responses; judges a request without id (some servers run it)', () => {
    expect(one({ jsonrpc: '2.0', id: 5, result: {} }, caller(['mcp:read']))).toMatchObject({ allow: true, reason: 'response' });
    expect(one(call('shell', undefined), caller(['mcp:read']))).toMatchObject({ allow: false, reason: 'deny' });
  });
});

describe('evaluate: batches', () => {
  it('allows a batch only when every message is allowed', () => {
    const d = evaluate(policy, { messages: [call('echo', 1), call('get-sum', 2)] }, caller(['mcp:read']));
    expect(d.allow).toBe(true);
    expect(d.messages).toHaveLength(2);
  });

  it('one refused message refuses the batch, asking for the union of what it needs', () => {
    const read = { jsonrpc: '2.0', id: 3, method: 'resources/read', params: { uri: 'file:///secret/x' } };
    const d = evaluate(policy, { messages: [call('echo', 1), call('delete_repo', 2), read] }, caller(['mcp:read']));
    expect(d).toMatchObject({ allow: false, status: 403, reason: 'scope', rule: { index: 0 } });
    expect(d.requiredScopes.sort()).toEqual(['mcp:admin', 'mcp:read', 'mcp:write']);
    expect(d.messages.map((m) => m.allow)).toEqual([true, false, false]);
  });

  it('a refusal no scope lifts wins over a missing scope', () => {
    const d = evaluate(policy, { messages: [call('delete_repo', 1), call('shell', 2)] }, caller(['mcp:read']));
    expect(d).toMatchObject({ allow: false, reason: 'deny', rule: { index: 1 } });
  });

  it('a batch of responses passes', () => {
    expect(evaluate(policy, { messages: [{ jsonrpc: '2.0', id: 1, result: {} }, { jsonrpc: '2.0', id: 2, error: { code: 1, message: 'x' } }] }, caller(['mcp:read'])).allow).toBe(true);
  });
});

describe('evaluateOperation', () => {
  it('decides one operation as explain and tools/list filtering ask it', () => {
    expect(evaluateOperation(policy, { method: 'tools/call', name: 'delete_repo' }, caller(['mcp:read', 'mcp:write'])).allow).toBe(true);
    expect(evaluateOperation(policy, { method: 'tools/call', name: 'shell' }, caller(['mcp:read', 'mcp:write'])).allow).toBe(false);
    expect(evaluateOperation(policy, { method: 'tools/list' }, caller(['mcp:read']))).toMatchObject({ allow: true, reason: 'route' });
  });

  it('a deny rule is never lifted by any scope set (property)', () => {
    fc.assert(
      fc.property(fc.subarray(['mcp:read', 'mcp:write', 'mcp:admin', 'x', 'shell']), fc.string(), fc.string(), (scopes, subject, clientId) => {
        expect(evaluateOperation(policy, { method: 'tools/call', name: 'shell' }, { subject, clientId, scopes }).allow).toBe(false);
      }),
    );
  });
});

describe('describeRule', () => {
  it('renders each outcome', () => {
    expect(describeRule({ match: { tool: 'x' }, allowClients: ['a', 'b'], requireScopes: ['s'] })).toBe('match { tool: x } → allow_clients [a, b], require_scopes [s]');
    expect(describeRule({ match: { method: 'tools/list' } })).toBe('match { method: tools/list } → allow');
    expect(describeRule({ match: { uri: 'file:///**' }, deny: true })).toBe('match { uri: "file:///**" } → deny');
  });
});

describe('parseJsonRpcBody', () => {
  const parse = (text: string | Buffer) => parseJsonRpcBody(typeof text === 'string' ? Buffer.from(text) : text);
  const refused = (text: string | Buffer) => {
    const err = bodyRefusal(text);
    expect(err.challenge).toBe(false);
    return err.description;
  };

  it('reads one message or a batch', () => {
    expect(parse('{"jsonrpc":"2.0","id":1,"method":"tools/list"}')).toMatchObject({ batch: false, messages: [{ method: 'tools/list' }] });
    expect(parse('[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"result":{}}]')).toMatchObject({ batch: true });
  });

  it('refuses what is not JSON-RPC', () => {
    expect(refused('')).toMatch(/empty/);
    expect(refused('not json')).toMatch(/not JSON/);
    expect(refused('[]')).toMatch(/empty batch/);
    expect(refused('42')).toMatch(/not an object/);
    expect(refused('[1]')).toMatch(/not an object/);
    expect(refused('{"method":5}')).toMatch(/method is not a string/);
    expect(refused('{"id":1,"method":"tools/call","params":{}}')).toMatch(/tools\/call without a string params.name/);
    expect(refused('{"id":1,"method":"tools/call","params":{"name":["a"]}}')).toMatch(/params.name/);
    expect(refused('{"id":1,"method":"resources/read"}')).toMatch(/params.uri/);
    // Invalid UTF-8 would decode differently on each side.
    expect(refused(Buffer.concat([Buffer.from('{"id":1,"method":"tools/call","params":{"name":"a'), Buffer.from([0xff]), Buffer.from('"}}')]))).toMatch(/UTF-8/);
  });
});

describe('subscriptions: each watched resource judged as a read of it', () => {
  const listen = (uris: unknown, more: Record<string, unknown> = {}): JsonRpcMessage => ({ jsonrpc: '2.0', id: 5, method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true, resourceSubscriptions: uris, ...more } } });
  const subscribe = (uri: string): JsonRpcMessage => ({ jsonrpc: '2.0', id: 6, method: 'resources/subscribe', params: { uri } });

  it('allows a listen whose every URI the caller may read, and one that watches no resource', () => {
    expect(one(listen(['file:///public/a.txt', 'file:///public/b.txt']), caller(['mcp:read']))).toMatchObject({ allow: true, operation: { method: 'subscriptions/listen' } });
    expect(one({ jsonrpc: '2.0', id: 1, method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true } } }, caller(['mcp:read'])).allow).toBe(true);
    expect(one(listen(['file:///secret/k']), caller(['mcp:read', 'mcp:admin'])).allow).toBe(true);
  });

  it('refuses a listen or resources/subscribe watching a resource the caller may not read, asking for its scope, named by its own method', () => {
    const refused = one(listen(['file:///public/a.txt', 'file:///secret/k']), caller(['mcp:read']));
    expect(refused).toMatchObject({ allow: false, status: 403, reason: 'scope', operation: { method: 'subscriptions/listen' }, rule: { source: 'github.yaml:12' } });
    expect(refused.requiredScopes).toEqual(expect.arrayContaining(['mcp:read', 'mcp:admin']));
    expect(one(subscribe('file:///secret/k'), caller(['mcp:read']))).toMatchObject({ allow: false, reason: 'scope', operation: { method: 'resources/subscribe' } });
    expect(one(subscribe('file:///public/a.txt'), caller(['mcp:read'])).allow).toBe(true);
    // Without a URI it watches nothing: left to the upstream, which no longer has the method (2026-07-28).
    expect(one({ jsonrpc: '2.0', id: 7, method: 'resources/subscribe', params: {} }, caller(['mcp:read'])).allow).toBe(true);
  });

  it('property: a listen is allowed exactly when a read of every URI it watches is', () => {
    const uri = fc.constantFrom('file:///public/a.txt', 'file:///secret/k', 'file:///secret/deep/x', 'test://static', 'https://example.com/r');
    const scopes = fc.subarray(['mcp:read', 'mcp:admin', 'mcp:write']);
    fc.assert(
      fc.property(fc.array(uri, { maxLength: 6 }), scopes, (uris, granted) => {
        const who = caller(granted);
        const reads = uris.every((u) => evaluateOperation(policy, { method: 'resources/read', name: u }, who).allow);
        const self = evaluateOperation(policy, { method: 'subscriptions/listen' }, who).allow;
        return one(listen(uris), who).allow === (reads && self);
      }),
    );
  });

  it('refuses (400) what cannot be judged: a URI not in canonical form, not a string, too many, an ambiguous member', () => {
    const refusedBody = (message: unknown) => bodyRefusal(JSON.stringify(message)).description;
    expect(refusedBody(listen(['file:///public/../secret/k']))).toMatch(/resourceSubscriptions entry is not a resource URI in canonical form/);
    expect(refusedBody(listen([7]))).toMatch(/not a string/);
    expect(refusedBody(listen('file:///secret/k'))).toMatch(/not an array/);
    expect(refusedBody(listen(Array.from({ length: 101 }, (_, i) => `file:///public/${i}`)))).toMatch(/more than 100 resourceSubscriptions/);
    expect(refusedBody(listen(['file:///public/a'], { ResourceSubscriptions: ['file:///secret/k'] }))).toMatch(/differs from "resourceSubscriptions"/);
    expect(refusedBody({ jsonrpc: '2.0', id: 1, method: 'subscriptions/listen', params: { notifications: ['file:///secret/k'] } })).toMatch(/notifications is not an object/);
    expect(refusedBody({ jsonrpc: '2.0', id: 1, method: 'subscriptions/listen', params: { Notifications: { resourceSubscriptions: ['file:///secret/k'] } } })).toMatch(/differs from "notifications"/);
    expect(refusedBody(subscribe('FILE:///secret/k'))).toMatch(/params.uri is not a resource URI in canonical form/);
    expect(refusedBody({ jsonrpc: '2.0', id: 1, method: 'Subscriptions/Listen', params: {} })).toMatch(/only by case/);
  });
});
