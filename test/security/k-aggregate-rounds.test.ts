/**
 * DESIGN §8.2–8.4 against the rounds of a 2026-07-28 call without a session (session-less-call.ts)
 * on an aggregated route, with a hostile session-based upstream (node:http, below) that asks the
 * client something on every tools/call and holds the POST that brings it the client's answer:
 * [K80] a client that closes its retry while the gateway is still handing its answers to the
 * upstream has left: the call is cancelled at the upstream (notifications/cancelled), not left
 * running there, unattended, until the upstream's timeout.
 * Fails when the retry's close is missed because it came before the round's listener.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, listen } from '../helpers/net.js';
import { startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { post2026 } from '../helpers/wire-2026.js';

const ROUTE = '/asking/mcp';

interface Posted {
  id?: unknown;
  method?: string;
  params?: Record<string, unknown>;
  result?: unknown;
}

/** The hostile upstream: every tools/call asks an elicitation on its answer's stream and never answers. */
async function startAskingUpstream() {
  const posted: Posted[] = [];
  const heldAnswers: ServerResponse[] = [];
  const state = { holdAnswers: false };
  const json = (res: ServerResponse, id: unknown, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify({ jsonrpc: '2.0', id, ...body }));
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST') return void res.writeHead(405).end();
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const m = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Posted;
    posted.push(m);
    if (m.method === undefined) {
      // The client's answer to our question: held while the test says so.
      if (state.holdAnswers) return void heldAnswers.push(res);
      return void res.writeHead(202).end();
    }
    if (m.id === undefined) return void res.writeHead(202).end();
    if (m.method === 'initialize') return json(res, m.id, { result: { protocolVersion: '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'asking', version: '1' } } }, { 'mcp-session-id': 'asking-session' });
    if (m.method === 'tools/list') return json(res, m.id, { result: { tools: [{ name: 'ask', inputSchema: { type: 'object' } }] } });
    if (m.method === 'tools/call') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const question = { jsonrpc: '2.0', id: `q-${posted.length}`, method: 'elicitation/create', params: { message: 'name?', requestedSchema: { type: 'object', properties: {} } } };
      return void res.write(`event: message\ndata: ${JSON.stringify(question)}\n\n`);
    }
    return json(res, m.id, { error: { code: -32601, message: 'Method not found' } });
  };
  const server = createServer((req, res) => void handle(req, res).catch(() => res.destroy()));
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    posted,
    state,
    heldAnswers: () => heldAnswers.length,
    release: () => heldAnswers.splice(0).forEach((res) => res.writeHead(202).end()),
    close: async () => {
      server.closeAllConnections();
      await closeServer(server);
    },
  };
}

let upstream: Awaited<ReturnType<typeof startAskingUpstream>>;
let stage: StdioStage;

beforeAll(async () => {
  upstream = await startAskingUpstream();
  stage = await startStdioStage({ [ROUTE]: { upstreams: { asking: { upstream: upstream.url } } } });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await upstream?.close();
});

const tokenOf = (sub: string) => stage.issuer.token({ audience: stage.gw.config.routes.find((r) => r.path === ROUTE)!.resource, sub });

describe('[K80] a session-less call whose client left during its retry', () => {
  it('[K80] a retry closed while its answers are handed to the upstream cancels the call there', async () => {
    const token = await tokenOf('alice');
    const first = await post2026(stage.url(ROUTE), 'tools/call', { name: 'asking__ask', arguments: {} }, { token, headers: { accept: 'application/json' } });
    expect(first.status).toBe(200);
    const { result } = (await first.json()) as { result: { resultType: string; inputRequests: Record<string, unknown>; requestState: string } };
    expect(result.resultType).toBe('input_required');
    const [asked] = Object.keys(result.inputRequests);
    upstream.state.holdAnswers = true;
    const left = new AbortController();
    const retry = post2026(stage.url(ROUTE), 'tools/call', { name: 'asking__ask', arguments: {}, requestState: result.requestState, inputResponses: { [asked!]: { action: 'accept', content: {} } } }, { token, signal: left.signal, headers: { accept: 'application/json' } });
    await waitFor(() => upstream.heldAnswers() === 1, 10_000, 'the answer reached the upstream');
    left.abort();
    await expect(retry).rejects.toThrow();
    // The gateway has seen the client leave before the upstream takes the answer.
    await new Promise((resolve) => setTimeout(resolve, 300));
    upstream.state.holdAnswers = false;
    upstream.release();
    await waitFor(() => upstream.posted.some((m) => m.method === 'notifications/cancelled'), 5_000, 'the call cancelled at the upstream (well before its 60 s timeout)');
  }, 30_000);
});
