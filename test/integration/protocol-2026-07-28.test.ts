/**
 * MCP 2026-07-28, tightened (DESIGN §7.5), through the real gateway and a scripted upstream that
 * records what reached it and when:
 * - `Mcp-Param-*` headers reach the upstream unchanged, plain or `=?base64?…?=`; a malformed,
 *   repeated or `_`-spelled one is 400 with JSON-RPC -32020 and reaches nothing;
 * - a client closing an SSE response cancels the upstream request at once (the upstream sees its
 *   request closed within 100 ms);
 * - a filtered `tools/list` answer is marked `cacheScope: "private"` and `Cache-Control: private`,
 *   and two principals each get their own list.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, listen } from '../helpers/net.js';
import { buildRequest, rawRequest } from '../helpers/raw-http.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';

interface Seen {
  headers: Array<[string, string]>;
  body: { id?: unknown; method?: string; params?: { name?: string } };
  openedAt: number;
  closedAt?: number;
  finished?: boolean;
}

/** POST tools/list: a JSON tool list with a public Cache-Control; tools/call `slow`: progress events every 20 ms until the client goes; else echo. */
function scriptedUpstream(seen: Seen[]) {
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers: Array<[string, string]> = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
      const record: Seen = { headers, body: JSON.parse(Buffer.concat(chunks).toString() || '{}') as Seen['body'], openedAt: performance.now() };
      seen.push(record);
      res.on('close', () => {
        record.closedAt = performance.now();
        record.finished = res.writableFinished;
      });
      const { id, method, params } = record.body;
      if (method === 'tools/list') {
        const tools = [{ name: 'echo', inputSchema: { type: 'object' } }, { name: 'delete_repo', inputSchema: { type: 'object' } }];
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'public, max-age=60' });
        return void res.end(JSON.stringify({ jsonrpc: '2.0', id, result: { tools, ttlMs: 60_000, cacheScope: 'public' } }));
      }
      if (method === 'tools/call' && params?.name === 'slow') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
        let n = 0;
        const timer = setInterval(() => res.write(`event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":${++n}}}\n\n`), 20);
        res.on('close', () => clearInterval(timer));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id, result: { content: [{ type: 'text', text: 'ok' }] } }));
    });
  });
}

const PATH = '/p/mcp';
const seen: Seen[] = [];
const upstream = scriptedUpstream(seen);
let issuer: TestIssuer;
let gw: TestGateway;
let reader: string;
let writer: string;
let upstreamUrl: string;

beforeAll(async () => {
  const port = await listen(upstream);
  upstreamUrl = `http://127.0.0.1:${port}/mcp`;
  issuer = await startTestIssuer('RS256');
  gw = await startTestGateway({
    'gateway.yaml': gatewayYaml(),
    'p.yaml': jwtRoute(PATH, `http://127.0.0.1:${port}/mcp`, issuer, {
      rules: [{ match: { method: 'tools/call', tool: 'delete_*' }, require_scopes: ['mcp:write'] }],
      filter_tools_list: true,
    }),
  });
  reader = await issuer.mint({ aud: resourceOf(PATH), sub: 'alice', client_id: 'app', scope: 'mcp:read' });
  writer = await issuer.mint({ aud: resourceOf(PATH), sub: 'bob', client_id: 'app', scope: 'mcp:read mcp:write' });
});

afterAll(async () => {
  await gw?.stop();
  await issuer?.close();
  await closeServer(upstream);
});

/** A 2026-07-28 POST: the routing headers mirror the body, `extra` headers in the order given. */
function post(token: string, method: string, params: Record<string, unknown>, extra: Array<[string, string]> = [], signal?: AbortSignal, url = `${gw.url}${PATH}`) {
  const headers = new Headers({
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': method,
  });
  if (typeof params.name === 'string') headers.set('mcp-name', params.name);
  for (const [name, value] of extra) headers.append(name, value);
  return fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 9, method, params }), signal });
}

const headerOf = (record: Seen, name: string) => record.headers.filter(([n]) => n.toLowerCase() === name).map(([, v]) => v);

