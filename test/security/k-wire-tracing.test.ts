/**
 * SECURITY-CASES group K, [K82]: what the operator configured decides tracing, not the client
 * (SECURITY.md, DESIGN.md §8.3). With a ratio sampler the gateway used to sample by the trace id
 * the client chose: an id under the bound was always traced, one over it never. Now its own draw
 * decides each request (the client's trace id still continues), unless a `parentbased_*` sampler
 * says to follow the client. Client `baggage` never reaches the upstream, tracing on or off, in
 * headers or (where the gateway rewrites the message) in `params._meta`.
 * The forwarded `traceparent`'s flags tell what was decided: `01` sampled, `00` not.
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TraceHeaders } from '../../src/observability/tracing.js';
import { carryTraceContext } from '../../src/proxy/trace-meta.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startOtlpReceiver, type OtlpReceiver } from '../helpers/otlp-receiver.js';
import { gatewayYaml, jwtRoute, resourceOf, startRecordingUpstream, startTestIssuer, type RecordingUpstream, type TestIssuer } from '../helpers/security-fixtures.js';
import { FIXTURE_SERVER } from '../helpers/stdio-stage.js';

const PATH = '/traced/mcp';
const hex = (bytes: number) => randomBytes(bytes).toString('hex');
/** Trace ids a ratio-by-trace-id sampler (OpenTelemetry's TraceIdRatioBased) always, or never, samples at 0.5. */
const ALWAYS_BY_ID = `${'0'.repeat(24)}00000001`;
const NEVER_BY_ID = `ffffffff${'0'.repeat(24)}`;
/** Requests per trace id: the chance that a fair draw gives one answer every time is 2^-29. */
const DRAWS = 30;

let issuer: TestIssuer;
let upstream: RecordingUpstream;
let receiver: OtlpReceiver;
let ratio: TestGateway;
let parentBased: TestGateway;
let untraced: TestGateway;

const STDIO = '/stdio/mcp';
const route = () => ({
  'traced.yaml': jwtRoute(PATH, `${upstream.origin}/mcp`, issuer),
  // The fixture's `meta` tool answers with the params._meta it was called with.
  'stdio.yaml': jwtRoute(STDIO, '', issuer, { upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER, 'probe'] } } }),
});

