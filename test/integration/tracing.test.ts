/**
 * OpenTelemetry traces end to end (DESIGN §7.3, issue 15): the real MCP SDK client sends a
 * W3C `traceparent`, the gateway (in-process, tracing on) forwards to the unmodified
 * server-everything through a recording hop, and exports OTLP/HTTP to a real receiver in this
 * test (protobuf by default, JSON when OTEL_EXPORTER_OTLP_PROTOCOL says so). Checked: the server
 * span continues the client's trace, the upstream request names the gateway's client span as
 * its parent, the spans carry route, MCP method, tool name, decision, rule, status and client
 * id, and no token, argument value or subject is anywhere in the exported bytes. Sampling ratio
 * 0 exports nothing; an unreachable collector slows nothing and is counted.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { devAuthorizationServer, gatewayYaml, originYaml } from '../helpers/gateway-config.js';
import { freePort } from '../helpers/net.js';
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../helpers/otlp-receiver.js';
import { jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { FIXTURE_SERVER, resultText } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const SERVER = 2;
const CLIENT = 3;
/** Values that must never reach a collector. */
const SUBJECT = `subject-${randomBytes(8).toString('hex')}`;
const SECRET_ARGUMENT = `argument-${randomBytes(8).toString('hex')}`;
const CLIENT_ID = 'traced-client';

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

let issuer: TestIssuer;
let everything: UpstreamHandle;
let hop: RecordingHop;
let receiver: OtlpReceiver;

beforeAll(async () => {
  [issuer, everything, receiver] = await Promise.all([startTestIssuer('RS256'), startEverythingServer(), startOtlpReceiver()]);
  hop = await startRecordingHop(everything.url);
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([issuer?.close(), hop?.close(), everything?.close(), receiver?.close()]);
});

function routeFile(path: string) {
  return jwtRoute(path, hop.url, issuer, { rules: [{ match: { tool: 'forbidden_*' }, deny: true }] });
}

async function tracedGateway(traces: Record<string, unknown> | undefined, env: NodeJS.ProcessEnv = {}): Promise<TestGateway> {
  return startTestGateway({ 'gateway.yaml': gatewayYaml(traces ? { telemetry: { traces } } : {}), 'mcp.yaml': routeFile('/mcp') }, env);
}

