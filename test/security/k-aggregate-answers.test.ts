/**
 * [H42] Answers to an upstream's requests through an aggregated route (DESIGN §8.2): a client can
 * answer only a request this session was sent, once, and the answer goes only to the upstream
 * session that asked. Two unmodified server-everything processes behind recording hops; the
 * client is raw HTTP, so it can send what an SDK would not: an id it was never sent, the
 * upstream's own id, a replay, another principal's or another session's request, a malformed
 * answer. Each is 400 (404 for another principal, as for any request on another's session) with
 * a JSON error, and the upstream sees no answer.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readPostAnswer, type RpcMessage } from '../helpers/post-answer.js';
import { startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const PATH = '/all/mcp';
const HOSTILE = '/hostile/mcp';
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
let servers: UpstreamHandle[] = [];
let hops: RecordingHop[] = [];
let stage: StdioStage;
let hostile: Awaited<ReturnType<typeof startAskingUpstream>>;

/**
 * An upstream that, on a tools/call, asks the client for what it never announced (elicitation,
 * roots) on the call's event stream, and records the answers it gets back.
 */
async function startAskingUpstream() {
  const answers: unknown[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString('utf8')));
    req.on('end', () => {
      if (req.method !== 'POST') return void res.writeHead(405).end();
      const m = JSON.parse(body) as Rpc;
      if (m.method === undefined) return (answers.push(m), void res.writeHead(202).end());
      if (m.id === undefined) return void res.writeHead(202).end();
      if (m.method === 'initialize') return void res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 's1' }).end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'asker', version: '1' } } }));
      if (m.method !== 'tools/call') return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { tools: [] } }));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      for (const [id, method] of [['e1', 'elicitation/create'], ['r1', 'roots/list']]) res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id, method, params: { message: 'm', requestedSchema: { type: 'object', properties: {} } } })}\n\n`);
      const done = setInterval(() => {
        if (answers.length < 2) return;
        clearInterval(done);
        res.end(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { content: [] } })}\n\n`);
      }, 20);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, answers, close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))) };
}

beforeAll(async () => {
  servers = await Promise.all([startEverythingServer(), startEverythingServer()]);
  hops = await Promise.all(servers.map((s) => startRecordingHop(s.url)));
  hostile = await startAskingUpstream();
  stage = await startStdioStage({
    [PATH]: { upstreams: { a: { upstream: hops[0]!.url }, b: { upstream: hops[1]!.url } } },
    [HOSTILE]: { upstreams: { hostile: { upstream: hostile.url }, b: { upstream: hops[1]!.url } } },
  });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([...hops.map((h) => h.close()), ...servers.map((s) => s.close()), hostile?.close()]);
});

interface Rpc {
  id?: unknown;
  method?: string;
  params?: Record<string, unknown>;
  result?: unknown;
}

/** A raw client session announcing sampling, with its GET stream and its calls' event streams read into `received`. */
async function session(sub = 'alice', path = PATH) {
  const token = await stage.token(path, sub);
  const auth = { ...HEADERS, authorization: `Bearer ${token}` };
  const init = await fetch(stage.url(path), { method: 'POST', headers: auth, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: { sampling: {} }, clientInfo: { name: 'raw', version: '1' } } }) });
  expect(init.status).toBe(200);
  const id = init.headers.get('mcp-session-id')!;
  const headers = { ...auth, 'mcp-session-id': id };
  const post = (body: unknown) => fetch(stage.url(path), { method: 'POST', headers, body: JSON.stringify(body) });
  expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
  const received: Rpc[] = [];
  const abort = new AbortController();
  const stream = await fetch(stage.url(path), { method: 'GET', headers: { ...headers, accept: 'text/event-stream' }, signal: abort.signal });
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
  // A call's answer stream carries what the upstream asks with it (sampling): read into `received` as it comes.
  const call = async (body: unknown) => (await readPostAnswer(await post(body), received as RpcMessage[])) as Rpc;
  return { id, headers, post, call, received, close: () => abort.abort() };
}

/** The client answers (no method) a hop saw POSTed to its server. */
const answersAt = (hop: RecordingHop) =>
  hop.requests
    .filter((r) => r.method === 'POST' && r.body.length > 0)
    .map((r) => JSON.parse(r.body.toString('utf8')) as Rpc)
    .filter((m) => m.method === undefined);

const SAMPLED = { model: 'm', role: 'assistant', content: { type: 'text', text: 'honest answer' } };

