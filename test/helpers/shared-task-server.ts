/**
 * A stateless MCP server of the real TypeScript SDK (McpServer, experimental tasks, 2025-11-25)
 * with one task store for every request, as the SDK's own stateless examples keep it: whoever
 * names a task id gets it, and tasks/list lists every caller's tasks. The shape whose tasks a
 * gateway must bind to their principal (DESIGN.md §8.3). Tool `research` (`topic`, `finish`:
 * false leaves the task working). `?sse` in the URL: answers as event streams.
 */
import { createServer, type Server } from 'node:http';
import { z } from 'zod';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import { listen } from './net.js';

/** A stateless SDK server: a new McpServer per request, one task store for all (the SDK's stateless pattern). */
export async function startSharedTaskServer(): Promise<Server> {
  const taskStore = new InMemoryTaskStore();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const mcp = new McpServer({ name: 'tasks', version: '1' }, { capabilities: { tools: {}, tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } }, taskStore });
        mcp.experimental.tasks.registerToolTask(
          'research',
          { inputSchema: { topic: z.string(), finish: z.boolean().optional() }, execution: { taskSupport: 'optional' } },
          {
            createTask: async ({ topic, finish }, extra) => {
              const task = await extra.taskStore.createTask({ ttl: 60_000 });
              // `finish: false` leaves the task working (so a cancel would take effect).
              if (finish !== false) await extra.taskStore.storeTaskResult(task.taskId, 'completed', { content: [{ type: 'text', text: `findings on ${topic}` }] });
              return { task };
            },
            getTask: async (_args, extra) => (await extra.taskStore.getTask(extra.taskId))!,
            getTaskResult: async (_args, extra) => (await extra.taskStore.getTaskResult(extra.taskId)) as never,
          },
        );
        const sse = (req.url ?? '').includes('sse');
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !sse });
        await mcp.connect(transport);
        await transport.handleRequest(req, res, chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : undefined);
      })().catch(() => res.writeHead(500).end());
    });
  });
  await listen(server);
  return server;
}
