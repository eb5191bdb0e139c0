// How an aggregated session ends when nobody ends it. One whose opening fails after its upstream sessions were
// opened (the store refuses to bind the client's session id) must end those
// upstream sessions: before, each such initialize left every upstream's GET
// stream open (and a stdio process per session) with no client session to end
// them, a leak per request while the store was failing. A forwarder written
// here stands in for the upstream and counts its open GET streams.
import { EventEmitter } from 'node:events';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import { createAggregateForwarder } from '../../src/proxy/aggregate/aggregate-forwarder.js';
import type { Forwarder } from '../../src/proxy/forwarder.js';

const AUTH = { issuer: 'https://as.example', subject: 'alice', clientId: 'c', scopes: [] } as unknown as AuthContext;

function streamingUpstream() {
  const seen = { open: 0, deletes: 0 };
  const forwarder: Forwarder = {
    forward(req: IncomingMessage, res: ServerResponse, ctx) {
      if (req.method === 'GET') {
        seen.open++;
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.flushHeaders();
        (res as unknown as EventEmitter).once('close', () => seen.open--);
        return Promise.resolve();
      }
      if (req.method === 'DELETE') return (seen.deletes++, Promise.resolve(void res.writeHead(200).end()));
      const m = JSON.parse(ctx.body.toString()) as { id?: number; method: string };
      if (m.id === undefined) return Promise.resolve(void res.writeHead(202).end());
      res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'up-1' });
      res.end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result: { protocolVersion: '2025-06-18', capabilities: { tools: {} } } }));
      return Promise.resolve();
    },
    close: () => Promise.resolve(),
  };
  return { forwarder, seen };
}

/** The part of ServerResponse the aggregate forwarder writes its error to. */
function response() {
  const out = { status: 0, body: '' };
  const res = Object.assign(new EventEmitter(), {
    headersSent: false,
    setHeader: () => undefined,
    writeHead: (status: number) => ((out.status = status), res),
    end: (body?: string) => ((out.body = body ?? ''), res),
  });
  return { res: res as unknown as ServerResponse, out };
}

describe('an aggregated session whose opening fails after its upstreams opened', () => {
  it('ends every upstream session it opened (GET stream closed, DELETE sent) and answers with a JSON error', async () => {
    const up = streamingUpstream();
    const failingStore = { admit: () => Promise.resolve(), bind: () => Promise.reject(new Error('store down')), release: () => undefined };
    const aggregate = createAggregateForwarder({ path: '/r/mcp', aggregate: { pattern: '{upstream}__{name}', upstreams: [] } }, { session: failingStore, upstreams: [{ name: 'u', forwarder: up.forwarder, headersFor: () => ({}), timeoutMs: 2_000, maxBytes: 64 * 1024, perSession: false }] });
    const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }));
    for (let i = 0; i < 3; i++) {
      const { res, out } = response();
      await aggregate.forward({ method: 'POST', headers: {} } as IncomingMessage, res, { auth: AUTH, body, injected: {} });
      expect(out.status).toBe(500);
      expect(() => JSON.parse(out.body) as unknown).not.toThrow();
    }
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setImmediate(r));
    expect(up.seen.open).toBe(0);
    expect(up.seen.deletes).toBe(3);
    await aggregate.close();
  });
});

describe('an aggregated session left idle', () => {
  afterEach(() => vi.useRealTimers());

  it('ends with its upstream sessions and releases its binding in the store (not left for the binding TTL)', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'Date'] });
    const up = streamingUpstream();
    const released: string[] = [];
    const store = { admit: () => Promise.resolve(), bind: () => Promise.resolve(), release: (id: string) => void released.push(id) };
    const aggregate = createAggregateForwarder({ path: '/r/mcp', aggregate: { pattern: '{upstream}__{name}', upstreams: [] } }, { session: store, upstreams: [{ name: 'u', forwarder: up.forwarder, headersFor: () => ({}), timeoutMs: 2_000, maxBytes: 64 * 1024, perSession: false }] });
    const body = Buffer.from(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }));
    const headers: Record<string, string> = {};
    const { res, out } = response();
    (res as unknown as { setHeader: (n: string, v: string) => void }).setHeader = (n, v) => void (headers[n] = v);
    await aggregate.forward({ method: 'POST', headers: {} } as IncomingMessage, res, { auth: AUTH, body, injected: {} });
    expect(out.status).toBe(200);
    expect(up.seen.open).toBe(1);
    vi.advanceTimersByTime(31 * 60_000);
    await new Promise((r) => setImmediate(r));
    expect(released).toEqual([headers['mcp-session-id']]);
    expect(up.seen.open).toBe(0);
    await aggregate.close();
  });
});