describe('Mcp-Param-* headers', () => {
  it('reach the upstream unchanged, plain and base64 alike', async () => {
    const before = seen.length;
    const encoded = `=?base64?${Buffer.from('Hello, 世界').toString('base64')}?=`;
    const res = await post(reader, 'tools/call', { name: 'echo', arguments: { region: 'us-west1', greeting: 'Hello, 世界' } }, [
      ['Mcp-Param-Region', 'us-west1'],
      ['Mcp-Param-Greeting', encoded],
    ]);
    expect(res.status).toBe(200);
    await res.body?.cancel();
    expect(seen.length).toBe(before + 1);
    expect(headerOf(seen.at(-1)!, 'mcp-param-region')).toEqual(['us-west1']);
    expect(headerOf(seen.at(-1)!, 'mcp-param-greeting')).toEqual([encoded]);
  });

  it('a malformed, repeated or underscored one is 400 with JSON-RPC -32020 and reaches nothing', async () => {
    // Raw requests: fetch would join a repeated header into one value.
    const cases: Array<Array<[string, string]>> = [
      [['Mcp-Param-Region', '=?BASE64?dXM=?=']],
      [['Mcp-Param-Region', '=?base64?dXM?=']],
      [['Mcp-Param-Region', 'caf\xe9']],
      [['Mcp-Param-Region', 'us-west1'], ['MCP-PARAM-REGION', 'eu-west1']],
      [['Mcp-Param-Region', 'us-west1'], ['Mcp-Param-Region', 'us-west1']],
      [['Mcp-Param-Region_Name', 'us-west1']],
      [['Mcp-Param-', 'us-west1']],
    ];
    const before = seen.length;
    const body = JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo', arguments: {} } });
    for (const extra of cases) {
      const headers: Array<[string, string]> = [['Authorization', `Bearer ${reader}`], ['Mcp-Method', 'tools/call'], ['Mcp-Name', 'echo'], ...extra];
      const res = await rawRequest(Number(new URL(gw.url).port), buildRequest({ method: 'POST', target: PATH, headers, body }));
      expect(res.status, JSON.stringify(extra)).toBe(400);
      expect(JSON.parse(res.body)).toMatchObject({ jsonrpc: '2.0', id: 9, error: { code: -32020 } });
    }
    expect(seen.length).toBe(before);
  });
});

describe('a client closing an SSE response', () => {
  /** One stream (through the gateway, or straight to the upstream): opened, two events read, then closed by the client; ms until the upstream saw its request closed. */
  async function cancelOnce(url: string): Promise<number> {
    const abort = new AbortController();
    const before = seen.length;
    const res = await post(reader, 'tools/call', { name: 'slow', arguments: {} }, [], abort.signal, url);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const stream = res.body!.getReader();
    let text = '';
    while ((text.match(/notifications\/progress/g) ?? []).length < 2) text += new TextDecoder().decode((await stream.read()).value);
    const record = seen[before]!;
    expect(record.closedAt).toBeUndefined();
    const closedByClient = performance.now();
    abort.abort();
    await expect.poll(() => record.closedAt, { timeout: 5_000, interval: 5 }).toBeDefined();
    // Cut, not finished: the upstream was still streaming.
    expect(record.finished).toBe(false);
    return record.closedAt! - closedByClient;
  }

  it('cancels the upstream request at once: within 100 ms of what a direct connection takes (medians of 5, interleaved)', async () => {
    const direct: number[] = [];
    const through: number[] = [];
    for (let i = 0; i < 5; i++) {
      direct.push(await cancelOnce(upstreamUrl));
      through.push(await cancelOnce(`${gw.url}${PATH}`));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[2]!;
    const shown = `direct ${direct.map((d) => d.toFixed(1)).join(' ')}; gateway ${through.map((d) => d.toFixed(1)).join(' ')}`;
    // Client, gateway and upstream share one event loop on a shared machine, so the direct run is
    // the baseline: the gateway adds one hop's socket close, not a wait for the next event or a timeout.
    expect(median(through) - median(direct), shown).toBeLessThan(100);
    expect(Math.max(...through), shown).toBeLessThan(1_000);
  });
});

describe('a filtered tools/list answer', () => {
  it('is marked cacheScope "private" and Cache-Control: private, and each principal gets its own list', async () => {
    const forReader = await post(reader, 'tools/list', {});
    expect(forReader.headers.get('cache-control')).toBe('max-age=60, private');
    expect(((await forReader.json()) as { result: unknown }).result).toEqual({ tools: [{ name: 'echo', inputSchema: { type: 'object' } }], ttlMs: 60_000, cacheScope: 'private' });

    const forWriter = await post(writer, 'tools/list', {});
    expect(forWriter.headers.get('cache-control')).toBe('max-age=60, private');
    const body = (await forWriter.json()) as { result: { tools: Array<{ name: string }>; cacheScope: string } };
    expect(body.result.tools.map((t) => t.name)).toEqual(['echo', 'delete_repo']);
    // Nothing was removed for this caller, yet the list is still theirs alone.
    expect(body.result.cacheScope).toBe('private');
  });
});
