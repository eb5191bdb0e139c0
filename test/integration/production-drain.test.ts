/**
 * Graceful drain of a real gateway process (issue 5, item 4): on SIGTERM
 * /readyz is 503 at once, new connections are still served for drain_delay
 * and refused after it, in-flight POSTs finish, an open event stream ends
 * cleanly when shutdown_grace is over, and the process exits 0.
 */
import { request, type IncomingHttpHeaders } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { buildGatewayCli, jwtRouteYaml, spawnGateway, writeConfigDir, type GatewayCli, type GatewayProcess } from '../helpers/gateway-process.js';
import { startLocalIssuer, type LocalIssuer } from '../helpers/local-issuer.js';
import { startScriptedUpstream, type ScriptedUpstream } from '../helpers/scripted-upstream.js';

const DRAIN_DELAY_MS = 1_000;
const GRACE_MS = 2_000;
const PUBLIC_URL = 'http://127.0.0.1:18080';
const RESOURCE = `${PUBLIC_URL}/mcp`;

interface Answer {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One request on a connection of its own (agent: false), so "new connection" means exactly that. */
function send(url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: init.method ?? 'GET', headers: init.headers, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.once('error', reject);
    });
    req.once('error', reject);
    req.end(init.body);
  });
}

const rpc = (method: string) => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: {} });

interface Stream {
  events: Array<{ at: number }>;
  /** Resolves when the response is over: `complete` is true for a clean end of the chunked body. */
  closed: Promise<{ complete: boolean; at: number }>;
}

function openStream(url: string, token: string): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' }, agent: false }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`stream answered ${res.statusCode}`));
      const events: Stream['events'] = [];
      res.setEncoding('utf8').on('data', (chunk: string) => {
        for (let i = 0; i < chunk.split('\n\n').length - 1; i++) events.push({ at: performance.now() });
      });
      res.on('error', () => undefined);
      const closed = new Promise<{ complete: boolean; at: number }>((done) => res.once('close', () => done({ complete: res.complete, at: performance.now() })));
      resolve({ events, closed });
    });
    req.once('error', reject);
    req.end();
  });
}

async function waitFor<T>(probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

let cli: GatewayCli;
let issuer: LocalIssuer;
let upstream: ScriptedUpstream;
let configDir: string;
let token: string;
let gateway: GatewayProcess | undefined;

beforeAll(async () => {
  [cli, issuer, upstream] = await Promise.all([buildGatewayCli(), startLocalIssuer(), startScriptedUpstream({ tickMs: 100 })]);
  token = await issuer.token({ audience: RESOURCE });
  configDir = await writeConfigDir({
    'gateway.yaml': gatewayYaml({ public_url: PUBLIC_URL, log_level: 'info', drain_delay: `${DRAIN_DELAY_MS}ms`, shutdown_grace: `${GRACE_MS}ms` }),
    'mcp.yaml': jwtRouteYaml(upstream.url, issuer),
  });
});

afterEach(async () => {
  await gateway?.stop();
  gateway = undefined;
});

afterAll(async () => {
  await Promise.all([issuer?.close(), upstream?.close()]);
});

const post = (url: string, delayMs = 0) =>
  send(`${url}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'x-test-delay-ms': String(delayMs) },
    body: rpc('tools/list'),
  });

describe('SIGTERM drain of a gateway process', () => {
  it('readiness 503 at once, serves during drain_delay, refuses after it, finishes in-flight POSTs, ends streams after the grace, exits 0', async () => {
    gateway = await spawnGateway(cli, { configDir });
    const { url } = gateway;
    expect((await send(`${url}/readyz`)).status).toBe(200);

    const stream = await openStream(`${url}/mcp`, token);
    await waitFor(async () => (stream.events.length >= 2 ? true : undefined), 3_000);
    const slowPost = post(url, 1_800); // ends after the listener has closed, inside the grace
    await new Promise((r) => setTimeout(r, 150));

    const sigterm = performance.now();
    gateway.child.kill('SIGTERM');

    // Not ready at once.
    const notReadyAt = await waitFor(async () => ((await send(`${url}/readyz`)).status === 503 ? performance.now() : undefined), 1_000);
    expect(notReadyAt - sigterm).toBeLessThan(300);

    // Within the drain delay a new connection is still served, and told to close.
    const during = await post(url);
    expect(performance.now() - sigterm).toBeLessThan(DRAIN_DELAY_MS);
    expect(during.status).toBe(200);
    expect(during.headers.connection).toBe('close');

    // After it, new connections are refused.
    await new Promise((r) => setTimeout(r, sigterm + DRAIN_DELAY_MS + 200 - performance.now()));
    await expect(send(`${url}/healthz`)).rejects.toMatchObject({ code: 'ECONNREFUSED' });

    // The POST that was in flight completes normally.
    const slow = await slowPost;
    expect(slow.status).toBe(200);
    expect(JSON.parse(slow.body)).toMatchObject({ result: { method: 'tools/list', delayed: 1_800 } });

    // The stream kept flowing through the drain, then ended cleanly once the grace was over.
    const closed = await stream.closed;
    expect(closed.complete).toBe(true);
    expect(closed.at - sigterm).toBeGreaterThanOrEqual(DRAIN_DELAY_MS + GRACE_MS - 100);
    expect(stream.events.filter((e) => e.at > sigterm + DRAIN_DELAY_MS + 500).length).toBeGreaterThan(3);

    const exit = await gateway.exited;
    expect(exit).toMatchObject({ code: 0, signal: null });
    expect(exit.at - sigterm).toBeLessThan(DRAIN_DELAY_MS + GRACE_MS + 1_500);
    expect(gateway.logs.map((l) => l.msg)).toEqual(expect.arrayContaining(['shutting down', 'drained']));
  });

  it('exits right after the drain delay when nothing is in flight, without waiting for the grace', async () => {
    gateway = await spawnGateway(cli, { configDir });
    expect((await post(gateway.url)).status).toBe(200);
    const sigterm = performance.now();
    gateway.child.kill('SIGTERM');
    const exit = await gateway.exited;
    expect(exit.code).toBe(0);
    expect(exit.at - sigterm).toBeGreaterThanOrEqual(DRAIN_DELAY_MS - 50);
    expect(exit.at - sigterm).toBeLessThan(DRAIN_DELAY_MS + GRACE_MS / 2);
  });

  it('a request still unanswered when the grace is over gets 503, not a hang or an empty 200', async () => {
    gateway = await spawnGateway(cli, { configDir });
    const stuck = post(gateway.url, 10_000);
    await new Promise((r) => setTimeout(r, 100));
    const sigterm = performance.now();
    gateway.child.kill('SIGTERM');
    const answer = await stuck;
    expect(answer.status).toBe(503);
    expect(JSON.parse(answer.body)).toMatchObject({ error: 'temporarily_unavailable' });
    expect(performance.now() - sigterm).toBeGreaterThanOrEqual(DRAIN_DELAY_MS + GRACE_MS - 100);
    expect((await gateway.exited).code).toBe(0);
  });

  it('Ctrl-C (SIGINT) skips the drain delay', async () => {
    gateway = await spawnGateway(cli, { configDir });
    const sigint = performance.now();
    gateway.child.kill('SIGINT');
    const exit = await gateway.exited;
    expect(exit).toMatchObject({ code: 0 });
    expect(exit.at - sigint).toBeLessThan(DRAIN_DELAY_MS / 2);
  });
});
