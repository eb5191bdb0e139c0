// The forwarder against real node:http servers on both sides: a gateway
// server that reads the body and calls forward(), and a scriptable upstream.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Forwarder } from '../../src/proxy/forwarder.js';
import { createHttpForwarder } from '../../src/proxy/http-forwarder.js';
import { createSessionBinding } from '../../src/proxy/session-binding.js';
import { sessionHook } from '../../src/proxy/session-hook.js';
import type { UpstreamErrorKind } from '../../src/proxy/upstream-failure.js';
import { readBody } from '../../src/proxy/read-body.js';
import { writeError } from '../../src/errors/write-error.js';
import { toGatewayError } from '../../src/errors/translate.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { AuthContext } from '../../src/auth/principal.js';
import type { RouteConfig } from '../../src/config/types.js';

const CLIENT_TOKEN = 'client-token-must-never-reach-upstream';
const INJECTED = { authorization: 'Bearer upstream-credential' };

const principal = (subject: string): AuthContext => ({
  issuer: 'https://as.example',
  subject,
  clientId: 'client-1',
  scopes: [],
  expiresAt: 0,
  claims: {},
  token: CLIENT_TOKEN,
  tokenHash: 'h',
});

function routeFor(upstream: string, overrides: Partial<RouteConfig> = {}): RouteConfig {
  return {
    file: 'test.yaml',
    path: '/mcp',
    upstream,
    resource: 'https://gw.example/mcp',
    resourceMetadataUrl: 'https://gw.example/.well-known/oauth-protected-resource/mcp',
    authorizationServers: [],
    token: { kind: 'builtin' },
    scopesSupported: [],
    requiredScopes: [],
    rules: [],
    filterToolsList: false,
    rateLimits: [],
    allowedOrigins: [],
    maxBodyBytes: 1024,
    upstreamTimeoutMs: 5_000,
    maxGetStreamsPerUser: 16,
    maxRequestsInFlightPerUser: 64,
    upstreamAuth: { kind: 'none' },
    ...overrides,
  };
}

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const within = <T>(promise: Promise<T>, ms: number, what: string) =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`timed out: ${what}`)), ms))]);

const listen = async (server: http.Server) => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
};

const stop = async (server: http.Server) => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
};

// --- the upstream: one handler per test, every request recorded -------------

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: Buffer) => void;
interface Seen {
  method: string;
  url: string;
  rawHeaders: string[];
  body: Buffer;
}
let handler: Handler;
let seen: Seen[] = [];
const upstream = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    seen.push({ method: req.method!, url: req.url!, rawHeaders: req.rawHeaders, body });
    handler(req, res, body);
  });
});
let upstreamUrl: string;

const json = (res: http.ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}) => {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers }).end(text);
};

// --- the gateway under test ---------------------------------------------------

interface Gateway {
  port: number;
  forwarder: Forwarder;
  events: string[];
  close(): Promise<void>;
}
const gateways: Gateway[] = [];

async function startGateway(overrides: Partial<RouteConfig> = {}, upstreamBase = upstreamUrl): Promise<Gateway> {
  const route = routeFor(upstreamBase, overrides);
  const events: string[] = [];
  const forwarder = createHttpForwarder(route, {
    session: sessionHook(route.path, createSessionBinding(new MemoryStore({ maxEntries: 100 }))),
    metrics: {
      upstreamError: (kind: UpstreamErrorKind) => events.push(`error:${kind}`),
      streamOpened: () => events.push('stream:open'),
      streamClosed: () => events.push('stream:close'),
    },
  });
  const server = http.createServer(async (req, res) => {
    try {
      const auth = principal(String(req.headers['x-test-principal'] ?? 'alice'));
      const body = await readBody(req, route.maxBodyBytes);
      await forwarder.forward(req, res, { auth, body, injected: INJECTED });
    } catch (err) {
      writeError(res, toGatewayError(err));
    }
  });
  const port = await listen(server);
  const gateway = {
    port,
    forwarder,
    events,
    async close() {
      await stop(server);
      await forwarder.close();
    },
  };
  gateways.push(gateway);
  return gateway;
}

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

