// The proxy's response-transform hook with the tools/list filter, between
// real node:http servers: events keep flowing while the filter waits for its
// answer, lengths are dropped, bodies arrive uncoded, failures cut the answer.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Forwarder } from '../../src/proxy/forwarder.js';
import { createHttpForwarder } from '../../src/proxy/http-forwarder.js';
import type { ResponseTransform } from '../../src/proxy/response-transform.js';
import { createSessionBinding } from '../../src/proxy/session-binding.js';
import { sessionHook } from '../../src/proxy/session-hook.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { toolsListFilter } from '../../src/policy/tools-list-filter.js';
import type { AuthContext } from '../../src/auth/principal.js';
import type { RouteConfig } from '../../src/config/types.js';

const auth: AuthContext = { issuer: 'i', subject: 's', clientId: 'c', scopes: [], expiresAt: 0, claims: {}, token: 't', tokenHash: 'h' };
const filter: ResponseTransform = toolsListFilter({ mayCall: (n) => n !== 'secret_tool', maxBytes: 1 << 20 });
const TOOLS = { jsonrpc: '2.0', id: 7, result: { tools: [{ name: 'ok_tool' }, { name: 'secret_tool' }] } };

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;
let handler: Handler;
let seenHeaders: http.IncomingHttpHeaders[] = [];
const upstream = http.createServer((req, res) => {
  seenHeaders.push(req.headers);
  req.resume().on('end', () => handler(req, res));
});
let gateway: http.Server;
let forwarder: Forwarder;
let port: number;

const listen = async (server: http.Server) => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
};

beforeAll(async () => {
  const upstreamPort = await listen(upstream);
  const route = { path: '/mcp', upstream: `http://127.0.0.1:${upstreamPort}/mcp`, upstreamTimeoutMs: 5_000 } as RouteConfig;
  forwarder = createHttpForwarder(route, { session: sessionHook(route.path, createSessionBinding(new MemoryStore({ maxEntries: 10 }))) });
  gateway = http.createServer((req, res) => {
    req.resume().on('end', () => void forwarder.forward(req, res, { auth, body: Buffer.from('{}'), injected: {}, transform: filter }));
  });
  port = await listen(gateway);
});

afterEach(() => {
  seenHeaders = [];
});

afterAll(async () => {
  await forwarder.close();
  for (const server of [gateway, upstream]) {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

function request(headers: Record<string, string> = {}): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/mcp', method: 'POST', agent: false, headers }, resolve);
    req.on('error', reject);
    req.end('{}');
  });
}

const nextChunk = (res: http.IncomingMessage) => new Promise<string>((resolve) => res.once('data', (d: Buffer) => resolve(d.toString())));
const readAll = (res: http.IncomingMessage) =>
  new Promise<string>((resolve, reject) => {
    let text = '';
    res.on('data', (d: Buffer) => (text += d.toString())).on('end', () => resolve(text)).on('error', reject);
  });

describe('the response transform hook', () => {
  it('passes other events at once while the awaited answer has not come, then rewrites it', async () => {
    let upstreamRes!: http.ServerResponse;
    const opened = new Promise<void>((resolve) => {
      handler = (_req, res) => {
        upstreamRes = res;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}\n\n');
        resolve();
      };
    });
    const res = await request();
    await opened;
    expect(res.headers['x-accel-buffering']).toBe('no');
    // The progress event arrives while the upstream keeps the stream open.
    expect(await nextChunk(res)).toContain('notifications/progress');
    upstreamRes.write(`event: message\nid: 1\ndata: ${JSON.stringify(TOOLS)}\n\n`);
    const answer = await nextChunk(res);
    expect(answer).toContain('ok_tool');
    expect(answer).not.toContain('secret_tool');
    expect(answer.startsWith('event: message\nid: 1\ndata: ')).toBe(true);
    upstreamRes.end('event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{}}\n\n');
    expect(await readAll(res)).toContain('notifications/message');
  });

  it('asks the upstream for an uncoded body and drops its Content-Length', async () => {
    handler = (_req, res) => {
      const text = JSON.stringify(TOOLS);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
    };
    const res = await request({ 'accept-encoding': 'gzip, br' });
    expect(res.headers['content-length']).toBeUndefined();
    expect(JSON.parse(await readAll(res))).toEqual({ jsonrpc: '2.0', id: 7, result: { tools: [{ name: 'ok_tool' }], cacheScope: 'private' } });
    expect(seenHeaders[0]!['accept-encoding']).toBe('identity');
  });

  it('answers Cache-Control: private, keeping the upstream\'s directives but those for shared caches', async () => {
    for (const [upstream, expected] of [
      [undefined, 'private'],
      ['public, max-age=60', 'max-age=60, private'],
      ['s-maxage=600, max-age=60', 'max-age=60, private'],
      ['no-store', 'no-store, private'],
      ['Private, no-cache', 'Private, no-cache'],
    ] as const) {
      handler = (_req, res) => {
        res.writeHead(200, { 'content-type': 'application/json', ...(upstream ? { 'cache-control': upstream } : {}) }).end(JSON.stringify(TOOLS));
      };
      const res = await request();
      await readAll(res);
      expect(res.headers['cache-control'], upstream).toBe(expected);
    }
  });

  it('cuts an answer that cannot be filtered rather than pass it', async () => {
    handler = (_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"secret_tool"}');
    // The head may or may not have left yet: either the response or its body breaks.
    await expect(request().then(readAll)).rejects.toThrow();

    handler = (_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end('xxxx');
    await expect(request().then(readAll)).rejects.toThrow();
  });

  it('leaves error answers alone', async () => {
    handler = (_req, res) => res.writeHead(404, { 'content-type': 'application/json' }).end('{"oops":"secret_tool"}');
    const res = await request();
    expect(res.statusCode).toBe(404);
    expect(await readAll(res)).toBe('{"oops":"secret_tool"}');
  });
});
