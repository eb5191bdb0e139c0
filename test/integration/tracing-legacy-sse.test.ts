/**
 * Traces through a legacy HTTP+SSE upstream (issue 15 item 2): the exchange — the POST to the
 * endpoint and the wait for its answer on the upstream's stream — is a client span of the
 * request's, and the upstream learns that span as parent twice: the W3C `traceparent` header on
 * the POST, and `params._meta.traceparent` of each request and notification in it (where the
 * stdio transport puts it too), replacing one the client wrote. With tracing off the upstream
 * gets the client's bytes unchanged. The upstream is the scripted legacy server, which records
 * every request and leaves `hang` unanswered; the spans go to the real OTLP receiver.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startLegacySseServer, type LegacySseServer } from '../helpers/legacy-sse-server.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';

const SERVER = 2;
const CLIENT = 3;
const ERROR = 2;
const INITIALIZE = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } };

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

let issuer: TestIssuer;
let upstream: LegacySseServer;
let receiver: OtlpReceiver;
let traced: TestGateway;
let untraced: TestGateway;
let token: string;

beforeAll(async () => {
  [issuer, upstream, receiver] = await Promise.all([startTestIssuer('RS256'), startLegacySseServer(), startOtlpReceiver()]);
  const route = jwtRoute('/legacy/mcp', '', issuer, { upstream: { sse: upstream.url }, limits: { upstream_timeout: '1s' } });
  [traced, untraced] = await Promise.all([
    startTestGateway({ 'gateway.yaml': gatewayYaml({ telemetry: { traces: { otlp_endpoint: receiver.url } } }), 'legacy.yaml': route }),
    startTestGateway({ 'gateway.yaml': gatewayYaml(), 'legacy.yaml': route }),
  ]);
  token = await issuer.mint({ aud: resourceOf('/legacy/mcp'), sub: 'alice' });
}, 30_000);

afterAll(async () => {
  await Promise.allSettled([traced?.stop(), untraced?.stop()]);
  await Promise.allSettled([issuer?.close(), upstream?.close(), receiver?.close()]);
});

/** A POST to the route with a client traceparent of `traceId`; the body exactly as given. */
function post(gw: TestGateway, body: string, traceId: string, session?: string): Promise<Response> {
  return fetch(`${gw.url}/legacy/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      traceparent: `00-${traceId}-${hex(8)}-01`,
      ...(session !== undefined && { 'mcp-session-id': session }),
    },
    body,
  });
}

async function initialize(gw: TestGateway): Promise<string> {
  const res = await post(gw, JSON.stringify(INITIALIZE), hex(16));
  expect(res.status).toBe(200);
  await res.arrayBuffer();
  return res.headers.get('mcp-session-id')!;
}

/** The POSTs the upstream received whose body contains `marker`. */
const upstreamPosts = (marker: string) => upstream.requests.filter((r) => r.method === 'POST' && r.body.includes(marker));

/** The gateway's upstream span in trace `traceId`: the client span whose parent is the request's server span. */
async function upstreamSpan(traceId: string): Promise<ReceivedSpan> {
  const find = (spans: ReceivedSpan[]) => {
    const server = spans.find((s) => s.kind === SERVER && s.traceId === traceId);
    return server && spans.find((s) => s.parentSpanId === server.spanId && s.kind === CLIENT && s.attributes['mag.upstream.transport'] === 'sse');
  };
  await receiver.waitFor((spans) => find(spans) !== undefined);
  return find(receiver.spans)!;
}

const metaOf = (message: unknown) => (message as { params?: { _meta?: unknown } }).params?._meta;

describe('tracing on: the trace context in the POST header and in params._meta', () => {
  it("a request: the header and its _meta name the upstream span; a traceparent the client wrote in _meta is replaced, the rest kept", async () => {
    const session = await initialize(traced);
    const traceId = hex(16);
    const marker = `req-${hex(4)}`;
    const body = { jsonrpc: '2.0', id: marker, method: 'tools/list', params: { _meta: { traceparent: 'client-chosen', tracestate: 'k=v', progressToken: 7 } } };
    const res = await post(traced, JSON.stringify(body), traceId, session);
    expect(await res.json()).toEqual({ jsonrpc: '2.0', id: marker, result: { echo: 'tools/list' } });
    const span = await upstreamSpan(traceId);
    const parent = `00-${traceId}-${span.spanId}-01`;
    const [posted] = upstreamPosts(marker);
    expect(posted!.headers.traceparent).toBe(parent);
    expect(metaOf(JSON.parse(posted!.body))).toEqual({ progressToken: 7, traceparent: parent });
    expect(span.name).toBe('POST');
    expect(span.statusCode).not.toBe(ERROR);
  });

  it('a batch of a request and a notification: every message carries it, the batch stays an array in order', async () => {
    const session = await initialize(traced);
    const traceId = hex(16);
    const marker = `batch-${hex(4)}`;
    const batch = [
      { jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: marker, progress: 1 } },
      { jsonrpc: '2.0', id: marker, method: 'ping' },
    ];
    const res = await post(traced, JSON.stringify(batch), traceId, session);
    expect(await res.json()).toEqual([{ jsonrpc: '2.0', id: marker, result: { echo: 'ping' } }]);
    const span = await upstreamSpan(traceId);
    const parent = `00-${traceId}-${span.spanId}-01`;
    const sent = JSON.parse(upstreamPosts(marker)[0]!.body) as unknown[];
    expect(sent).toEqual([
      { ...batch[0], params: { ...batch[0]!.params, _meta: { traceparent: parent } } },
      { ...batch[1], params: { _meta: { traceparent: parent } } },
    ]);
  });

  it('a notification alone (202): its POST is the span, and carries it', async () => {
    const session = await initialize(traced);
    const traceId = hex(16);
    const marker = `note-${hex(4)}`;
    const res = await post(traced, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { data: marker } }), traceId, session);
    expect(res.status).toBe(202);
    const span = await upstreamSpan(traceId);
    const [posted] = upstreamPosts(marker);
    expect(posted!.headers.traceparent).toBe(`00-${traceId}-${span.spanId}-01`);
    expect(metaOf(JSON.parse(posted!.body))).toEqual({ traceparent: `00-${traceId}-${span.spanId}-01` });
  });

  it('a request never answered on the stream: the span lasts until the timeout and fails with gateway_timeout (its POST was accepted)', async () => {
    const session = await initialize(traced);
    const traceId = hex(16);
    const marker = `hang-${hex(4)}`;
    const res = await post(traced, JSON.stringify({ jsonrpc: '2.0', id: marker, method: 'hang' }), traceId, session);
    expect(res.status).toBe(504);
    const span = await upstreamSpan(traceId);
    expect(span.statusCode).toBe(ERROR);
    expect(span.attributes['error.type']).toBe('gateway_timeout');
    expect(upstreamPosts(marker)[0]!.headers.traceparent).toBe(`00-${traceId}-${span.spanId}-01`);
  });
  it('a client leaving before the answer: the span fails with cancelled_client', async () => {
    const session = await initialize(traced);
    const traceId = hex(16);
    const marker = `left-${hex(4)}`;
    const leave = new AbortController();
    const res = fetch(`${traced.url}/legacy/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', traceparent: `00-${traceId}-${hex(8)}-01`, 'mcp-session-id': session },
      body: JSON.stringify({ jsonrpc: '2.0', id: marker, method: 'hang' }),
      signal: leave.signal,
    });
    // Left once the upstream has the request (and nothing was answered), well inside upstream_timeout.
    const until = Date.now() + 3000;
    while (upstreamPosts(marker).length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    leave.abort();
    await expect(res).rejects.toThrow();
    const span = await upstreamSpan(traceId);
    expect(span.attributes['error.type']).toBe('cancelled_client');
  });
});

describe('tracing off', () => {
  it("the upstream gets the client's bytes unchanged: no traceparent header, no _meta added or replaced", async () => {
    const session = await initialize(untraced);
    const marker = `off-${hex(4)}`;
    const bodies = [
      `{"jsonrpc":"2.0","id":"${marker}","method":"tools/list","params":{"_meta":{"traceparent":"client-chosen"}}}`,
      `[ {"jsonrpc":"2.0","method":"notifications/message","params":{"data":"${marker}"}} ]`,
    ];
    for (const body of bodies) await (await post(untraced, body, hex(16), session)).arrayBuffer();
    const posted = upstreamPosts(marker);
    expect(posted.map((r) => r.body)).toEqual(bodies);
    for (const r of posted) expect(r.headers.traceparent).toBeUndefined();
  });
});
