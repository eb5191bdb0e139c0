/**
 * [K63] (review of issue 26): a legacy HTTP+SSE upstream sends, unasked, server messages just under
 * max_body_bytes to sessions whose clients hold no GET stream. The session held up to 100 of them:
 * 400 MiB per session with the default 4 MiB; the review's upstream did it to the four sessions
 * of each of five users and the gateway died of heap exhaustion (SIGABRT), every user with it.
 * The backlog is now bounded in bytes too (1 MiB, or max_body_bytes when lower), the oldest
 * dropped first, one warning per session. Fails while the backlog holds more than its bound.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_BACKLOG } from '../../src/proxy/sse/sse-session.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { listen } from '../helpers/net.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { waitFor } from '../helpers/wait.js';

const PATH = '/legacy/mcp';
/** What a session may hold for a client without a GET stream, in bytes (1 MiB; max_body_bytes is 4 MiB here). */
const MAX_BACKLOG_BYTES = 1024 * 1024;
const INITIALIZE = { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '0' } } };

let issuer: TestIssuer;
let upstream: Server;
let gw: TestGateway;
/** The next session's script: how many unasked messages of how many bytes, after its initialize. */
let script = { count: 0, bytes: 0 };
let pushed = 0;

beforeAll(async () => {
  issuer = await startTestIssuer('RS256');
  const streams = new Map<string, ServerResponse>();
  upstream = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (c: string) => (body += c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://upstream');
      if (req.method === 'GET' && url.pathname === '/sse') {
        const id = randomUUID();
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        streams.set(id, res);
        res.on('close', () => streams.delete(id));
        return void res.write(`event: endpoint\ndata: /message?sessionId=${id}\n\n`);
      }
      const stream = streams.get(url.searchParams.get('sessionId') ?? '');
      if (!stream) return void res.writeHead(404).end();
      res.writeHead(202).end();
      const message = JSON.parse(body) as { id?: number; method?: string };
      if (message.method !== 'initialize') return;
      stream.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: message.id, result: { protocolVersion: '2024-11-05', capabilities: {}, serverInfo: { name: 'h', version: '1' } } })}\n\n`);
      const { count, bytes } = script;
      for (let n = 0; n < count; n++) {
        stream.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', logger: String(n), data: 'x'.repeat(bytes) } })}\n\n`);
        pushed++;
      }
    });
  });
  const port = await listen(upstream);
  gw = await startTestGateway({ 'gateway.yaml': gatewayYaml({ log_level: 'info' }), 'legacy.yaml': jwtRoute(PATH, '', issuer, { upstream: { sse: `http://127.0.0.1:${port}/sse` }, limits: { upstream_timeout: '30s' } }) });
}, 30_000);

afterAll(async () => {
  upstream?.closeAllConnections();
  upstream?.close();
  await gw?.stop();
  await issuer?.close();
});

/** The server messages a GET stream opened after `count` messages of `bytes` were pushed delivers: their numbers, in order. */
async function heldFor(count: number, bytes: number): Promise<{ numbers: number[]; held: number }> {
  script = { count, bytes };
  pushed = 0;
  const token = await issuer.mint({ aud: resourceOf(PATH), sub: `user-${count}-${bytes}` });
  const headers = { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
  const init = await fetch(`${gw.url}${PATH}`, { method: 'POST', headers, body: JSON.stringify(INITIALIZE) });
  expect(init.status).toBe(200);
  await init.text();
  const session = init.headers.get('mcp-session-id')!;
  await waitFor(() => pushed === count, 10_000, 'the upstream to push its messages');
  // Read by the gateway: the upstream's stream is loopback, and the last message is small in time.
  await new Promise((r) => setTimeout(r, 500));
  const controller = new AbortController();
  const get = await fetch(`${gw.url}${PATH}`, { headers: { ...headers, 'mcp-session-id': session }, signal: controller.signal });
  expect(get.status).toBe(200);
  const reader = get.body!.getReader();
  let text = '';
  const until = Date.now() + 1_500;
  while (Date.now() < until) {
    const chunk = await Promise.race([reader.read(), new Promise<undefined>((r) => setTimeout(() => r(undefined), 300))]);
    if (chunk === undefined) break;
    if (chunk.done) break;
    text += Buffer.from(chunk.value).toString('utf8');
  }
  controller.abort();
  const messages = [...text.matchAll(/^data: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as { params: { logger: string; data: string } });
  return { numbers: messages.map((m) => Number(m.params.logger)), held: messages.reduce((sum, m) => sum + JSON.stringify(m).length, 0) };
}

describe('[K63] a legacy SSE upstream cannot make the gateway hold its messages without bound', () => {
  // Count bound, byte bound, a message over the byte bound on its own, and a mix.
  it.each([
    [150, 1_000],
    [40, 100_000],
    [20, 600_000],
    [5, 2 * 1024 * 1024],
  ])('[K63] %i unasked messages of %i bytes, no GET stream open: the newest that fit are held, within the backlog bounds', async (count, bytes) => {
    const { numbers, held } = await heldFor(count, bytes);
    expect(held).toBeLessThanOrEqual(MAX_BACKLOG_BYTES);
    expect(numbers.length).toBeLessThanOrEqual(MAX_BACKLOG);
    // The newest, in order, as many as fit.
    const fit = bytes > MAX_BACKLOG_BYTES ? 0 : Math.min(MAX_BACKLOG, count, Math.floor(MAX_BACKLOG_BYTES / (bytes + 80)));
    expect(numbers.length).toBeGreaterThanOrEqual(fit);
    expect(numbers).toEqual(Array.from({ length: numbers.length }, (_, i) => count - numbers.length + i));
  }, 30_000);

  it('[K63] dropping is said once per session, not once per message', () => {
    const lines = gw.logs.filter((l) => /no GET stream open/.test(l) && /dropped/.test(l));
    // One session per case above dropped something (the first case drops by count, the others by bytes).
    expect(lines.length).toBeLessThanOrEqual(4);
    expect(lines.length).toBeGreaterThan(0);
  });
});
