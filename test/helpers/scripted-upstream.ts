/**
 * A tiny Streamable-HTTP-shaped upstream whose timing tests control: POST
 * answers the JSON-RPC request (after `x-test-delay-ms`), `initialize` issues
 * an `Mcp-Session-Id` when sessions are on, GET opens an event stream that
 * ticks until the connection goes. `kill` drops every socket at once, as a
 * crashed process would; `restart` listens again on the same port.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { listen } from './net.js';

export interface ScriptedUpstreamOptions {
  /** Issue a session id on `initialize` and refuse unknown ones (404), as stateful MCP servers do. */
  sessions?: boolean;
  /** Event-stream tick interval (default 100 ms). */
  tickMs?: number;
  /** Port to listen on (default: any free port). */
  port?: number;
}

export interface ScriptedUpstream {
  /** `http://127.0.0.1:<port>/mcp` */
  url: string;
  port: number;
  /** JSON-RPC methods received, in order. */
  methods: string[];
  /** Headers of every POST received, in the same order. */
  headers: IncomingHttpHeaders[];
  /** Open event streams right now. */
  openStreams(): number;
  kill(): Promise<void>;
  restart(): Promise<void>;
  close(): Promise<void>;
}

export async function startScriptedUpstream(options: ScriptedUpstreamOptions = {}): Promise<ScriptedUpstream> {
  const tickMs = options.tickMs ?? 100;
  const issued = new Set<string>();
  const methods: string[] = [];
  const headers: IncomingHttpHeaders[] = [];
  const sockets = new Set<Socket>();
  const streams = new Set<ServerResponse>();

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const sessionId = req.headers['mcp-session-id'];
    if (options.sessions && typeof sessionId === 'string' && !issued.has(sessionId)) {
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","error":{"code":-32001,"message":"Session not found"},"id":null}');
      return;
    }
    if (req.method === 'GET') return openStream(res);
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const message = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as { id?: unknown; method?: string };
    methods.push(message.method ?? '');
    headers.push(req.headers);
    const delay = Number(req.headers['x-test-delay-ms'] ?? 0);
    if (delay > 0) await new Promise((r) => setTimeout(r, delay));
    if (res.destroyed) return;
    const answer: Record<string, string> = { 'content-type': 'application/json' };
    if (options.sessions && message.method === 'initialize') {
      const id = randomUUID();
      issued.add(id);
      answer['mcp-session-id'] = id;
    }
    res.writeHead(200, answer).end(JSON.stringify({ jsonrpc: '2.0', id: message.id ?? null, result: { method: message.method, delayed: delay } }));
  };

  const openStream = (res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.flushHeaders();
    streams.add(res);
    let n = 0;
    const timer = setInterval(() => res.write(`id: ${++n}\nevent: message\ndata: {"jsonrpc":"2.0","method":"notifications/tick","params":{"n":${n}}}\n\n`), tickMs);
    res.once('close', () => {
      clearInterval(timer);
      streams.delete(res);
    });
  };

  let server = createServer();
  let port = options.port ?? 0;
  const start = async () => {
    server = createServer((req, res) => void handle(req, res).catch(() => res.destroy()));
    server.on('connection', (socket: Socket) => {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
    });
    port = await listen(server, port);
  };
  const kill = async () => {
    if (!server.listening) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    await closed;
  };
  await start();

  return {
    url: `http://127.0.0.1:${port}/mcp`,
    port,
    methods,
    headers,
    openStreams: () => streams.size,
    kill,
    restart: start,
    close: kill,
  };
}
