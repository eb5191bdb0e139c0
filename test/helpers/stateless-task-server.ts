/**
 * A small stateless 2026-07-28 MCP server with the tasks extension (io.modelcontextprotocol/tasks,
 * SEP-2663), written for the tests from the conformance suite's scenario descriptions: no server
 * in node_modules speaks it. One task store serves every request, as a stateless server's must:
 * whoever names a task id gets it, which is what the gateway's task binding guards (K67).
 * Fixture tools: `greet` (sync), `slow_compute` (a task: `seconds` then a result; cancelled when
 * cancelled while working), `failing_job` (task support required: a tool error after ~1 s).
 * `tasks/get`, `tasks/update`, `tasks/cancel`; `tasks/result` and `tasks/list` are gone (-32601);
 * an unknown task id is -32602; the tasks methods without the extension negotiated are -32021.
 * `Mcp-Method` and `Mcp-Name` must match the body (-32020), `Mcp-Name` being the task id on
 * `tasks/*`.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listen } from './net.js';

const VERSION = '2026-07-28';
const TASKS = 'io.modelcontextprotocol/tasks';
const META_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
type Json = Record<string, unknown>;

interface Task {
  taskId: string;
  status: 'working' | 'completed' | 'failed' | 'cancelled';
  createdAt: string;
  lastUpdatedAt: string;
  ttlMs: number;
  pollIntervalMs: number;
  result?: Json;
  timer?: NodeJS.Timeout;
}

export interface StatelessTaskServer {
  /** `http://127.0.0.1:<port>/mcp` */
  url: string;
  /** Every task id a `tasks/*` request named, with its `Mcp-Name` header, in order. */
  named: { method: string; taskId: unknown; mcpName?: string }[];
  close(): Promise<void>;
}

class RpcError extends Error {
  constructor(readonly status: number, readonly code: number, message: string, readonly data?: unknown) {
    super(message);
  }
}

const TOOLS = [
  { name: 'greet', inputSchema: { type: 'object', properties: { name: { type: 'string' } } }, execution: { taskSupport: 'forbidden' } },
  { name: 'slow_compute', inputSchema: { type: 'object', properties: { seconds: { type: 'number' }, label: { type: 'string' } } }, execution: { taskSupport: 'optional' } },
  { name: 'failing_job', inputSchema: { type: 'object' }, execution: { taskSupport: 'required' } },
];

