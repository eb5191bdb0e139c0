/**
 * An upstream of an aggregated route that floods the client session with requests of its own
 * (DESIGN §8.2): hand-written (no real server misbehaves so), beside an unmodified
 * server-everything. On its GET stream it sends 40 sampling requests it never lets go and 400
 * elicitation requests the client never announced, and it holds every answer POSTed to it open.
 * The gateway must neither open a POST per refused request (each is a connection and a timer held
 * for upstream_timeout: a few thousand such requests exhaust the gateway's sockets for every
 * route) nor let this upstream's unanswered requests keep server-everything from asking the
 * client anything in the same session.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_REFUSALS_IN_FLIGHT } from '../../src/proxy/aggregate/upstream-link.js';
import { readPostAnswer, type RpcMessage } from '../helpers/post-answer.js';
import { startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';

const PATH = '/flood/mcp';
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
const SAMPLING = 40;
const ELICITATIONS = 400;

interface Rpc {
  id?: unknown;
  method?: string;
  params?: Record<string, unknown>;
  result?: unknown;
  error?: unknown;
}

let everything: UpstreamHandle;
let stage: StdioStage;
let hostile: Awaited<ReturnType<typeof startFloodingUpstream>>;

async function startFloodingUpstream() {
  const held: ServerResponse[] = [];
  const seen = { answers: 0, maxHeld: 0 };
  const flood = (res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const ask = (id: string, method: string) => res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id, method, params: { messages: [], maxTokens: 1, message: 'm', requestedSchema: { type: 'object', properties: {} } } })}\n\n`);
    for (let i = 0; i < SAMPLING; i++) ask(`s${i}`, 'sampling/createMessage');
    for (let i = 0; i < ELICITATIONS; i++) ask(`e${i}`, 'elicitation/create');
  };
  const server = createServer((req, res) => {
    if (req.method === 'GET') return flood(res);
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      if (req.method !== 'POST') return void res.writeHead(200).end();
      const m = JSON.parse(body) as Rpc;
      if (m.method === undefined) {
        // An answer to one of its requests: held open, as a server that never reads them would.
        seen.answers++;
        held.push(res);
        res.on('close', () => held.splice(held.indexOf(res), 1));
        seen.maxHeld = Math.max(seen.maxHeld, held.length);
        return;
      }
      if (m.id === undefined) return void res.writeHead(202).end();
      const json = (result: unknown) => res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'h1' }).end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
      if (m.method === 'initialize') return json({ protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'flood', version: '1' } });
      json({ tools: [] });
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const close = () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, seen, close };
}

beforeAll(async () => {
  everything = await startEverythingServer();
  hostile = await startFloodingUpstream();
  stage = await startStdioStage({ [PATH]: { upstreams: { flood: { upstream: hostile.url }, b: { upstream: everything.url } } } });
}, 60_000);
afterAll(async () => {
  // The held answers first, so the gateway's close does not wait out their upstream_timeout.
  await hostile?.close();
  await stage?.close();
  await everything?.close();
});

/** A raw client session announcing sampling only, its GET stream and its calls' event streams read into `received`. */
async function session() {
  const auth = { ...HEADERS, authorization: `Bearer ${await stage.token(PATH, 'alice')}` };
  const init = await fetch(stage.url(PATH), { method: 'POST', headers: auth, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: { sampling: {} }, clientInfo: { name: 'raw', version: '1' } } }) });
  expect(init.status).toBe(200);
  const headers = { ...auth, 'mcp-session-id': init.headers.get('mcp-session-id')! };
  const post = (body: unknown) => fetch(stage.url(PATH), { method: 'POST', headers, body: JSON.stringify(body) });
  expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
  const received: Rpc[] = [];
  const abort = new AbortController();
  const stream = await fetch(stage.url(PATH), { method: 'GET', headers: { ...headers, accept: 'text/event-stream' }, signal: abort.signal });
  expect(stream.status).toBe(200);
  void (async () => {
    let text = '';
    for await (const chunk of stream.body!) {
      text += Buffer.from(chunk).toString('utf8');
      for (let cut = text.indexOf('\n\n'); cut >= 0; cut = text.indexOf('\n\n')) {
        const data = text.slice(0, cut).split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('');
        text = text.slice(cut + 2);
        if (data) received.push(JSON.parse(data) as Rpc);
      }
    }
  })().catch(() => undefined);
  const call = async (body: unknown) => (await readPostAnswer(await post(body), received as RpcMessage[])) as Rpc;
  return { post, call, received, close: () => abort.abort() };
}

describe('an upstream flooding an aggregated session with requests to the client', () => {
  let s: Awaited<ReturnType<typeof session>>;
  beforeAll(async () => {
    s = await session();
    await waitFor(() => s.received.filter((m) => m.method === 'sampling/createMessage').length >= 32, 15_000, "the flooding upstream's sampling requests");
  }, 60_000);
  afterAll(() => s?.close());

  it('its 400-odd refused requests hold at most MAX_REFUSALS_IN_FLIGHT answers open at the upstream', async () => {
    await waitFor(() => hostile.seen.answers >= MAX_REFUSALS_IN_FLIGHT, 15_000, 'refusals at the flooding upstream');
    // A round trip through both upstreams: the refusals the flood started are all under way by now.
    expect((await s.post({ jsonrpc: '2.0', id: 5, method: 'tools/list' })).status).toBe(200);
    expect(hostile.seen.maxHeld).toBeLessThanOrEqual(MAX_REFUSALS_IN_FLIGHT);
    expect(hostile.seen.answers).toBeLessThanOrEqual(MAX_REFUSALS_IN_FLIGHT);
  }, 60_000);

  it("its sampling requests left unanswered do not keep server-everything from asking the client in the same session", async () => {
    // server-everything asks with the call's answer stream: the request comes on this POST's own stream.
    const call = s.call({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'b__trigger-sampling-request', arguments: { prompt: 'from-b' } } });
    await waitFor(() => s.received.some((m) => m.method === 'sampling/createMessage' && JSON.stringify(m.params).includes('from-b')), 15_000, "server-everything's sampling request");
    const asked = s.received.find((m) => JSON.stringify(m.params ?? {}).includes('from-b'))!;
    const answered = await s.post({ jsonrpc: '2.0', id: asked.id, result: { model: 'm', role: 'assistant', content: { type: 'text', text: 'sampled' } } });
    expect(answered.status).toBe(202);
    const result = await call;
    expect(result.error).toBeUndefined();
    expect(JSON.stringify(result.result)).toContain('sampled');
  }, 60_000);
});
