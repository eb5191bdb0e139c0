/**
 * A small session-based MCP upstream (2025-11-25, JSON answers) that serves resources and takes
 * `resources/subscribe`, under the test's control where the watches of session-less listens are
 * attacked (listen-watches.ts): `resources/unsubscribe` is answered at once, held until
 * `release()`, or refused; `update(uri)` tells every session's GET stream that `uri` changed.
 * Every JSON-RPC method it was POSTed (with its `params.uri`) is recorded in order.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listen } from './net.js';

export type UnsubscribeMode = 'answer' | 'hold' | 'refuse';

export interface SubscribingUpstream {
  url: string;
  /** `method uri` of every POSTed request, in the order received. */
  posted: string[];
  unsubscribe: UnsubscribeMode;
  /** Answers every held unsubscribe. */
  release(): void;
  /** Unsubscribes held now. */
  held(): number;
  update(uri: string): void;
  close(): Promise<void>;
}

export async function startSubscribingUpstream(uris: readonly string[]): Promise<SubscribingUpstream> {
  const streams = new Set<ServerResponse>();
  const holding: (() => void)[] = [];
  const json = (res: ServerResponse, id: unknown, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify({ jsonrpc: '2.0', id, ...body }));
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
      streams.add(res);
      res.once('close', () => streams.delete(res));
      return;
    }
    if (req.method === 'DELETE') return void res.writeHead(200).end();
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const m = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { id?: unknown; method?: string; params?: { uri?: string } };
    upstream.posted.push(`${m.method} ${m.params?.uri ?? ''}`.trim());
    if (m.id === undefined) return void res.writeHead(202).end();
    switch (m.method) {
      case 'initialize':
        return json(res, m.id, { result: { protocolVersion: '2025-11-25', capabilities: { resources: { subscribe: true } }, serverInfo: { name: 'subscribing', version: '1' } } }, { 'mcp-session-id': randomUUID() });
      case 'resources/list':
        return json(res, m.id, { result: { resources: uris.map((uri) => ({ uri, name: uri })) } });
      case 'resources/templates/list':
        return json(res, m.id, { result: { resourceTemplates: [] } });
      case 'resources/subscribe':
        return json(res, m.id, { result: {} });
      case 'resources/unsubscribe':
        if (upstream.unsubscribe === 'refuse') return json(res, m.id, { error: { code: -32603, message: 'no' } });
        if (upstream.unsubscribe === 'hold') return void holding.push(() => json(res, m.id, { result: {} }));
        return json(res, m.id, { result: {} });
      case 'ping':
        return json(res, m.id, { result: {} });
      default:
        return json(res, m.id, { error: { code: -32601, message: `Method not found: ${m.method}` } });
    }
  };
  const server = createServer((req, res) => void handle(req, res).catch(() => res.destroy()));
  const port = await listen(server);
  const upstream: SubscribingUpstream = {
    url: `http://127.0.0.1:${port}/mcp`,
    posted: [],
    unsubscribe: 'answer',
    release: () => holding.splice(0).forEach((answer) => answer()),
    held: () => holding.length,
    update: (uri) => {
      for (const res of streams) res.write(`event: message\ndata: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri } })}\n\n`);
    },
    close: async () => {
      upstream.release();
      for (const res of streams) res.destroy();
      await closeServer(server);
    },
  };
  return upstream;
}