function send(gw: Gateway, options: { method?: string; headers?: Record<string, string>; body?: string; path?: string } = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: gw.port,
        path: options.path ?? '/mcp',
        method: options.method ?? 'POST',
        agent: false,
        headers: { authorization: `Bearer ${CLIENT_TOKEN}`, 'content-type': 'application/json', ...options.headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

beforeAll(async () => {
  upstreamUrl = `http://127.0.0.1:${await listen(upstream)}/upstream/mcp?tenant=a`;
});

afterEach(async () => {
  await Promise.all(gateways.splice(0).map((g) => g.close()));
  seen = [];
});

afterAll(async () => {
  await stop(upstream);
});

const rpc = '{"jsonrpc":"2.0","id":1,"method":"tools/list"}';

describe('forward', () => {
  it('POST JSON goes to exactly the upstream URL, with the injected credential instead of the client token', async () => {
    handler = (_req, res, body) => json(res, 200, { echoed: JSON.parse(body.toString()) });
    const gw = await startGateway();
    const reply = await send(gw, { path: '/mcp?client=query&access_token=x', body: rpc });
    expect(reply.status).toBe(200);
    expect(JSON.parse(reply.text)).toEqual({ echoed: JSON.parse(rpc) });
    expect(seen).toHaveLength(1);
    expect(seen[0]!.url).toBe('/upstream/mcp?tenant=a');
    expect(seen[0]!.method).toBe('POST');
    expect(seen[0]!.body.toString()).toBe(rpc);
    const headers = seen[0]!.rawHeaders.join('\n');
    expect(headers).not.toContain(CLIENT_TOKEN);
    expect(headers).toContain('Bearer upstream-credential');
  });

  it('hostile and hop-by-hop headers never reach the upstream; the injected header survives Connection', async () => {
    handler = (_req, res) => json(res, 200, {});
    const gw = await startGateway();
    const head = [
      'POST /mcp HTTP/1.1',
      `Host: 127.0.0.1:${gw.port}`,
      'Connection: x-custom, authorization',
      'Keep-Alive: timeout=5',
      'TE: trailers',
      'Trailer: x-trailer',
      'Proxy-Authorization: Basic c2VjcmV0',
      'Proxy-Connection: keep-alive',
      `Authorization: Bearer ${CLIENT_TOKEN}`,
      'Cookie: mag_session=gateway-session',
      'X-Forwarded-User: admin',
      'x-FORWARDED-user: admin2',
      'X-Forwarded-For: 10.0.0.1',
      'X-Auth-Request-Email: admin@example.com',
      'Remote-User: admin',
      'X-Custom: hop-secret',
      'X-Kept: yes',
      'Content-Type: application/json',
      `Content-Length: ${rpc.length}`,
    ].join('\r\n');
    const response = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(gw.port, '127.0.0.1');
      let received = '';
      socket.on('data', (d) => {
        received += d.toString();
        if (received.includes('\r\n\r\n{}')) {
          socket.destroy();
          resolve(received);
        }
      });
      socket.on('error', reject);
      socket.write(`${head}\r\n\r\n${rpc}`);
    });
    expect(response).toMatch(/^HTTP\/1\.1 200/);
    const names = seen[0]!.rawHeaders.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
    // undici announces its own persistent connection; the client's Connection is not forwarded.
    const connection = seen[0]!.rawHeaders.flatMap((h, i, all) => (i % 2 === 0 && h.toLowerCase() === 'connection' ? [all[i + 1]] : []));
    expect(connection).toEqual(['keep-alive']);
    for (const gone of ['keep-alive', 'te', 'trailer', 'proxy-authorization', 'proxy-connection', 'cookie', 'x-forwarded-user', 'x-forwarded-for', 'x-auth-request-email', 'remote-user', 'x-custom']) {
      expect(names).not.toContain(gone);
    }
    const all = seen[0]!.rawHeaders.join('\n');
    expect(all).not.toContain(CLIENT_TOKEN);
    expect(all).not.toContain('gateway-session');
    expect(names.filter((n) => n === 'authorization')).toHaveLength(1);
    expect(all).toContain('Bearer upstream-credential');
    expect(all).toContain('yes');
  });

  it('POST answered with SSE: each event reaches the client before the upstream sends the next', async () => {
    const received = [deferred(), deferred(), deferred()];
    handler = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      try {
        for (let n = 0; n < 3; n++) {
          res.write(`id: ${n}\ndata: {"n":${n}}\n\n`);
          await within(received[n]!.promise, 3_000, `client to receive event ${n}`);
        }
        res.end();
      } catch {
        res.destroy();
      }
    };
    const gw = await startGateway();
    const reply = await new Promise<Reply>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: gw.port, path: '/mcp', method: 'POST', agent: false, headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          text += d;
          for (let n = 0; n < 3; n++) if (text.includes(`data: {"n":${n}}\n\n`)) received[n]!.resolve();
        });
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(rpc);
    });
    expect(reply.status).toBe(200);
    expect(reply.text).toBe('id: 0\ndata: {"n":0}\n\nid: 1\ndata: {"n":1}\n\nid: 2\ndata: {"n":2}\n\n');
    expect(reply.headers['x-accel-buffering']).toBe('no');
    expect(reply.headers['cache-control']).toBe('no-cache');
    expect(gw.events).toEqual(['stream:open', 'stream:close']);
  });

  it('GET stream passes Last-Event-ID through, is not cut by the request timeout, and a client abort closes the upstream request', async () => {
    const upstreamClosed = deferred();
    handler = (_req, res) => {
      res.on('close', () => upstreamClosed.resolve());
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('id: 42\ndata: first\n\n');
      setTimeout(() => res.write('id: 43\ndata: after-idle\n\n'), 400);
    };
    const gw = await startGateway({ upstreamTimeoutMs: 150 });
    const gotSecond = deferred();
    const req = http.request({ host: '127.0.0.1', port: gw.port, path: '/mcp', method: 'GET', agent: false, headers: { accept: 'text/event-stream', 'last-event-id': '41' } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => {
        text += d.toString();
        if (text.includes('after-idle')) gotSecond.resolve();
      });
      res.on('error', () => {});
    });
    req.on('error', () => {});
    req.end();
    await within(gotSecond.promise, 3_000, 'the event after an idle period longer than the timeout');
    const lastEventId = seen[0]!.rawHeaders.findIndex((h) => h.toLowerCase() === 'last-event-id');
    expect(seen[0]!.rawHeaders[lastEventId + 1]).toBe('41');
    expect(seen[0]!.method).toBe('GET');
    req.destroy();
    await within(upstreamClosed.promise, 3_000, 'upstream to see the close');
    await expect.poll(() => gw.events).toEqual(['stream:open', 'stream:close']);
  });

  it('a client abort before the upstream answers cancels the upstream request', async () => {
    const arrived = deferred();
    const upstreamClosed = deferred();
    handler = (_req, res) => {
      res.on('close', () => upstreamClosed.resolve());
      arrived.resolve();
    };
    const gw = await startGateway();
    const req = http.request({ host: '127.0.0.1', port: gw.port, path: '/mcp', method: 'POST', agent: false, headers: { 'content-type': 'application/json' } });
    req.on('error', () => {});
    req.end(rpc);
    await within(arrived.promise, 3_000, 'upstream to get the request');
    req.destroy();
    await within(upstreamClosed.promise, 3_000, 'upstream to see the close');
    expect(gw.events).toEqual([]);
  });

  it('an upstream dying mid-stream ends the client response; the gateway keeps serving', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: one\n\n');
      setTimeout(() => res.destroy(), 50);
    };
    const gw = await startGateway();
    const reply = await send(gw, { method: 'GET' });
    expect(reply.text).toBe('data: one\n\n');
    expect(gw.events).toEqual(['stream:open', 'stream:close', 'error:reset']);

    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"partial":');
      setTimeout(() => res.destroy(), 50);
    };
    await expect(send(gw, { body: rpc })).rejects.toThrow();

    handler = (_req, res) => json(res, 200, { ok: true });
    expect((await send(gw, { body: rpc })).status).toBe(200);
  });

  it('backpressure: a client that does not read stops the upstream, nothing piles up in the gateway', async () => {
    const total = 64 * 1024 * 1024;
    const chunk = Buffer.alloc(64 * 1024, 'z');
    let written = 0;
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': String(total) });
      const more = () => {
        while (written < total) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    };
    const gw = await startGateway();
    const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: gw.port, path: '/mcp', method: 'GET', agent: false }, resolve);
      req.on('error', reject);
      req.end();
    });
    response.pause();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const writtenWhilePaused = written;
    expect(writtenWhilePaused).toBeLessThan(total / 2);
    let received = 0;
    response.on('data', (d: Buffer) => (received += d.length));
    response.resume();
    await new Promise((resolve) => response.on('end', resolve));
    expect(received).toBe(total);
  });

  it('DELETE is forwarded without a body and releases the session binding', async () => {
    handler = (req, res) => {
      if (req.method === 'DELETE') return void res.writeHead(204).end();
      json(res, 200, {}, { 'mcp-session-id': 'sess-del' });
    };
    const gw = await startGateway();
    expect((await send(gw, { body: rpc })).headers['mcp-session-id']).toBe('sess-del');
    const del = await send(gw, { method: 'DELETE', headers: { 'mcp-session-id': 'sess-del' } });
    expect(del.status).toBe(204);
    expect(seen[1]!.method).toBe('DELETE');
    expect(seen[1]!.body.length).toBe(0);
    expect((await send(gw, { body: rpc, headers: { 'mcp-session-id': 'sess-del' } })).status).toBe(404);
  });

  it('binds a session to its creator: another principal and unknown ids get 404 and reach nothing', async () => {
    handler = (_req, res) => json(res, 200, {}, { 'mcp-session-id': 'sess-a' });
    const gw = await startGateway();
    const created = await send(gw, { body: rpc, headers: { 'x-test-principal': 'alice' } });
    expect(created.headers['mcp-session-id']).toBe('sess-a');
    expect(seen).toHaveLength(1);

    for (const method of ['POST', 'GET', 'DELETE']) {
      const stolen = await send(gw, { method, body: method === 'POST' ? rpc : undefined, headers: { 'x-test-principal': 'bob', 'mcp-session-id': 'sess-a', 'last-event-id': '1' } });
      expect(stolen.status).toBe(404);
      expect(JSON.parse(stolen.text)).toEqual({ error: 'not_found', error_description: 'Unknown session' });
    }
    expect((await send(gw, { body: rpc, headers: { 'mcp-session-id': 'never-issued' } })).status).toBe(404);
    expect((await send(gw, { body: rpc, headers: { 'mcp-session-id': 'bad id' } })).status).toBe(400);
    expect(seen).toHaveLength(1);

    const own = await send(gw, { body: rpc, headers: { 'x-test-principal': 'alice', 'mcp-session-id': 'sess-a' } });
    expect(own.status).toBe(200);
    expect(seen).toHaveLength(2);
    const sessionHeader = seen[1]!.rawHeaders.findIndex((h) => h.toLowerCase() === 'mcp-session-id');
    expect(seen[1]!.rawHeaders[sessionHeader + 1]).toBe('sess-a');
  });

  it('an upstream reusing a session id for another principal is refused', async () => {
    handler = (_req, res) => json(res, 200, {}, { 'mcp-session-id': 'same-for-all' });
    const gw = await startGateway();
    expect((await send(gw, { body: rpc, headers: { 'x-test-principal': 'alice' } })).status).toBe(200);
    const reply = await send(gw, { body: rpc, headers: { 'x-test-principal': 'bob' } });
    expect(reply.status).toBe(502);
    expect(reply.headers['mcp-session-id']).toBeUndefined();
  });

  it('upstream 401 becomes 502 without the upstream challenge', async () => {
    handler = (_req, res) => json(res, 401, { error: 'invalid_token' }, { 'www-authenticate': 'Bearer resource_metadata="https://upstream-as.example/"' });
    const gw = await startGateway();
    const reply = await send(gw, { body: rpc });
    expect(reply.status).toBe(502);
    expect(reply.headers['www-authenticate']).toBeUndefined();
    expect(JSON.parse(reply.text)).toEqual({ error: 'bad_gateway', error_description: "Upstream rejected the gateway's credential" });
    expect(reply.text).not.toContain('upstream-as');
  });

  it('other upstream statuses pass through, without set-cookie, hop-by-hop or upstream CORS headers', async () => {
    handler = (_req, res) => {
      res.setHeader('set-cookie', 'upstream=1; Path=/');
      res.setHeader('access-control-allow-origin', '*');
      res.setHeader('x-internal', 'no');
      res.setHeader('connection', 'x-internal');
      json(res, 403, { error: 'nope' });
    };
    const gw = await startGateway();
    const reply = await send(gw, { body: rpc });
    expect(reply.status).toBe(403);
    expect(JSON.parse(reply.text)).toEqual({ error: 'nope' });
    expect(reply.headers['set-cookie']).toBeUndefined();
    expect(reply.headers['access-control-allow-origin']).toBeUndefined();
    expect(reply.headers['x-internal']).toBeUndefined();
  });

  it('a body of declared length passes whole, whether it comes in one piece or several', async () => {
    const pieces = ['{"part":1,', '"rest":"', 'x'.repeat(5000), '"}'];
    const whole = pieces.join('');
    handler = (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(whole)) });
      if (req.headers['x-pieces'] !== 'yes') return res.end(whole);
      let i = 0;
      const next = () => (i < pieces.length - 1 ? (res.write(pieces[i++]), setTimeout(next, 20)) : res.end(pieces[i]));
      next();
    };
    const gw = await startGateway();
    for (const inPieces of ['no', 'yes']) {
      const reply = await send(gw, { body: rpc, headers: { 'x-pieces': inPieces } });
      expect(reply.status).toBe(200);
      expect(reply.headers['content-length']).toBe(String(whole.length));
      expect(reply.text).toBe(whole);
    }
  });

  it('a body cut short of its declared length is never passed off as whole', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"short":');
      setTimeout(() => res.socket?.destroy(), 20);
    };
    const gw = await startGateway();
    await expect(send(gw, { body: rpc })).rejects.toThrow();
    expect(gw.events).toEqual(['error:reset']);
  });

  it('an informational 103 before the answer is not taken for the response', async () => {
    handler = (_req, res) => {
      res.writeEarlyHints({ link: '</x>; rel=preload' });
      json(res, 200, { ok: true });
    };
    const gw = await startGateway();
    const reply = await send(gw, { body: rpc });
    expect(reply.status).toBe(200);
    expect(JSON.parse(reply.text)).toEqual({ ok: true });
  });

  it('upstream down → 502 JSON, and the gateway stays up', async () => {
    const probe = http.createServer();
    const deadPort = await listen(probe);
    await stop(probe);
    const gw = await startGateway({}, `http://127.0.0.1:${deadPort}/mcp`);
    const reply = await send(gw, { body: rpc });
    expect(reply.status).toBe(502);
    expect(reply.headers['content-type']).toBe('application/json');
    expect(JSON.parse(reply.text)).toEqual({ error: 'bad_gateway', error_description: 'Upstream unreachable' });
    expect(gw.events).toEqual(['error:unreachable']);
    expect((await send(gw, { body: rpc })).status).toBe(502);
  });

  it('upstream slow → 504 JSON', async () => {
    handler = () => {};
    const gw = await startGateway({ upstreamTimeoutMs: 200 });
    const reply = await send(gw, { body: rpc });
    expect(reply.status).toBe(504);
    expect(JSON.parse(reply.text)).toEqual({ error: 'gateway_timeout', error_description: 'Upstream did not answer in time' });
    expect(gw.events).toEqual(['error:timeout']);
  });

  it('a JSON body that stalls after the headers is cut after the timeout', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '100' });
      res.write('{"slow":');
    };
    const gw = await startGateway({ upstreamTimeoutMs: 200 });
    await expect(send(gw, { body: rpc })).rejects.toThrow();
    expect(gw.events).toEqual(['error:timeout']);
  });

  it('413 before the upstream: early from Content-Length and while streaming', async () => {
    handler = (_req, res) => json(res, 200, {});
    const gw = await startGateway({ maxBodyBytes: 64 });
    const early = await send(gw, { body: 'x'.repeat(65) });
    expect(early.status).toBe(413);
    expect(JSON.parse(early.text).error).toBe('payload_too_large');
    const streamed = await new Promise<string>((resolve) => {
      const socket = net.connect(gw.port, '127.0.0.1');
      let received = '';
      socket.on('data', (d) => (received += d.toString()));
      socket.on('close', () => resolve(received));
      socket.on('error', () => {});
      socket.write(`POST /mcp HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n28\r\n${'y'.repeat(40)}\r\n28\r\n${'y'.repeat(40)}\r\n`);
    });
    expect(streamed).toMatch(/^HTTP\/1\.1 413/);
    expect(seen).toHaveLength(0);
  });

  it('refuses methods other than GET, POST and DELETE with 405 and Allow', async () => {
    handler = (_req, res) => json(res, 200, {});
    const gw = await startGateway();
    const reply = await send(gw, { method: 'PUT', body: rpc });
    expect(reply.status).toBe(405);
    expect(reply.headers.allow).toBe('GET, POST, DELETE');
    expect(seen).toHaveLength(0);
  });

  it('close() ends open event streams cleanly', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('data: hello\n\n');
    };
    const gw = await startGateway();
    const ended = new Promise<string>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: gw.port, path: '/mcp', method: 'GET', agent: false }, (res) => {
        let text = '';
        res.on('data', (d: Buffer) => {
          text += d.toString();
          if (text.includes('hello')) void gw.forwarder.close();
        });
        res.on('end', () => resolve(text));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
    expect(await within(ended, 3_000, 'the stream to end')).toBe('data: hello\n\n');
  });

  it('open event streams never starve other requests: 200 idle streams, then a POST still answers', async () => {
    handler = (req, res) => {
      if (req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write(': open\n\n');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"jsonrpc":"2.0","id":1,"result":{}}');
    };
    const gw = await startGateway();
    const agent = new http.Agent({ keepAlive: false, maxSockets: Infinity });
    const streams = await Promise.all(
      Array.from({ length: 200 }, () =>
        within(
          new Promise<http.ClientRequest>((resolve, reject) => {
            const req = http.request({ host: '127.0.0.1', port: gw.port, path: '/mcp', method: 'GET', agent }, (res) => res.once('data', () => resolve(req)));
            req.on('error', reject);
            req.end();
          }),
          10_000,
          'every stream to open',
        ),
      ),
    );
    const reply = await within(send(gw, { body: rpc }), 5_000, 'a POST beside 200 open streams');
    expect(reply.status).toBe(200);
    for (const req of streams) req.destroy();
    agent.destroy();
  });
});