/** Starts a sampling tool call on upstream `name` and waits for its request on the client's stream. */
async function asked(s: Awaited<ReturnType<typeof session>>, name: 'a' | 'b', callId: number) {
  const call = s.call({ jsonrpc: '2.0', id: callId, method: 'tools/call', params: { name: `${name}__trigger-sampling-request`, arguments: { prompt: `p${callId}` } } });
  await waitFor(() => s.received.some((m) => m.method === 'sampling/createMessage' && JSON.stringify(m.params).includes(`p${callId}`)), 15_000, 'the sampling request');
  const request = s.received.find((m) => m.method === 'sampling/createMessage' && JSON.stringify(m.params).includes(`p${callId}`))!;
  return { call, requestId: request.id as string };
}

async function refused(res: Response, status: number): Promise<void> {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toContain('application/json');
  expect(((await res.json()) as { error?: string }).error).toBeTruthy();
}

describe('[H42] a client answers only what its session was asked, once, to the upstream that asked', () => {
  it('[H42] a made-up id, the upstream’s own id, another principal, another session, a malformed answer: refused, nothing forwarded; the honest answer once', async () => {
    const alice = await session('alice');
    const other = await session('alice');
    const bob = await session('bob');
    const { call, requestId } = await asked(alice, 'a', 7);
    expect(requestId).toMatch(/^mag-/);
    const before = hops.map((h) => answersAt(h).length);
    const answer = (id: unknown, result: unknown = SAMPLED) => ({ jsonrpc: '2.0', id, result });

    await refused(await alice.post(answer('mag-made-up')), 400);
    await refused(await alice.post(answer(0)), 400); // server-everything's own numbering
    await refused(await alice.post(answer(1)), 400);
    await refused(await other.post(answer(requestId)), 400); // the same user's other session
    await refused(await fetch(stage.url(PATH), { method: 'POST', headers: { ...bob.headers, 'mcp-session-id': alice.id }, body: JSON.stringify(answer(requestId)) }), 404);
    await refused(await alice.post(answer(requestId, 'not an object')), 400);
    await refused(await alice.post([answer(requestId), answer(requestId)]), 400); // one id twice in a batch
    await refused(await alice.post([answer(requestId), answer('mag-made-up')]), 400); // an honest answer beside a forged one
    expect(hops.map((h) => answersAt(h).length)).toEqual(before);

    expect((await alice.post(answer(requestId))).status).toBe(202);
    expect(JSON.stringify(await call)).toContain('honest answer');
    await refused(await alice.post(answer(requestId)), 400); // replayed
    // Upstream a got the one answer, under its own id; b got none.
    const atA = answersAt(hops[0]!).slice(before[0]);
    expect(atA).toHaveLength(1);
    expect(typeof atA[0]!.id).toBe('number');
    expect(answersAt(hops[1]!).length).toBe(before[1]);
    for (const s of [alice, other, bob]) s.close();
  });

  it('[H42] requests of two upstreams, answered crosswise: each answer reaches the upstream that asked it', async () => {
    const s = await session();
    const fromA = await asked(s, 'a', 11);
    const fromB = await asked(s, 'b', 12);
    expect(fromA.requestId).not.toBe(fromB.requestId);
    const text = (t: string) => ({ ...SAMPLED, content: { type: 'text', text: t } });
    expect((await s.post([{ jsonrpc: '2.0', id: fromB.requestId, result: text('for-b') }, { jsonrpc: '2.0', id: fromA.requestId, result: text('for-a') }])).status).toBe(202);
    const [ra, rb] = await Promise.all([fromA.call, fromB.call].map(async (c) => JSON.stringify(await c)));
    expect(ra).toContain('for-a');
    expect(ra).not.toContain('for-b');
    expect(rb).toContain('for-b');
    expect(rb).not.toContain('for-a');
    s.close();
  });

  it('[H42] an upstream may ask only what the client announced: an unannounced request is answered -32601 by the gateway, never sent', async () => {
    const s = await session('carol', HOSTILE);
    const call = s.call({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'hostile__ask', arguments: {} } });
    await waitFor(() => hostile.answers.length >= 2, 15_000, 'the gateway answering the hostile requests');
    // elicitation and roots were never announced by this client: answered by the gateway, not sent on.
    expect(hostile.answers).toEqual(
      expect.arrayContaining([
        { jsonrpc: '2.0', id: 'e1', error: { code: -32601, message: 'Method not found: elicitation/create' } },
        { jsonrpc: '2.0', id: 'r1', error: { code: -32601, message: 'Method not found: roots/list' } },
      ]),
    );
    expect((await call).result).toEqual({ content: [] });
    expect(s.received.filter((m) => m.id !== undefined)).toEqual([]);
    s.close();
  });
});
