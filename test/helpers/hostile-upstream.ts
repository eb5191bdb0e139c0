/**
 * An HTTP/SSE MCP upstream written to misbehave every way it can (issue 20, "hostile servers as
 * test fixtures"), for running against a gateway while another principal's traffic must keep
 * getting 200 and the process must stay up. A POST's `tools/call` names the misbehaviour
 * (`params.name`, one of MISBEHAVIOURS); `params.arguments.taskId` / `eventId` name another
 * principal's ids for the answers that claim them. A GET opens an endless event stream. Anything
 * else is answered well (`tools/list`, `ping`, `tasks/list` with every task it was told of).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { closeServer, listen } from './net.js';

export const MISBEHAVIOURS = [
  'huge-json',
  'huge-event',
  'slow-drip',
  'malformed-json',
  'malformed-sse',
  'duplicate-answers',
  'unasked-ids',
  'foreign-session',
  'endless-events',
  'wrong-content-type',
  'false-gzip',
  'reset-mid-json',
  'reset-mid-stream',
  'foreign-task',
  'foreign-task-flat',
  'foreign-event-ids',
  'never-answers',
] as const;
export type Misbehaviour = (typeof MISBEHAVIOURS)[number];

export interface HostileUpstream {
  url: string;
  /** Task ids it was told of (every task it ever answered with), listed to anyone by `tasks/list`. */
  tasks: Set<string>;
  /** The `params.taskId` of every `tasks/*` request that reached it. */
  askedTaskIds: string[];
  /** Every `Last-Event-ID` that reached it. */
  resumedFrom: string[];
  close(): Promise<void>;
}

type Json = Record<string, unknown>;
const MiB = 1024 * 1024;

const sse = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
const event = (message: Json, id?: string) => `${id === undefined ? '' : `id: ${id}\n`}data: ${JSON.stringify(message)}\n\n`;
const json = (res: ServerResponse, body: unknown): void => void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));

function endlessEvents(res: ServerResponse, prefix: string): void {
  sse(res);
  let n = 0;
  const timer = setInterval(() => {
    // Backpressure ignored on purpose: it writes whether or not anyone reads.
    res.write(event({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `${prefix} ${n}` } }, `${prefix}-${n++}`));
  }, 5);
  res.on('close', () => clearInterval(timer));
}

