/**
 * A scripted legacy HTTP+SSE MCP server (2024-11-05 transport) for the faults a
 * real server does not commit on demand: an `endpoint` event naming another
 * origin, no `endpoint` event at all, a GET stream dropped mid-session, a request
 * never answered. It answers `initialize` like a server, `hang` never, a
 * `subscriptions/listen` with a frame naming it and then never, and any
 * other request with `{ echo: <method> }`, always on the session's GET stream.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import { closeServer, listen } from './net.js';

export interface LegacySseOptions {
  /** The `endpoint` event's data for a session (default: `/message?sessionId=<id>`); undefined: none is sent. */
  endpoint?: (sessionId: string, origin: string) => string | undefined;
  /** Refuses the GET with 401 and its own challenge, as a server refusing the gateway's credential does. */
  refuseGet?: boolean;
  /** Answers every POST with 500 (a server that takes no message). */
  refusePost?: boolean;
}

export interface LegacySseServer {
  /** `http://127.0.0.1:<port>/sse` */
  url: string;
  /** Every request: method, path + query, headers (lower-case), body. */
  requests: Array<{ method: string; url: string; headers: Record<string, string | string[] | undefined>; body: string }>;
  /** GET streams open now. */
  openStreams(): number;
  /** Cuts every open GET stream (the server's sessions end). */
  dropStreams(): void;
  close(): Promise<void>;
}

const INITIALIZE_RESULT = { protocolVersion: '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: 'scripted-legacy-sse', version: '1' } };

export async function startLegacySseServer(opts: LegacySseOptions = {}): Promise<LegacySseServer> {
  const streams = new Map<string, ServerResponse>();
  const requests: LegacySseServer['requests'] = [];
  const endpointOf = opts.endpoint ?? ((id: string) => `/message?sessionId=${id}`);
  let origin = '';
  const send = (res: ServerResponse, message: unknown) => res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`);

  const server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      const url = new URL(req.url ?? '/', origin);
      if (req.method === 'GET' && url.pathname === '/sse') {
        if (opts.refuseGet) return res.writeHead(401, { 'www-authenticate': 'Bearer resource_metadata="https://upstream-as.example/meta"' }).end();
        const id = randomUUID();
        res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
        res.flushHeaders();
        streams.set(id, res);
        res.on('close', () => streams.delete(id));
        const endpoint = endpointOf(id, origin);
        if (endpoint !== undefined) res.write(`event: endpoint\ndata: ${endpoint}\n\n`);
        return;
      }
      const stream = streams.get(url.searchParams.get('sessionId') ?? '');
      if (req.method !== 'POST' || stream === undefined) return res.writeHead(404).end('no such session');
      if (opts.refusePost) return res.writeHead(500).end('refused');
      res.writeHead(202).end('Accepted');
      const parsed = JSON.parse(body) as unknown;
      for (const message of (Array.isArray(parsed) ? parsed : [parsed]) as Array<{ id?: unknown; method?: string }>) {
        if (message.id === undefined || message.method === undefined || message.method === 'hang') continue;
        // 2026-07-28's listen: acknowledged as a frame naming it, then held open (never answered).
        if (message.method === 'subscriptions/listen') {
          send(stream, { jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { _meta: { 'io.modelcontextprotocol/subscriptionId': message.id } } });
          continue;
        }
        send(stream, { jsonrpc: '2.0', id: message.id, result: message.method === 'initialize' ? INITIALIZE_RESULT : { echo: message.method } });
      }
    });
  });
  const port = await listen(server);
  origin = `http://127.0.0.1:${port}`;
  return {
    url: `${origin}/sse`,
    requests,
    openStreams: () => streams.size,
    dropStreams: () => {
      for (const res of streams.values()) res.destroy();
    },
    close: () => {
      for (const res of streams.values()) res.destroy();
      return closeServer(server);
    },
  };
}
