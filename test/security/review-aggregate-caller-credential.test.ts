/**
 * Adversarial review of aggregated routes (DESIGN §8.2–8.3, [K79]): an upstream's health is one
 * per route, shared by every session, so only a failure that says the server itself is down may
 * mark it down. Before this fix, any failure of a list or initialize that was not the upstream's
 * own answer counted as "down" — the caller's own credential included: a user whose
 * `token_exchange` the STS refuses (or whose IdP token is gone) made every tools/list mark the
 * shared upstream down for 5 s for everyone, and again at each list after that, so one such user
 * kept the upstream out of every other user's lists and failed their calls. Now a credential that
 * cannot be made for a caller is that caller's failure only.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, listen } from '../helpers/net.js';
import { startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';

const PATH = '/all/mcp';
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'r', version: '1' } } };

/** An RFC 8693 token endpoint that exchanges every subject token but mallory's (her exchange is refused, as an STS refuses a user it does not allow). */
function sts(): Server {
  return createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const subject = new URLSearchParams(body).get('subject_token') ?? '';
      const sub = (JSON.parse(Buffer.from(subject.split('.')[1] ?? '', 'base64url').toString() || '{}') as { sub?: string }).sub;
      if (sub === 'mallory') return void res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'invalid_grant' }));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ access_token: `exchanged-${sub}`, token_type: 'Bearer', expires_in: 300, issued_token_type: 'urn:ietf:params:oauth:token-type:access_token' }));
    });
  });
}

/** An MCP server (Streamable HTTP, JSON answers) with one tool, that takes only exchanged tokens. */
function upstream(): Server {
  return createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (!(req.headers.authorization ?? '').startsWith('Bearer exchanged-')) return void res.writeHead(401).end();
      if (req.method !== 'POST') return void res.writeHead(405).end();
      const m = JSON.parse(body) as { id?: number; method: string; params?: { protocolVersion?: string } };
      if (m.id === undefined) return void res.writeHead(202).end();
      let result: unknown = {};
      if (m.method === 'initialize') result = { protocolVersion: m.params?.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'x', version: '1' } };
      else if (m.method === 'tools/list') result = { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] };
      else if (m.method === 'tools/call') result = { content: [{ type: 'text', text: 'echo' }] };
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'x-1' }).end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
    });
  });
}

describe("one caller's credential failing never takes a shared upstream down for everyone", () => {
  const servers = { sts: sts(), upstream: upstream() };
  let stage: StdioStage;
  beforeAll(async () => {
    const stsUrl = `http://127.0.0.1:${await listen(servers.sts)}/token`;
    const url = `http://127.0.0.1:${await listen(servers.upstream)}/mcp`;
    const upstreamAuth = { kind: 'token_exchange', token_endpoint: stsUrl, client_id: 'gw', client_secret: { env: 'REVIEW_STS_SECRET' } };
    stage = await startStdioStage({ [PATH]: { upstreams: { x: { upstream: url, upstream_auth: upstreamAuth } } } }, { REVIEW_STS_SECRET: 's3cret' });
  }, 60_000);
  afterAll(async () => {
    await stage?.close();
    await Promise.all(Object.values(servers).map((s) => closeServer(s)));
  });

  async function session(sub: string) {
    const headers = { ...HEADERS, authorization: `Bearer ${await stage.token(PATH, sub)}` };
    const init = await fetch(stage.url(PATH), { method: 'POST', headers, body: JSON.stringify(INIT) });
    await init.arrayBuffer();
    const id = init.headers.get('mcp-session-id')!;
    return async (body: unknown) => {
      const r = await fetch(stage.url(PATH), { method: 'POST', headers: { ...headers, 'mcp-session-id': id }, body: JSON.stringify(body) });
      return { status: r.status, body: (await r.json()) as Record<string, unknown> };
    };
  }

  it("mallory's refused exchange fails her lists only: bob's lists and calls are served throughout", async () => {
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list' };
    const call = { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'x__echo', arguments: {} } };
    const bob = await session('bob');
    expect((await bob(list)).body).toMatchObject({ result: { tools: [{ name: 'x__echo' }] } });
    // Her initialize: the session opens without that upstream (it opens nothing for her there).
    const mallory = await session('mallory');
    expect((await bob(list)).body).toMatchObject({ result: { tools: [{ name: 'x__echo' }] } });
    for (let i = 0; i < 3; i++) {
      // Her list: the upstream left out for her (her credential cannot be made).
      expect((await mallory(list)).body).toMatchObject({ result: { tools: [] } });
      expect((await bob(list)).body).toMatchObject({ result: { tools: [{ name: 'x__echo' }] } });
      expect((await bob(call)).body).toMatchObject({ result: { content: [{ text: 'echo' }] } });
      // Her call: her credential's failure (502), as on a route of its own; bob's next call is served.
      expect((await mallory(call)).status).toBe(502);
      expect((await bob(call)).body).toMatchObject({ result: { content: [{ text: 'echo' }] } });
    }
  }, 30_000);
});
