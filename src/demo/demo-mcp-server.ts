// The demo's MCP server: a small, unmodified-looking Streamable HTTP server
// (the SDK's McpServer, stateless) with tools that exercise the demo policy —
// read-only tools, tools that need mcp:write, and one that policy denies.
// It knows nothing about OAuth: the gateway in front of it does.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export interface DemoMcpServer {
  /** `http://127.0.0.1:<port>/mcp` */
  url: string;
  close(): Promise<void>;
}

const MAX_BODY_BYTES = 1024 * 1024;

interface Note {
  id: number;
  text: string;
}

function buildServer(notes: Map<number, Note>, nextId: () => number): McpServer {
  const server = new McpServer({ name: 'mcp-auth-gateway-demo', version: '1.0.0' });
  const text = (value: string) => ({ content: [{ type: 'text' as const, text: value }] });

  server.registerTool('echo', { description: 'Echoes a message back', inputSchema: { message: z.string() } }, ({ message }) => text(message));
  server.registerTool('add', { description: 'Adds two numbers', inputSchema: { a: z.number(), b: z.number() } }, ({ a, b }) => text(String(a + b)));
  server.registerTool('list_notes', { description: 'Lists the notes' }, () =>
    text(notes.size === 0 ? '(no notes)' : [...notes.values()].map((n) => `${n.id}: ${n.text}`).join('\n')),
  );
  server.registerTool('add_note', { description: 'Adds a note (needs mcp:write)', inputSchema: { text: z.string().max(1000) } }, ({ text: value }) => {
    const note = { id: nextId(), text: value };
    notes.set(note.id, note);
    return text(`added note ${note.id}`);
  });
  server.registerTool('delete_note', { description: 'Deletes a note (needs mcp:write)', inputSchema: { id: z.number().int() } }, ({ id }) =>
    text(notes.delete(id) ? `deleted note ${id}` : `no note ${id}`),
  );
  server.registerTool('shell', { description: 'Runs a shell command — the demo policy denies it to everyone', inputSchema: { command: z.string() } }, () =>
    text('this tool never runs behind the demo gateway'),
  );
  return server;
}

/** Starts the demo server on a free loopback port. */
export function startDemoMcpServer(): Promise<DemoMcpServer> {
  const notes = new Map<number, Note>();
  let lastId = 0;
  const nextId = () => ++lastId;
  return startStatelessMcpServer(() => buildServer(notes, nextId));
}

/** A stateless Streamable HTTP server at /mcp on a free loopback port: `build` makes the SDK server for each request. */
export async function startStatelessMcpServer(build: (req: IncomingMessage) => McpServer): Promise<DemoMcpServer> {
  const http: Server = createServer((req, res) => {
    void handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"internal error"}');
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (new URL(req.url ?? '/', 'http://localhost').pathname !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    if (req.method !== 'POST') {
      // Stateless: no GET stream, no session to DELETE.
      res.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    let body: unknown;
    try {
      body = await readJson(req);
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } }));
      return;
    }
    // One server and transport per request (the SDK's stateless pattern); the notes are shared.
    const server = build(req);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  await new Promise<void>((resolve, reject) => {
    http.once('error', reject);
    http.listen(0, '127.0.0.1', () => resolve());
  });
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) throw new Error('body too large');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? (JSON.parse(text) as unknown) : undefined;
}
