/**
 * Adversarial review of aggregated routes (DESIGN §8.3, [K80]): a user's GET streams on a route
 * count in `limits.max_get_streams_per_user` (operations.md: 429 beyond, all its clients
 * together). An aggregated session's GET stream was not counted: with the share set to 1, a user
 * held one GET stream per session (16), each holding a client socket and, at an upstream of
 * 2026-07-28, an upstream listen. Now it is counted like any route's.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, listen } from '../helpers/net.js';
import { startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';

const PATH = '/all/mcp';
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'r', version: '1' } } };

/** A Streamable HTTP MCP server with a GET stream held open. */
function upstream(): Server {
  return createServer((req, res) => {
    if (req.method === 'GET') return void res.writeHead(200, { 'content-type': 'text/event-stream' }).flushHeaders();
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (req.method !== 'POST') return void res.writeHead(405).end();
      const m = JSON.parse(body) as { id?: number; method: string; params?: { protocolVersion?: string } };
      if (m.id === undefined) return void res.writeHead(202).end();
      const result = m.method === 'initialize' ? { protocolVersion: m.params?.protocolVersion, capabilities: { tools: { listChanged: true } }, serverInfo: { name: 'x', version: '1' } } : { tools: [] };
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'x-1' }).end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
    });
  });
}

describe("an aggregated session's GET stream counts in the user's share of long-lived streams", () => {
  const server = upstream();
  let stage: StdioStage;
  beforeAll(async () => {
    const url = `http://127.0.0.1:${await listen(server)}/mcp`;
    stage = await startStdioStage({ [PATH]: { upstreams: { x: { upstream: url } }, limits: { max_get_streams_per_user: 1 } } });
  }, 60_000);
  afterAll(async () => {
    await stage?.close();
    server.closeAllConnections();
    await closeServer(server);
  });

  async function session(sub: string) {
    const headers = { ...HEADERS, authorization: `Bearer ${await stage.token(PATH, sub)}` };
    const init = await fetch(stage.url(PATH), { method: 'POST', headers, body: JSON.stringify(INIT) });
    await init.arrayBuffer();
    const id = init.headers.get('mcp-session-id')!;
    return (signal: AbortSignal) => fetch(stage.url(PATH), { method: 'GET', headers: { authorization: headers.authorization, accept: 'text/event-stream', 'mcp-session-id': id }, signal });
  }

  it('[K80] share 1: her second session\'s GET is 429 while the first is open, 200 once it closed; another user is served', async () => {
    const [first, second, bob] = [await session('alice'), await session('alice'), await session('bob')];
    const held = new AbortController();
    const open = await first(held.signal);
    expect(open.status).toBe(200);
    const refused = await second(new AbortController().signal);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).not.toBeNull();
    const bobs = new AbortController();
    expect((await bob(bobs.signal)).status).toBe(200);
    held.abort();
    await expect.poll(async () => {
      const again = new AbortController();
      const r = await second(again.signal);
      again.abort();
      return r.status;
    }, { timeout: 10_000 }).toBe(200);
    bobs.abort();
  }, 30_000);
});
