/**
 * A 2026-07-28 request without a session on an aggregated route (src/proxy/aggregate/session-less-request.ts):
 * which `_meta` it is refused for (a corpus: -32602 without the revision or the client's
 * capabilities, -32022 for another revision, naming those served), and its answer as that revision
 * reads it, over the class of every result an upstream may give: nothing of the upstream's is
 * changed or dropped, `resultType` is added only when absent, and the caching hints only to a
 * cacheable, complete result that lacks them (private, 0).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { modernAnswer, sessionLessFault } from '../../src/proxy/aggregate/session-less-request.js';

const SERVED = ['2026-07-28', '2025-11-25'];
const REVISION = 'io.modelcontextprotocol/protocolVersion';
const CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
const CACHEABLE = ['tools/list', 'prompts/list', 'resources/list', 'resources/templates/list', 'resources/read'];

describe('a session-less request of an aggregated route', () => {
  it.each([
    ['no params', undefined, -32602],
    ['no _meta', {}, -32602],
    ['_meta not an object', { _meta: 'x' }, -32602],
    ['no revision', { _meta: { [CAPABILITIES]: {} } }, -32602],
    ['no capabilities', { _meta: { [REVISION]: '2026-07-28' } }, -32602],
    ['capabilities not an object', { _meta: { [REVISION]: '2026-07-28', [CAPABILITIES]: [] } }, -32602],
    ['a session-based revision', { _meta: { [REVISION]: '2025-11-25', [CAPABILITIES]: {} } }, -32022],
    ['an unknown revision', { _meta: { [REVISION]: 'v9', [CAPABILITIES]: {} } }, -32022],
    ['2026-07-28', { _meta: { [REVISION]: '2026-07-28', [CAPABILITIES]: {} } }, undefined],
  ])('%s: %s', (_what, params, code) => {
    const fault = sessionLessFault('tools/list', params, SERVED);
    expect(fault?.code).toBe(code);
    if (code === -32022) expect(fault?.data).toEqual({ supported: SERVED, requested: (params as { _meta: Record<string, unknown> })._meta[REVISION] });
  });

  it('answers as 2026-07-28 reads it, keeping everything the upstream said', () => {
    const result = fc.dictionary(fc.constantFrom('resultType', 'cacheScope', 'ttlMs', 'tools', 'contents', 'requestState', 'x'), fc.jsonValue());
    fc.assert(
      fc.property(fc.constantFrom(...CACHEABLE, 'tools/call', 'prompts/get', 'ping'), fc.option(result, { nil: undefined }), (method, given) => {
        const error = { code: -32603, message: 'no' };
        const out = modernAnswer(method, given === undefined ? { error } : { result: given });
        if (given === undefined) return void expect(out).toEqual({ error });
        const r = out.result!;
        for (const [k, v] of Object.entries(given)) expect(r[k]).toEqual(v);
        if (!('resultType' in given)) expect(r.resultType).toBe('complete');
        // Another resultType (input_required) is no result to cache.
        const complete = typeof given.resultType !== 'string' || given.resultType === 'complete';
        const extra = Object.keys(r).filter((k) => !(k in given));
        const expected = ['resultType', ...(CACHEABLE.includes(method) && complete ? ['cacheScope', 'ttlMs'] : [])].filter((k) => !(k in given));
        expect(extra.sort()).toEqual(expected.sort());
        if (extra.includes('cacheScope')) expect(r.cacheScope).toBe('private');
        if (extra.includes('ttlMs')) expect(r.ttlMs).toBe(0);
      }),
      { numRuns: 1_000 },
    );
  });
});