function misbehave(kind: Misbehaviour, id: unknown, args: Json, res: ServerResponse, upstream: HostileUpstream): void {
  const result = (r: unknown) => ({ jsonrpc: '2.0', id, result: r });
  switch (kind) {
    case 'huge-json':
      // 24 MiB of one JSON answer, with a task in it so the gateway reads it.
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":{"task":{"taskId":"huge"},"content":[{"type":"text","text":"`);
      for (let i = 0; i < 24; i++) res.write('x'.repeat(MiB));
      return void res.end('"}]}}');
    case 'huge-event':
      // One event that never ends its line: 24 MiB without a newline.
      sse(res);
      res.write('data: {"padding":"');
      for (let i = 0; i < 24; i++) res.write('y'.repeat(MiB));
      return void res.end('"}\n\n');
    case 'slow-drip': {
      res.writeHead(200, { 'content-type': 'application/json' });
      const text = JSON.stringify(result({ content: [{ type: 'text', text: 'drip' }] }));
      let at = 0;
      const timer = setInterval(() => (at < text.length ? res.write(text[at++]!) : (clearInterval(timer), res.end())), 50);
      return void res.on('close', () => clearInterval(timer));
    }
    case 'malformed-json':
      return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"a","taskId":"b"}');
    case 'malformed-sse':
      sse(res);
      return void res.end('data: {"result":\r\rdata: }}}\n\nid\0: x\ndata: {"jsonrpc":"2.0","method":"notifications/tasks/status","params":{"taskId":\n\n:\n\nevent: \ndata\n\n');
    case 'duplicate-answers':
      sse(res);
      return void res.end(event(result({ content: [{ type: 'text', text: 'first' }] })) + event(result({ content: [{ type: 'text', text: 'second' }] })));
    case 'unasked-ids':
      sse(res);
      return void res.end(
        event({ jsonrpc: '2.0', id: 'never-asked', result: { task: { taskId: `unasked-${String(args.taskId ?? 'x')}` } } }) +
          event({ jsonrpc: '2.0', method: 'notifications/tasks/status', params: { taskId: String(args.taskId ?? 'x'), status: 'completed' } }) +
          event({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'for nobody' } }) +
          event(result({ content: [] })),
      );
    case 'foreign-session':
      // Another principal's session id handed out as this caller's.
      return void res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': String(args.sessionId ?? 'someone-elses') }).end(JSON.stringify(result({})));
    case 'endless-events':
      return endlessEvents(res, 'endless');
    case 'wrong-content-type':
      return void res.writeHead(200, { 'content-type': 'text/html' }).end(`<html>${JSON.stringify(result({ task: { taskId: 'html' } }))}</html>`);
    case 'false-gzip':
      return void res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end('not gzip at all');
    case 'reset-mid-json':
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '1000' });
      res.write('{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"cut');
      return void setTimeout(() => res.socket?.destroy(), 20);
    case 'reset-mid-stream':
      sse(res);
      res.write(event({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'half' } }, 'reset-1'));
      res.write('data: {"jsonrpc":"2.0","id":1,"res');
      return void setTimeout(() => res.socket?.destroy(), 20);
    case 'foreign-task':
      // Claims another principal's task as this caller's, in an event stream (2025-11-25 shape).
      upstream.tasks.add(String(args.taskId));
      sse(res);
      return void res.end(event(result({ task: { taskId: String(args.taskId), status: 'working', ttl: 60_000 } })));
    case 'foreign-task-flat':
      // The same in JSON, 2026-07-28's flat CreateTaskResult.
      upstream.tasks.add(String(args.taskId));
      return json(res, result({ resultType: 'task', taskId: String(args.taskId), status: 'working', ttlMs: 60_000 }));
    case 'foreign-event-ids':
      // Events carrying another principal's event id.
      sse(res);
      return void res.end(event({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'copied id' } }, String(args.eventId)) + event(result({ content: [] })));
    case 'never-answers':
      return; // the request is left hanging until the gateway gives up or the client goes
  }
}

function answerWell(message: Json, res: ServerResponse, upstream: HostileUpstream): void {
  const { id, method } = message;
  if (method === 'tasks/list') return json(res, { jsonrpc: '2.0', id, result: { tasks: [...upstream.tasks].map((taskId) => ({ taskId, status: 'working' })) } });
  if (method === 'tools/list') return json(res, { jsonrpc: '2.0', id, result: { tools: MISBEHAVIOURS.map((name) => ({ name, inputSchema: { type: 'object' } })) } });
  if (id === undefined) return void res.writeHead(202).end();
  return json(res, { jsonrpc: '2.0', id, result: {} });
}

export async function startHostileUpstream(): Promise<HostileUpstream> {
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    res.on('error', () => undefined);
    const lastEventId = req.headers['last-event-id'];
    if (typeof lastEventId === 'string') upstream.resumedFrom.push(lastEventId);
    if (req.method === 'GET') return endlessEvents(res, 'get');
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let message: Json;
      try {
        message = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json;
      } catch {
        return void res.writeHead(400).end();
      }
      const params = (message.params ?? {}) as Json;
      if (typeof message.method === 'string' && message.method.startsWith('tasks/') && typeof params.taskId === 'string') upstream.askedTaskIds.push(params.taskId);
      const kind = MISBEHAVIOURS.find((m) => m === params.name);
      if (message.method === 'tools/call' && kind) return misbehave(kind, message.id, (params.arguments ?? {}) as Json, res, upstream);
      answerWell(message, res, upstream);
    });
  });
  server.on('clientError', (_err, socket) => socket.destroy());
  await listen(server);
  const upstream: HostileUpstream = {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`,
    tasks: new Set(),
    askedTaskIds: [],
    resumedFrom: [],
    close: async () => {
      server.closeAllConnections();
      await closeServer(server);
    },
  };
  return upstream;
}
