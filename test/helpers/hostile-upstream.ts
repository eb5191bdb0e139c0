/**
 * An HTTP/SSE MCP upstream written to misbehave every way it can (issue 20, "hostile servers as
 * test fixtures"), for running against a gateway while another principal's traffic must keep
 * getting 200 and the process must stay up. A POST's `tools/call` names the misbehaviour
 * (`params.name`, one of MISBEHAVIOURS); `params.arguments.taskId` / `eventId` name another
 * principal's ids for the answers that claim them. A GET opens an endless event stream. Anything
 * else is answered well (`tools/list`, `ping`, `tasks/list` with every task it was told of).
 *
 * For an aggregated route's streams (issue 22), `HostileOptions.get` makes its GET stream end at
 * once every time (`hang-up`), answer 404 every time (`forget`: the session forgotten, so the
 * gateway joins afresh), or carry resources/updated for URIs it does not serve (`updates`); with
 * an option it answers initialize as a server with a session does. The `progress-flood` tool
 * (not among MISBEHAVIOURS) sends `arguments.bytes` of progress on the call's token, then answers;
 * `answer-then-hold` sends a progress and the answer on the call's stream and never ends it.
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

/** Misdeeds on an aggregated route's streams (see above). */
export interface HostileOptions {
  get?: 'hang-up' | 'forget' | 'updates';
  /** `updates`: the URIs it says changed (read at every event, so a test may fill it later). */
  uris?: string[];
}

export interface HostileUpstream {
  url: string;
  /** GETs and initializes it was sent. */
  gets: number;
  initializes: number;
  /** Bytes of progress `progress-flood` wrote so far, and whether it answered. */
  flood: { bytes: number; answered: boolean };
  /** Answer streams `answer-then-hold` left open, and how many of them the gateway closed. */
  held: { answered: number; closed: number };
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

/** A GET as `options.get` says. */
function streamMisdeed(options: HostileOptions, res: ServerResponse): void {
  if (options.get === 'forget') return void res.writeHead(404).end();
  sse(res);
  if (options.get === 'hang-up') return void res.end();
  let n = 0;
  const timer = setInterval(() => {
    for (const uri of options.uris ?? []) res.write(event({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri } }));
    res.write(event({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: `hostile ${n++}` } }));
  }, 20);
  res.on('close', () => clearInterval(timer));
}

/** `progress-flood`: `bytes` of progress events on the call's token (read at the pace the reader takes them), then the answer. */
function floodProgress(message: Json, res: ServerResponse, upstream: HostileUpstream): void {
  const params = (message.params ?? {}) as Json;
  const token = ((params._meta ?? {}) as Json).progressToken ?? 'none';
  const total = Number(((params.arguments ?? {}) as Json).bytes ?? 1_048_576);
  sse(res);
  const more = () => {
    while (upstream.flood.bytes < total) {
      const chunk = event({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: upstream.flood.bytes, message: 'f'.repeat(1024) } });
      upstream.flood.bytes += chunk.length;
      if (!res.write(chunk)) return void res.once('drain', more);
    }
    upstream.flood.answered = true;
    res.end(event({ jsonrpc: '2.0', id: message.id, result: { content: [{ type: 'text', text: 'flooded' }] } }));
  };
  more();
}

/** `answer-then-hold`: a progress and the answer on the call's stream, which it then never ends. */
function answerThenHold(message: Json, res: ServerResponse, upstream: HostileUpstream): void {
  const token = (((message.params ?? {}) as Json)._meta as Json | undefined)?.progressToken ?? 'none';
  sse(res);
  res.write(event({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: token, progress: 1 } }));
  res.write(event({ jsonrpc: '2.0', id: message.id, result: { content: [{ type: 'text', text: 'answered, stream held open' }] } }));
  upstream.held.answered++;
  res.on('close', () => void upstream.held.closed++);
}

/** With options: initialize answered as by a server with sessions and the capabilities an aggregated route reads. */
function initializeAnswer(message: Json, res: ServerResponse): void {
  const result = { protocolVersion: '2025-06-18', capabilities: { tools: {}, logging: {}, resources: {} }, serverInfo: { name: 'hostile', version: '1' } };
  res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'hostile-session' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }));
}

export async function startHostileUpstream(options?: HostileOptions): Promise<HostileUpstream> {
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    res.on('error', () => undefined);
    const lastEventId = req.headers['last-event-id'];
    if (typeof lastEventId === 'string') upstream.resumedFrom.push(lastEventId);
    if (req.method === 'GET') upstream.gets++;
    if (req.method === 'GET') return options?.get === undefined ? endlessEvents(res, 'get') : streamMisdeed(options, res);
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
      if (message.method === 'initialize') upstream.initializes++;
      if (message.method === 'initialize' && options !== undefined) return initializeAnswer(message, res);
      if (message.method === 'tools/call' && params.name === 'progress-flood') return floodProgress(message, res, upstream);
      if (message.method === 'tools/call' && params.name === 'answer-then-hold') return answerThenHold(message, res, upstream);
      const kind = MISBEHAVIOURS.find((m) => m === params.name);
      if (message.method === 'tools/call' && kind) return misbehave(kind, message.id, (params.arguments ?? {}) as Json, res, upstream);
      answerWell(message, res, upstream);
    });
  });
  server.on('clientError', (_err, socket) => socket.destroy());
  await listen(server);
  const upstream: HostileUpstream = {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}/mcp`,
    gets: 0,
    initializes: 0,
    flood: { bytes: 0, answered: false },
    held: { answered: 0, closed: 0 },
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
