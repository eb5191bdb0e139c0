/**
 * Adversarial review of aggregated routes (DESIGN §8.2–8.3, [K63]): the URIs a session learnt
 * from its upstreams' resources/list answers are where its reads go. Before this fix they were
 * added at every listing and never let go (only a resources/list_changed cleared them), so an
 * upstream listing fresh URIs each time (a "recent items" server, or a hostile one) grew one
 * session's map by a whole list per resources/list the client asked for: 20 lists of 100,000
 * URIs held ~135 MB of the gateway's heap for that one session, and nothing bounded it.
 * Now a session knows which upstream serves a URI from that upstream's latest list only, within
 * MAX_LISTED_URIS per session.
 */
import { createServer, type Server } from 'node:http';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_LISTED_URIS } from '../../src/proxy/aggregate/resource-owners.js';
import { closeServer, listen } from '../helpers/net.js';
import { startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';

const PATH = '/all/mcp';
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const INIT = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'r', version: '1' } } };

setFlagsFromString('--expose_gc');
const gc = runInNewContext('gc') as () => void;

/** A Streamable HTTP upstream whose every resources/list names `perList` URIs never listed before. */
function freshUris(perList: number) {
  const state = { lists: 0, reads: [] as string[], perList };
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      if (req.method !== 'POST') return void res.writeHead(405).end();
      const m = JSON.parse(body) as { id?: number; method: string; params?: { protocolVersion?: string; uri?: string } };
      if (m.id === undefined) return void res.writeHead(202).end();
      let result: unknown = {};
      if (m.method === 'initialize') result = { protocolVersion: m.params?.protocolVersion, capabilities: { resources: {} }, serverInfo: { name: 'fresh', version: '1' } };
      else if (m.method === 'resources/list') {
        const g = state.lists++;
        result = { resources: Array.from({ length: state.perList }, (_, i) => ({ uri: `mem://g${g}-${i}` })) };
      } else if (m.method === 'resources/read') {
        state.reads.push(m.params!.uri!);
        result = { contents: [{ uri: m.params!.uri, text: 'x' }] };
      }
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'fresh-1' }).end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
    });
  });
  return { server, state };
}

describe('a session keeps only its upstreams\' latest lists of URIs', () => {
  let upstream: ReturnType<typeof freshUris>;
  let server: Server;
  let stage: StdioStage;
  let post: (body: unknown) => Promise<Record<string, unknown>>;
  beforeAll(async () => {
    upstream = freshUris(3);
    server = upstream.server;
    const url = `http://127.0.0.1:${await listen(server)}/mcp`;
    stage = await startStdioStage({ [PATH]: { upstreams: { fresh: { upstream: url } } } });
    const headers = { ...HEADERS, authorization: `Bearer ${await stage.token(PATH)}` };
    const init = await fetch(stage.url(PATH), { method: 'POST', headers, body: JSON.stringify(INIT) });
    await init.arrayBuffer();
    const id = init.headers.get('mcp-session-id')!;
    post = async (body) => (await (await fetch(stage.url(PATH), { method: 'POST', headers: { ...headers, 'mcp-session-id': id }, body: JSON.stringify(body) })).json()) as Record<string, unknown>;
  }, 60_000);
  afterAll(async () => {
    await stage?.close();
    if (server) await closeServer(server);
  });

  it('a URI the upstream no longer lists is not routed to it any more (nothing sent); one it lists now is', async () => {
    await post({ jsonrpc: '2.0', id: 2, method: 'resources/list' });
    expect(await post({ jsonrpc: '2.0', id: 3, method: 'resources/read', params: { uri: 'mem://g0-1' } })).toMatchObject({ result: { contents: [{ uri: 'mem://g0-1' }] } });
    await post({ jsonrpc: '2.0', id: 4, method: 'resources/list' });
    expect(await post({ jsonrpc: '2.0', id: 5, method: 'resources/read', params: { uri: 'mem://g1-2' } })).toMatchObject({ result: { contents: [{ uri: 'mem://g1-2' }] } });
    const reads = upstream.state.reads.length;
    expect(await post({ jsonrpc: '2.0', id: 6, method: 'resources/read', params: { uri: 'mem://g0-2' } })).toMatchObject({ error: { code: -32002 } });
    expect(upstream.state.reads.length).toBe(reads);
  });

  it('20 lists of 100,000 fresh URIs: the session holds at most MAX_LISTED_URIS of them, not every list', async () => {
    upstream.state.perList = 100_000;
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 20; i++) {
      const answer = (await post({ jsonrpc: '2.0', id: 100 + i, method: 'resources/list' })) as { result: { resources: unknown[] } };
      expect(answer.result.resources).toHaveLength(100_000); // listed in full: only what routes reads is bounded
    }
    gc();
    gc();
    const grownMb = (process.memoryUsage().heapUsed - before) / 1e6;
    // Every list kept: ~135 MB (measured before the fix). The latest, bounded: a few MB.
    expect(grownMb).toBeLessThan(40);
    // The bound: the first MAX_LISTED_URIS of the latest list route reads, the rest do not.
    const last = upstream.state.lists - 1;
    expect(await post({ jsonrpc: '2.0', id: 200, method: 'resources/read', params: { uri: `mem://g${last}-${MAX_LISTED_URIS - 1}` } })).toMatchObject({ result: {} });
    expect(await post({ jsonrpc: '2.0', id: 201, method: 'resources/read', params: { uri: `mem://g${last}-${MAX_LISTED_URIS}` } })).toMatchObject({ error: { code: -32002 } });
  }, 120_000);
});
