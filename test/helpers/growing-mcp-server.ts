/**
 * An MCP server (the TS SDK's McpServer, stateful Streamable HTTP, one
 * server per session) whose tool `grow` registers a new tool `grown_<n>`:
 * the SDK then sends `notifications/tools/list_changed` on the session's GET
 * stream, as a real server whose tools change does. Its tool `hang_up` ends
 * that GET stream (the SDK's closeStandaloneSSEStream, as a server or a proxy
 * in front of it does when it recycles long-lived connections). For the
 * aggregated route's list_changed tests; `atPort` starts it again where a
 * closed one was.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { closeServer, listen } from './net.js';

export async function startGrowingServer(atPort = 0): Promise<{ url: string; /** Sessions initialized so far. */ sessions(): number; close(): Promise<void> }> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const newSession = async () => {
    const server = new McpServer({ name: 'growing', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
    let grown = 0;
    server.tool('grow', 'adds a tool', async () => {
      const name = `grown_${++grown}`;
      server.tool(name, async () => ({ content: [{ type: 'text' as const, text: name }] }));
      return { content: [{ type: 'text' as const, text: name }] };
    });
    server.tool('hang_up', 'ends the GET stream of this session', async () => {
      transport.closeStandaloneSSEStream();
      return { content: [{ type: 'text' as const, text: 'hung up' }] };
    });
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({ sessionIdGenerator: randomUUID, onsessioninitialized: (id) => void transports.set(id, transport) });
    await server.connect(transport);
    return transport;
  };
  const http = createServer((req: IncomingMessage, res: ServerResponse) => {
    const id = req.headers['mcp-session-id'];
    const known = typeof id === 'string' ? transports.get(id) : undefined;
    if (typeof id === 'string' && !known) return void res.writeHead(404).end();
    void (known ? Promise.resolve(known) : newSession()).then((t) => t.handleRequest(req, res));
  });
  const port = await listen(http, atPort);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    sessions: () => transports.size,
    async close() {
      for (const t of transports.values()) await t.close();
      await closeServer(http);
    },
  };
}