export async function startStatelessTaskServer(): Promise<StatelessTaskServer> {
  const tasks = new Map<string, Task>();
  const named: StatelessTaskServer['named'] = [];

  const settle = (task: Task, status: Task['status'], result?: Json) => {
    if (task.status !== 'working') return;
    task.status = status;
    task.lastUpdatedAt = new Date().toISOString();
    if (result) task.result = result;
  };

  function createTask(ms: number, finish: (task: Task) => void): Json {
    const now = new Date().toISOString();
    const task: Task = { taskId: randomUUID(), status: 'working', createdAt: now, lastUpdatedAt: now, ttlMs: 60_000, pollIntervalMs: 100 };
    tasks.set(task.taskId, task);
    task.timer = setTimeout(() => finish(task), ms);
    return { resultType: 'task', ...envelope(task) };
  }

  function callTool(params: Json, withTasks: boolean): Json {
    const args = (params.arguments ?? {}) as Json;
    const computed = () => ({ content: [{ type: 'text', text: `computed ${String(args.label ?? '')}` }] });
    switch (params.name) {
      case 'greet':
        return { resultType: 'complete', content: [{ type: 'text', text: `Hello, ${String(args.name ?? '')}!` }] };
      case 'slow_compute': {
        const seconds = typeof args.seconds === 'number' ? args.seconds : 1;
        if (!withTasks || seconds === 0) return { resultType: 'complete', ...computed() };
        return createTask(seconds * 1000, (task) => settle(task, 'completed', computed()));
      }
      case 'failing_job':
        if (!withTasks) throw new RpcError(400, -32021, 'Missing required client capability', { requiredCapabilities: { extensions: { [TASKS]: {} } } });
        return createTask(1000, (task) => settle(task, 'completed', { content: [{ type: 'text', text: 'the job failed' }], isError: true }));
      default:
        throw new RpcError(400, -32602, `Unknown tool: ${String(params.name)}`);
    }
  }

  function taskOf(params: Json, withTasks: boolean): Task {
    if (!withTasks) throw new RpcError(400, -32021, 'Missing required client capability', { requiredCapabilities: { extensions: { [TASKS]: {} } } });
    const task = typeof params.taskId === 'string' ? tasks.get(params.taskId) : undefined;
    if (!task) throw new RpcError(400, -32602, `Task not found: ${String(params.taskId)}`);
    return task;
  }

  function dispatch(method: string, params: Json, withTasks: boolean): Json {
    switch (method) {
      case 'server/discover':
        return { resultType: 'complete', ttlMs: 0, cacheScope: 'public', supportedVersions: [VERSION], capabilities: { tools: {}, extensions: { [TASKS]: {} } }, _meta: { 'io.modelcontextprotocol/serverInfo': { name: 'mag-task-fixture', version: '1.0.0' } } };
      case 'tools/list':
        return { resultType: 'complete', ttlMs: 0, cacheScope: 'public', tools: TOOLS };
      case 'tools/call':
        return callTool(params, withTasks);
      case 'tasks/get': {
        const task = taskOf(params, withTasks);
        return { resultType: 'complete', ...envelope(task), ...(task.result && { result: task.result }) };
      }
      case 'tasks/cancel': {
        const task = taskOf(params, withTasks);
        clearTimeout(task.timer);
        settle(task, 'cancelled');
        return { resultType: 'complete' };
      }
      case 'tasks/update':
        taskOf(params, withTasks);
        return { resultType: 'complete' };
      default:
        throw new RpcError(404, -32601, `Method not found: ${method}`);
    }
  }

  function checkHeaders(req: IncomingMessage, method: string, params: Json): void {
    const header = req.headers['mcp-method'];
    if (header !== undefined && header !== method) throw new RpcError(400, -32020, 'Mcp-Method header does not match the body');
    const name = req.headers['mcp-name'];
    if (name === undefined) return;
    const body = method.startsWith('tasks/') ? params.taskId : params.name;
    if (name !== body) throw new RpcError(400, -32020, 'Mcp-Name header does not match the body');
  }

  const server = createServer((req, res) => {
    if (req.method !== 'POST') return void res.writeHead(405, { allow: 'POST' }).end();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let message: Json;
      try {
        message = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json;
      } catch {
        return json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
      }
      const id = message.id ?? null;
      const method = String(message.method);
      const params = (message.params ?? {}) as Json;
      if (method.startsWith('tasks/')) named.push({ method, taskId: params.taskId, mcpName: req.headers['mcp-name'] as string | undefined });
      const capabilities = (((params._meta ?? {}) as Json)[META_CAPABILITIES] ?? {}) as Json;
      const withTasks = ((capabilities.extensions ?? {}) as Json)[TASKS] !== undefined;
      try {
        checkHeaders(req, method, params);
        if (message.id === undefined) return void res.writeHead(202).end();
        json(res, 200, { jsonrpc: '2.0', id, result: dispatch(method, params, withTasks) });
      } catch (err) {
        if (!(err instanceof RpcError)) throw err;
        json(res, err.status, { jsonrpc: '2.0', id, error: { code: err.code, message: err.message, ...(err.data === undefined ? {} : { data: err.data }) } });
      }
    });
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    named,
    close: async () => {
      for (const task of tasks.values()) clearTimeout(task.timer);
      await closeServer(server);
    },
  };
}

function envelope(task: Task): Json {
  const { taskId, status, createdAt, lastUpdatedAt, ttlMs, pollIntervalMs } = task;
  return { taskId, status, createdAt, lastUpdatedAt, ttlMs, pollIntervalMs };
}

function json(res: ServerResponse, status: number, body: Json): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
