/**
 * The body of a refusal no scope lifts (DESIGN §8.4): a JSON-RPC error for each message a rule
 * denied, with that message's id, in order; a single message gets one object, a batch an array.
 * Property over generated batches: ids of every JSON-RPC kind (and none), names with any
 * characters, every refusal reason; the body is always valid JSON and names the right ids.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { MessageDecision } from '../../src/policy/evaluate.js';
import type { JsonRpcMessage } from '../../src/policy/json-rpc.js';
import { DENIED_BY_POLICY_CODE, policyDenial } from '../../src/policy/policy-denial.js';

const METHODS = ['tools/call', 'resources/read', 'prompts/get', 'logging/setLevel'] as const;
const REASONS = ['route', 'rule', 'scope', 'deny', 'client', 'subject'] as const;

const member = fc.record({
  id: fc.option(fc.oneof(fc.integer(), fc.string(), fc.constant(null)), { nil: undefined }),
  method: fc.constantFrom(...METHODS),
  name: fc.string({ maxLength: 40 }),
  reason: fc.constantFrom(...REASONS),
});

describe('policyDenial: one JSON-RPC error per message a rule denied', () => {
  it('names each denied id in order, never a scope refusal or an allowed message; one object for a single message, an array for a batch', () => {
    fc.assert(
      fc.property(fc.array(member, { minLength: 1, maxLength: 8 }), fc.boolean(), (members, batchFlag) => {
        const batch = batchFlag || members.length > 1;
        const messages: JsonRpcMessage[] = members.map((m) => ({ jsonrpc: '2.0', ...(m.id !== undefined && { id: m.id }), method: m.method, params: { name: m.name } }));
        const decisions: MessageDecision[] = members.map((m) => ({
          allow: m.reason === 'route' || m.reason === 'rule',
          reason: m.reason,
          operation: { method: m.method, name: m.method === 'logging/setLevel' ? undefined : m.name },
          requiredScopes: [],
        }));
        const denied = members.filter((m) => !['route', 'rule', 'scope'].includes(m.reason));
        // The policy step asks for this body only when a rule denied at least one message.
        fc.pre(denied.length > 0);
        const err = policyDenial(messages, decisions, batch);
        expect(err.status).toBe(403);
        expect(err.challenge).toBe(false);
        const parsed = JSON.parse(err.body()) as unknown;
        const errors = (batch ? parsed : [parsed]) as Array<{ jsonrpc: string; id: unknown; error: { code: number; message: string; data: unknown } }>;
        if (!batch) expect(Array.isArray(parsed)).toBe(false);
        expect(errors.map((e) => e.id)).toEqual(denied.map((m) => m.id ?? null));
        for (const [i, e] of errors.entries()) {
          expect(e.jsonrpc).toBe('2.0');
          expect(e.error.code).toBe(DENIED_BY_POLICY_CODE);
          expect(e.error.data).toEqual({ error: 'access_denied' });
          expect(e.error.message.startsWith('denied by policy: ')).toBe(true);
          const m = denied[i]!;
          if (m.method !== 'logging/setLevel') expect(e.error.message).toContain(`'${m.name}'`);
          expect(e.error.message).toMatch(m.reason === 'deny' ? /no scope would allow it$/ : m.reason === 'client' ? /for this client$/ : /for this user$/);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('a single denied tool call: the exact body', () => {
    const err = policyDenial([{ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'shell' } }], [{ allow: false, reason: 'deny', operation: { method: 'tools/call', name: 'shell' }, requiredScopes: [] }], false);
    expect(JSON.parse(err.body())).toEqual({ jsonrpc: '2.0', id: 7, error: { code: -32003, message: "denied by policy: the tool 'shell' is not allowed and no scope would allow it", data: { error: 'access_denied' } } });
  });

  it('a subscription refused for a resource it watches names that, not its method', () => {
    for (const message of [
      { jsonrpc: '2.0', id: 'l1', method: 'subscriptions/listen', params: { notifications: { resourceSubscriptions: ['file:///public/a', 'file:///secret/b'] } } },
      { jsonrpc: '2.0', id: 'l1', method: 'resources/subscribe', params: { uri: 'file:///secret/b' } },
    ]) {
      const err = policyDenial([message], [{ allow: false, reason: 'deny', operation: { method: message.method }, requiredScopes: [] }], false);
      expect(JSON.parse(err.body())).toMatchObject({ id: 'l1', error: { code: -32003, message: 'denied by policy: a resource this subscription watches is not allowed and no scope would allow it' } });
    }
  });
});