beforeAll(async () => {
  [issuer, upstream, receiver] = await Promise.all([startTestIssuer('RS256'), startRecordingUpstream(), startOtlpReceiver()]);
  [ratio, parentBased, untraced] = await Promise.all([
    startTestGateway({ 'gateway.yaml': gatewayYaml({ telemetry: { traces: { otlp_endpoint: receiver.url, sample_ratio: 0.5 } } }), ...route() }),
    startTestGateway({ 'gateway.yaml': gatewayYaml({ telemetry: { traces: { otlp_endpoint: receiver.url } } }), ...route() }, { OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.5' }),
    startTestGateway({ 'gateway.yaml': gatewayYaml(), ...route() }),
  ]);
});

afterAll(async () => {
  await Promise.allSettled([ratio?.stop(), parentBased?.stop(), untraced?.stop()]);
  await Promise.allSettled([issuer?.close(), upstream?.close(), receiver?.close()]);
});

/** One tools/call with these headers; the upstream's copy of the request. */
async function call(gw: TestGateway, headers: Record<string, string>): Promise<{ traceparent?: string; baggage: string[]; body: string }> {
  const marker = hex(8);
  const token = await issuer.mint({ aud: resourceOf(PATH), sub: 'alice', client_id: 'alice-client', scope: 'mcp:read' });
  const res = await fetch(`${gw.url}${PATH}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json', ...headers },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { marker } } }),
  });
  expect(res.status).toBe(200);
  await res.text();
  const seen = upstream.requests.find((r) => r.body.toString('utf8').includes(marker))!;
  const values = (name: string) => seen.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);
  return { traceparent: values('traceparent')[0], baggage: values('baggage'), body: seen.body.toString('utf8') };
}

/** The sampled flag the gateway forwarded for each of `DRAWS` requests carrying this client trace id. */
async function decisions(gw: TestGateway, traceId: string, clientFlags: string): Promise<Array<'00' | '01'>> {
  const flags: Array<'00' | '01'> = [];
  for (let i = 0; i < DRAWS; i++) {
    const { traceparent } = await call(gw, { traceparent: `00-${traceId}-${hex(8)}-${clientFlags}` });
    const match = /^00-([0-9a-f]{32})-[0-9a-f]{16}-(0[01])$/.exec(traceparent ?? '');
    expect(match, traceparent).not.toBeNull();
    // The trace still continues: the client's id, the gateway's own span id.
    expect(match![1]).toBe(traceId);
    flags.push(match![2] as '00' | '01');
  }
  return flags;
}

describe('[K82] a client\'s trace id does not decide sampling', () => {
  it('[K82] sample_ratio 0.5: an id a ratio-by-id sampler always takes, and one it never takes, are each sampled sometimes and not others', async () => {
    for (const traceId of [ALWAYS_BY_ID, NEVER_BY_ID]) {
      for (const clientFlags of ['01', '00'] as const) {
        const flags = await decisions(ratio, traceId, clientFlags);
        expect(flags, `${traceId} ${clientFlags}`).toContain('01');
        expect(flags, `${traceId} ${clientFlags}`).toContain('00');
      }
    }
  });

  it('[K82] whatever trace id a client picks, it cannot make every request traced or none (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.stringMatching(/^[0-9a-f]{32}$/).filter((id) => !/^0+$/.test(id)), async (traceId) => {
        const flags = await decisions(ratio, traceId, '01');
        expect(new Set(flags).size).toBe(2);
      }),
      { numRuns: 4 },
    );
  });

  it('[K82] flags beyond the sampled bit (02, 03, 09, ff) decide nothing either: each is sampled sometimes and not others', async () => {
    for (const clientFlags of ['02', '03', '09', 'ff'] as const) {
      const flags = await decisions(ratio, hex(16), clientFlags);
      expect(new Set(flags), clientFlags).toEqual(new Set(['00', '01']));
    }
  });

  it('[K82] parentbased_traceidratio, chosen by the operator: the client\'s sampled flag is followed, whatever its id', async () => {
    for (const traceId of [ALWAYS_BY_ID, NEVER_BY_ID, hex(16)]) {
      expect(new Set(await decisions(parentBased, traceId, '01')), traceId).toEqual(new Set(['01']));
      expect(new Set(await decisions(parentBased, traceId, '00')), traceId).toEqual(new Set(['00']));
    }
  });
});

describe('[K82] client baggage is not forwarded', () => {
  const BAGGAGE = ['user.id=admin,role=root', 'tenant=other%20team;prop=1', 'x=' + 'a'.repeat(200)];

  it('[K82] the baggage header never reaches the upstream, tracing on (any sampler) or off, with or without a traceparent', async () => {
    for (const gw of [ratio, parentBased, untraced]) {
      for (const baggage of BAGGAGE) {
        for (const traced of [true, false]) {
          const seen = await call(gw, { baggage, ...(traced && { traceparent: `00-${hex(16)}-${hex(8)}-01` }) });
          expect(seen.baggage, baggage).toEqual([]);
        }
      }
    }
  });

  it('[K82] a stdio route with tracing on (either sampler, sampled or not): the child sees the gateway\'s traceparent in params._meta, never the client\'s baggage or traceparent', async () => {
    for (const gw of [ratio, parentBased]) {
      const token = await issuer.mint({ aud: resourceOf(STDIO), sub: 'alice', client_id: 'alice-client', scope: 'mcp:read' });
      const post = (body: unknown, session?: string) =>
        fetch(`${gw.url}${STDIO}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json', ...(session && { 'mcp-session-id': session }) },
          body: JSON.stringify(body),
        });
      const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'k82', version: '1' } } });
      expect(init.status).toBe(200);
      await init.text();
      const session = init.headers.get('mcp-session-id')!;
      for (const baggage of BAGGAGE) {
        for (const flags of ['00', '01']) {
          const clientParent = `00-${hex(16)}-${hex(8)}-${flags}`;
          const res = await post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'meta', arguments: {}, _meta: { baggage, traceparent: clientParent, progressToken: 7 } } }, session);
          expect(res.status).toBe(200);
          const seen = JSON.parse(((await res.json()) as { result: { content: Array<{ text: string }> } }).result.content[0]!.text) as Record<string, unknown>;
          expect(Object.hasOwn(seen, 'baggage'), baggage).toBe(false);
          expect(seen.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-0[01]$/);
          expect(seen.traceparent).not.toBe(clientParent);
          expect(seen.progressToken).toBe(7);
        }
      }
      await fetch(`${gw.url}${STDIO}`, { method: 'DELETE', headers: { authorization: `Bearer ${token}`, 'mcp-session-id': session } });
    }
  });

  it('[K82] where the gateway writes the trace context into params._meta (stdio, legacy SSE), the client\'s baggage there is removed with its traceparent', () => {
    const trace: TraceHeaders = { traceparent: `00-${hex(16)}-${hex(8)}-01` };
    fc.assert(
      fc.property(fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), fc.string()), fc.string(), (other, baggage) => {
        const message: Record<string, unknown> = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x', _meta: { ...other, baggage, traceparent: 'client' } } };
        carryTraceContext([message], trace);
        const meta = (message.params as { _meta: Record<string, unknown> })._meta;
        expect(Object.hasOwn(meta, 'baggage')).toBe(false);
        expect(meta.traceparent).toBe(trace.traceparent);
        for (const key of Object.keys(other)) if (!['baggage', 'traceparent', 'tracestate', '__proto__'].includes(key)) expect(meta[key]).toBe(other[key]);
      }),
    );
  });
});
