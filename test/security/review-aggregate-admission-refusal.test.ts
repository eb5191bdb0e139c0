/**
 * Adversarial review of aggregated routes (DESIGN §8.3, [K66]): a legacy SSE entry admits each
 * user's upstream sessions under its `max_sessions_per_principal`; at it, with every one of
 * them busy, the user's next is refused 503 by the gateway itself. That 503 is one user's share,
 * not the upstream's health, yet the aggregated link read it as the server's 503 at initialize
 * and marked the shared upstream down for everyone for 5 s, again at each of her initializes: one
 * user with a slow call in flight took the entry from every other user's lists and calls. Now the
 * gateway's own admission refusal is the caller's.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, listen } from '../helpers/net.js';
import { startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';

const PATH = '/all/mcp';
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'r', version: '1' } } };

/** A legacy HTTP+SSE MCP server whose tool `slow` answers after 4 s, `echo` at once. */
function legacySse() {
  const streams = new Map<string, ServerResponse>();
  const send = (res: ServerResponse, m: unknown) => res.write(`event: message\ndata: ${JSON.stringify(m)}\n\n`);
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      if (req.method === 'GET' && url.pathname === '/sse') {
        const id = randomUUID();
        res.writeHead(200, { 'content-type': 'text/event-stream' }).flushHeaders();
        streams.set(id, res);
        res.on('close', () => streams.delete(id));
        return void res.write(`event: endpoint\ndata: /message?sessionId=${id}\n\n`);
      }
      const stream = streams.get(url.searchParams.get('sessionId') ?? '');
      if (req.method !== 'POST' || stream === undefined) return void res.writeHead(404).end();
      res.writeHead(202).end();
      const m = JSON.parse(body) as { id?: number; method: string; params?: { name?: string } };
      if (m.id === undefined) return;
      if (m.method === 'initialize') return void send(stream, { jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: 'legacy', version: '1' } } });
      if (m.method === 'tools/list') return void send(stream, { jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'echo', inputSchema: { type: 'object' } }, { name: 'slow', inputSchema: { type: 'object' } }] } });
      const answer = () => send(stream, { jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: m.params?.name ?? '' }] } });
      if (m.params?.name === 'slow') setTimeout(answer, 4_000);
      else answer();
    });
  });
  return { server, streams };
}

describe("a legacy SSE entry's refusal of one user's session at her share never takes it down for everyone", () => {
  const upstream = legacySse();
  let stage: StdioStage;
  beforeAll(async () => {
    const url = `http://127.0.0.1:${await listen(upstream.server)}/sse`;
    stage = await startStdioStage({ [PATH]: { upstreams: { old: { upstream: { sse: { url, max_sessions_per_principal: 1 } } } } } });
  }, 60_000);
  afterAll(async () => {
    await stage?.close();
    for (const s of upstream.streams.values()) s.destroy();
    await closeServer(upstream.server);
  });

  async function session(sub: string) {
    const headers = { ...HEADERS, authorization: `Bearer ${await stage.token(PATH, sub)}` };
    const init = await fetch(stage.url(PATH), { method: 'POST', headers, body: JSON.stringify(INIT) });
    await init.arrayBuffer();
    const id = init.headers.get('mcp-session-id')!;
    return async (body: unknown) => (await (await fetch(stage.url(PATH), { method: 'POST', headers: { ...headers, 'mcp-session-id': id }, body: JSON.stringify(body) })).json()) as Record<string, unknown>;
  }

  it("mallory's second session while her one upstream session is busy: refused for her; bob's lists and calls are served", async () => {
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
    const echo = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'old__echo', arguments: {} } };
    const bob = await session('bob');
    expect(await bob(list)).toMatchObject({ result: { tools: [{ name: 'old__echo' }, { name: 'old__slow' }] } });
    const mallory = await session('mallory');
    const slow = mallory({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'old__slow', arguments: {} } });
    await new Promise((r) => setTimeout(r, 500));
    // Her second session: its upstream session is refused (her one is busy) at her share.
    const second = await session('mallory');
    expect(await second(list)).toMatchObject({ result: { tools: [] } });
    expect(await bob(list)).toMatchObject({ result: { tools: [{ name: 'old__echo' }, { name: 'old__slow' }] } });
    expect(await bob(echo)).toMatchObject({ result: { content: [{ text: 'echo' }] } });
    expect(await slow).toMatchObject({ result: { content: [{ text: 'slow' }] } });
  }, 30_000);
});