async function connect(gw: TestGateway, headers: Record<string, string>, path = '/mcp'): Promise<Client> {
  const token = await issuer.mint({ aud: resourceOf(path), sub: SUBJECT, client_id: CLIENT_ID, scope: 'mcp:read mcp:write' });
  const transport = new StreamableHTTPClientTransport(new URL(`${gw.url}${path}`), {
    requestInit: { headers: { authorization: `Bearer ${token}`, ...headers } },
  });
  const client = new Client({ name: 'tracing-test', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

/** What the upstream received for a tools/call of `tool`: its traceparent. */
function upstreamTraceparents(tool: string): string[] {
  return hop.requests
    .filter((r) => r.body.toString('utf8').includes(`"name":"${tool}"`))
    .flatMap((r) => r.headers.filter(([n]) => n.toLowerCase() === 'traceparent').map(([, v]) => v));
}

const serverSpanOf = (spans: ReceivedSpan[], traceId: string, tool: string) =>
  spans.find((s) => s.kind === SERVER && s.traceId === traceId && s.attributes['gen_ai.tool.name'] === tool);

describe('traces over OTLP/HTTP protobuf', () => {
  let gw: TestGateway;
  const traceId = hex(16);
  const clientParent = hex(8);

  beforeAll(async () => {
    gw = await tracedGateway({ otlp_endpoint: receiver.url, sample_ratio: 1 });
  });
  afterAll(() => gw?.stop());

  it('continues the client trace: client → gateway server span → upstream client span → the upstream request', async () => {
    const client = await connect(gw, { traceparent: `00-${traceId}-${clientParent}-01`, tracestate: 'vendor=opaque' });
    const result = await client.callTool({ name: 'echo', arguments: { message: SECRET_ARGUMENT } });
    expect(JSON.stringify(result.content)).toContain(SECRET_ARGUMENT);
    await client.close();
    await receiver.waitFor((spans) => serverSpanOf(spans, traceId, 'echo') !== undefined && spans.some((s) => s.kind === CLIENT && s.traceId === traceId));

    const server = serverSpanOf(receiver.spans, traceId, 'echo')!;
    expect(server.parentSpanId).toBe(clientParent);
    expect(server.name).toBe('POST /mcp');
    expect(server.traceState).toBe('vendor=opaque');
    expect(server.attributes).toMatchObject({
      'http.route': '/mcp',
      'http.request.method': 'POST',
      'http.response.status_code': 200,
      'mcp.method.name': 'tools/call',
      'gen_ai.tool.name': 'echo',
      'mag.client_id': CLIENT_ID,
      'mag.policy.decision': 'allow',
    });
    expect(server.resource['service.name']).toBe('mcp-auth-gateway');

    const upstream = receiver.spans.find((s) => s.kind === CLIENT && s.parentSpanId === server.spanId)!;
    expect(upstream).toMatchObject({ name: 'POST', traceId });
    expect(upstream.attributes['http.response.status_code']).toBe(200);
    // The upstream saw the gateway's client span as parent, not the client's span: replaced, not passed.
    expect(upstreamTraceparents('echo')).toEqual([`00-${traceId}-${upstream.spanId}-01`]);
    expect(hop.headerValues('tracestate')).toContain('vendor=opaque');
  });

  it('a token verification miss is a child span; store calls of the session binding are children too', async () => {
    // Children end before their parents, so a parent may come in the next batch.
    const inTrace = () => receiver.spans.filter((s) => s.traceId === traceId);
    await receiver.waitFor(() => {
      const ids = new Set(inTrace().map((s) => s.spanId));
      return inTrace().every((s) => s.kind === SERVER || ids.has(s.parentSpanId));
    });
    const spans = inTrace();
    const ids = new Set(spans.map((s) => s.spanId));
    const verify = spans.filter((s) => s.name === 'verify token');
    // One miss (the first request); the later requests of the connection hit the cache: no span.
    expect(verify).toHaveLength(1);
    expect(ids.has(verify[0]!.parentSpanId)).toBe(true);
    expect(verify[0]!.attributes['mag.token.kind']).toBe('jwt');
    const store = spans.filter((s) => s.name.startsWith('store '));
    expect(store.map((s) => s.name)).toEqual(expect.arrayContaining(['store get']));
    for (const span of store) {
      expect(ids.has(span.parentSpanId)).toBe(true);
      expect(span.attributes['db.system.name']).toBe('memory');
    }
  });

  it('a refused call: decision deny with the rule, 403, and no upstream span', async () => {
    const denyTrace = hex(16);
    const client = await connect(gw, { traceparent: `00-${denyTrace}-${hex(8)}-01` });
    await expect(client.callTool({ name: 'forbidden_drop', arguments: { message: SECRET_ARGUMENT } })).rejects.toThrow();
    await client.close();
    await receiver.waitFor((spans) => serverSpanOf(spans, denyTrace, 'forbidden_drop') !== undefined);
    const server = serverSpanOf(receiver.spans, denyTrace, 'forbidden_drop')!;
    expect(server.attributes).toMatchObject({ 'mag.policy.decision': 'deny', 'http.response.status_code': 403, 'error.type': 'access_denied' });
    expect(String(server.attributes['mag.policy.rule'])).toMatch(/mcp\.yaml:\d+/);
    expect(server.statusCode).toBe(0);
    expect(receiver.spans.filter((s) => s.parentSpanId === server.spanId && s.kind === CLIENT)).toEqual([]);
    expect(upstreamTraceparents('forbidden_drop')).toEqual([]);
  });

  it('no token, argument value or subject anywhere in the exported bytes', () => {
    const exported = receiver.everything();
    expect(exported.length).toBeGreaterThan(0);
    expect(receiver.exports.every((e) => e.contentType === 'application/x-protobuf')).toBe(true);
    for (const secret of [SECRET_ARGUMENT, SUBJECT, 'Bearer', 'eyJ']) expect(exported).not.toContain(secret);
  });

  it('a 401 is traced too (no client id: nobody was authenticated)', async () => {
    const lost = hex(16);
    const res = await fetch(`${gw.url}/mcp`, { method: 'POST', headers: { traceparent: `00-${lost}-${hex(8)}-01`, 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(401);
    await receiver.waitFor((spans) => spans.some((s) => s.traceId === lost));
    const span = receiver.spans.find((s) => s.traceId === lost)!;
    expect(span.attributes).toMatchObject({ 'http.response.status_code': 401, 'error.type': 'unauthorized' });
    expect(span.attributes['mag.client_id']).toBeUndefined();
  });
});

describe('OTEL_* environment variables', () => {
  it('OTEL_EXPORTER_OTLP_PROTOCOL=http/json: the same spans as OTLP/JSON, with OTEL_SERVICE_NAME', async () => {
    const gw = await tracedGateway(undefined, {
      OTEL_EXPORTER_OTLP_ENDPOINT: `${receiver.url}/`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
      OTEL_SERVICE_NAME: 'gateway-json',
    });
    const traceId = hex(16);
    try {
      const client = await connect(gw, { traceparent: `00-${traceId}-${hex(8)}-01` });
      await client.callTool({ name: 'echo', arguments: { message: SECRET_ARGUMENT } });
      await client.close();
    } finally {
      await gw.stop();
    }
    await receiver.waitFor((spans) => serverSpanOf(spans, traceId, 'echo') !== undefined);
    const server = serverSpanOf(receiver.spans, traceId, 'echo')!;
    expect(server.resource['service.name']).toBe('gateway-json');
    expect(server.attributes['mag.client_id']).toBe(CLIENT_ID);
    const upstream = receiver.spans.find((s) => s.parentSpanId === server.spanId && s.kind === CLIENT)!;
    expect(upstreamTraceparents('echo')).toContain(`00-${traceId}-${upstream.spanId}-01`);
    expect(receiver.exports.some((e) => e.contentType === 'application/json')).toBe(true);
    for (const secret of [SECRET_ARGUMENT, SUBJECT]) expect(receiver.everything()).not.toContain(secret);
  });
});

describe('sampling and an absent collector', () => {
  it('sample_ratio 0 exports nothing; the trace id still continues upstream, unsampled, under a span id of the gateway', async () => {
    const own = await startOtlpReceiver();
    const gw = await tracedGateway({ otlp_endpoint: own.url, sample_ratio: 0 });
    const traceId = hex(16);
    const clientParent = hex(8);
    try {
      const client = await connect(gw, { traceparent: `00-${traceId}-${clientParent}-01` });
      await client.callTool({ name: 'echo', arguments: { message: 'unsampled' } });
      await client.close();
    } finally {
      await gw.stop(); // shutdown flushes: anything pending would be sent now
      await own.close();
    }
    expect(own.exports).toEqual([]);
    const sent = hop.requests.filter((r) => r.body.toString('utf8').includes('"message":"unsampled"'));
    const traceparent = sent.flatMap((r) => r.headers.filter(([n]) => n.toLowerCase() === 'traceparent').map(([, v]) => v));
    expect(traceparent).toHaveLength(1);
    expect(traceparent[0]).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
    expect(traceparent[0]).not.toContain(clientParent);
  });

  it('a collector that is not there: requests are served as fast, failed exports are counted, shutdown is bounded', async () => {
    const closedPort = await freePort();
    // The exporter retries a refused connection until its timeout: a short one keeps this test short.
    const gw = await tracedGateway({ otlp_endpoint: `http://127.0.0.1:${closedPort}` }, { OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '1500' });
    let stopped = false;
    try {
      const client = await connect(gw, {});
      const started = performance.now();
      for (let i = 0; i < 20; i++) await client.callTool({ name: 'echo', arguments: { message: `down-${i}` } });
      // A blocked export would cost a connect timeout per request; 20 calls stay well under one.
      expect(performance.now() - started).toBeLessThan(5_000);
      await client.close();
      await expect.poll(async () => /mag_trace_spans_total\{result="failed"\} [1-9]/.test(await gw.metrics.registry.metrics()), { timeout: 10_000 }).toBe(true);
      const shutdownStarted = performance.now();
      await gw.stop();
      stopped = true;
      expect(performance.now() - shutdownStarted).toBeLessThan(4_000);
    } finally {
      if (!stopped) await gw.stop();
    }
  });

  it('tracing off (no endpoint): the client traceparent reaches the upstream unchanged, nothing is exported', async () => {
    const gw = await tracedGateway(undefined);
    const traceparent = `00-${hex(16)}-${hex(8)}-01`;
    const before = receiver.exports.length;
    try {
      const client = await connect(gw, { traceparent });
      await client.callTool({ name: 'echo', arguments: { message: 'untraced' } });
      await client.close();
    } finally {
      await gw.stop();
    }
    const sent = hop.requests.filter((r) => r.body.toString('utf8').includes('"message":"untraced"'));
    expect(sent.flatMap((r) => r.headers.filter(([n]) => n.toLowerCase() === 'traceparent').map(([, v]) => v))).toEqual([traceparent]);
    expect(receiver.exports.length).toBe(before);
  });
});

describe('a stdio upstream: the trace context travels in params._meta', () => {
  it("the process learns the gateway's stdio span as parent; a traceparent the client put in _meta is replaced", async () => {
    const stdioRoute = { ...jwtRoute('/stdio', 'http://127.0.0.1:1/unused', issuer), upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER] } } };
    const gw = await startTestGateway({ 'gateway.yaml': gatewayYaml({ telemetry: { traces: { otlp_endpoint: receiver.url } } }), 'stdio.yaml': stdioRoute });
    const traceId = hex(16);
    let meta: Record<string, unknown>;
    try {
      const client = await connect(gw, { traceparent: `00-${traceId}-${hex(8)}-01` }, '/stdio');
      const result = await client.callTool({ name: 'meta', arguments: {}, _meta: { traceparent: 'client-chosen', progressToken: 7 } });
      meta = JSON.parse(resultText(result)) as Record<string, unknown>;
      await client.close();
    } finally {
      await gw.stop();
    }
    await receiver.waitFor((spans) => serverSpanOf(spans, traceId, 'meta') !== undefined);
    const server = serverSpanOf(receiver.spans, traceId, 'meta')!;
    const stdio = receiver.spans.find((s) => s.parentSpanId === server.spanId && s.name === 'stdio')!;
    expect(stdio.kind).toBe(CLIENT);
    expect(meta).toEqual({ traceparent: `00-${traceId}-${stdio.spanId}-01`, progressToken: 7 });
  });
});

describe('the built-in authorization server', () => {
  it('one server span per endpoint request, continuing the client trace; other paths make none; no secret exported', async () => {
    const gw = await startTestGateway((origin) => ({
      'gateway.yaml': originYaml(origin, { authorization_server: devAuthorizationServer(), telemetry: { traces: { otlp_endpoint: receiver.url } } }),
      'mcp.yaml': { path: '/mcp', upstream: hop.url },
    }));
    const [metadataTrace, tokenTrace, strayTrace] = [hex(16), hex(16), hex(16)];
    const secret = `client-secret-${hex(8)}`;
    try {
      const metadata = await fetch(`${gw.url}/.well-known/oauth-authorization-server`, { headers: { traceparent: `00-${metadataTrace}-${hex(8)}-01` } });
      expect(metadata.status).toBe(200);
      const token = await fetch(`${gw.url}/token`, {
        method: 'POST',
        headers: { traceparent: `00-${tokenTrace}-${hex(8)}-01`, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ grant_type: 'client_credentials', client_id: 'nobody', client_secret: secret }),
      });
      expect(token.status).toBe(401);
      expect((await fetch(`${gw.url}/nowhere-${hex(4)}`, { headers: { traceparent: `00-${strayTrace}-${hex(8)}-01` } })).status).toBe(404);
    } finally {
      await gw.stop();
    }
    await receiver.waitFor((spans) => spans.some((s) => s.traceId === metadataTrace) && spans.some((s) => s.traceId === tokenTrace && s.kind === SERVER));
    expect(receiver.spans.find((s) => s.traceId === metadataTrace)).toMatchObject({
      name: 'GET /.well-known/oauth-authorization-server',
      kind: SERVER,
      attributes: { 'http.response.status_code': 200 },
    });
    const token = receiver.spans.find((s) => s.traceId === tokenTrace && s.kind === SERVER);
    expect(token).toMatchObject({ name: 'POST /token', attributes: { 'http.response.status_code': 401 } });
    // The flood limit's count in the store is its child.
    expect(receiver.spans.filter((s) => s.parentSpanId === token!.spanId).map((s) => s.name)).toContain('store increment');
    expect(receiver.spans.filter((s) => s.traceId === strayTrace)).toEqual([]);
    expect(receiver.everything()).not.toContain(secret);
  });
});

describe('a legacy SSE upstream: the trace context goes on the POST to its endpoint', () => {
  it("the POST carrying the client's message names the gateway's span as parent", async () => {
    const sseServer = await startEverythingServer('sse');
    const sseHop = await startRecordingHop(sseServer.url);
    const sseRoute = { ...jwtRoute('/legacy', 'http://127.0.0.1:1/unused', issuer), upstream: { sse: sseHop.url } };
    const gw = await startTestGateway({ 'gateway.yaml': gatewayYaml({ telemetry: { traces: { otlp_endpoint: receiver.url } } }), 'legacy.yaml': sseRoute });
    const traceId = hex(16);
    try {
      const client = await connect(gw, { traceparent: `00-${traceId}-${hex(8)}-01` }, '/legacy');
      await client.callTool({ name: 'echo', arguments: { message: 'over sse' } });
      await client.close();
      await receiver.waitFor((spans) => {
        const server = serverSpanOf(spans, traceId, 'echo');
        return server !== undefined && spans.some((s) => s.parentSpanId === server.spanId && s.kind === CLIENT);
      });
      const server = serverSpanOf(receiver.spans, traceId, 'echo')!;
      const upstream = receiver.spans.find((s) => s.parentSpanId === server.spanId && s.kind === CLIENT)!;
      expect(upstream.attributes['mag.upstream.transport']).toBe('sse');
      const posted = sseHop.requests.filter((r) => r.method === 'POST' && r.body.toString('utf8').includes('"message":"over sse"'));
      expect(posted.flatMap((r) => r.headers.filter(([n]) => n.toLowerCase() === 'traceparent').map(([, v]) => v))).toEqual([`00-${traceId}-${upstream.spanId}-01`]);
    } finally {
      await gw.stop();
      await Promise.allSettled([sseHop.close(), sseServer.close()]);
    }
  }, 30_000);
});
