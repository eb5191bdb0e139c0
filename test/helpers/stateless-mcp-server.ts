/**
 * A small MCP server that speaks the stateless 2026-07-28 wire, written for the tests from the
 * specification (basic/transports/streamable-http, versioning, subscriptions; SEP-2575, SEP-2549):
 * no MCP SDK in node_modules speaks it (@modelcontextprotocol/sdk 1.32 and the reference servers
 * are handshake-era). It carries the diagnostic tools the conformance suite's `server-stateless`
 * scenario calls (test_missing_capability, test_streaming_elicitation, test_logging_tool,
 * test_trigger_tool_change, test_trigger_prompt_change) so that scenario can judge a server behind
 * the gateway. Every POST is one JSON-RPC request; there are no sessions, no GET and no DELETE.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listen } from './net.js';

const VERSION = '2026-07-28';
const META_VERSION = 'io.modelcontextprotocol/protocolVersion';
const META_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
const META_SUBSCRIPTION = 'io.modelcontextprotocol/subscriptionId';
const SERVER_INFO = { name: 'mag-stateless-fixture', version: '1.0.0' };
const CAPABILITIES = { tools: { listChanged: true }, prompts: { listChanged: true } };
const TOOL_NAMES = ['echo', 'test_missing_capability', 'test_streaming_elicitation', 'test_logging_tool', 'test_trigger_tool_change', 'test_trigger_prompt_change'];

type Json = Record<string, unknown>;
type Filter = { toolsListChanged?: boolean; promptsListChanged?: boolean };

interface Listener {
  res: ServerResponse;
  id: string;
  filter: Filter;
}

export interface StatelessServerOptions {
  /**
   * More tools to list after the diagnostic ones; a call to one answers with its name. The fixture
   * compares no `Mcp-Param-*` header with the body (what the gateway does in front of it shows).
   */
  tools?: Json[];
}

export interface StatelessServer {
  /** `http://127.0.0.1:<port>/mcp` */
  url: string;
  /** Methods received, in order. */
  methods: string[];
  close(): Promise<void>;
}

class RpcError extends Error {
  constructor(readonly status: number, readonly code: number, message: string, readonly data?: unknown) {
    super(message);
  }
}

const complete = (result: Json, cacheable = false): Json => ({ ...result, resultType: 'complete', ...(cacheable ? { ttlMs: 0, cacheScope: 'public' } : {}) });

export async function startStatelessServer(options: StatelessServerOptions = {}): Promise<StatelessServer> {
  const methods: string[] = [];
  const extraTools = options.tools ?? [];
  const extraNames = new Set(extraTools.map((tool) => tool.name));
  const listeners = new Set<Listener>();

  const notifyListeners = (kind: keyof Filter, method: string) => {
    for (const l of listeners) {
      if (l.filter[kind]) l.res.write(sse({ jsonrpc: '2.0', method, params: { _meta: { [META_SUBSCRIPTION]: l.id } } }));
    }
  };

  /** Validates the per-request metadata against the header, in the order the transport specifies. */
  function checkMeta(req: IncomingMessage, params: Json): Json {
    const header = req.headers['mcp-protocol-version'];
    if (typeof header !== 'string') throw new RpcError(400, -32020, 'Missing MCP-Protocol-Version header');
    const meta = params._meta as Json | undefined;
    const missing = [META_VERSION, META_CAPABILITIES].filter((k) => meta?.[k] === undefined);
    if (missing.length > 0) throw new RpcError(400, -32602, `Invalid params: missing _meta keys: ${missing.join(', ')}`);
    if (meta![META_VERSION] !== header) throw new RpcError(400, -32020, 'MCP-Protocol-Version header does not match _meta');
    if (header !== VERSION) throw new RpcError(400, -32022, 'Unsupported protocol version', { supported: [VERSION], requested: header });
    return meta!;
  }

  function callTool(params: Json, meta: Json): Json {
    const capabilities = (meta[META_CAPABILITIES] ?? {}) as Json;
    switch (params.name) {
      case 'test_missing_capability':
        if (capabilities.sampling === undefined) throw new RpcError(400, -32021, 'Missing required client capability', { requiredCapabilities: { sampling: {} } });
        return complete({ content: [{ type: 'text', text: 'sampling declared' }] });
      case 'test_trigger_tool_change':
        notifyListeners('toolsListChanged', 'notifications/tools/list_changed');
        return complete({ content: [{ type: 'text', text: 'tools changed' }] });
      case 'test_trigger_prompt_change':
        notifyListeners('promptsListChanged', 'notifications/prompts/list_changed');
        return complete({ content: [{ type: 'text', text: 'prompts changed' }] });
      case 'echo':
      case 'test_streaming_elicitation':
      case 'test_logging_tool':
        // No log line without `_meta.logLevel`, and no request of the server's on the stream.
        return complete({ content: [{ type: 'text', text: String(params.name) }] });
      default:
        if (extraNames.has(params.name)) return complete({ content: [{ type: 'text', text: String(params.name) }] });
        throw new RpcError(400, -32602, `Unknown tool: ${String(params.name)}`);
    }
  }

  function dispatch(method: string, params: Json, meta: Json): Json {
    switch (method) {
      case 'server/discover':
        return complete({ supportedVersions: [VERSION], capabilities: CAPABILITIES, _meta: { 'io.modelcontextprotocol/serverInfo': SERVER_INFO } }, true);
      case 'tools/list':
        return complete({ tools: [...TOOL_NAMES.map((name) => ({ name, inputSchema: { type: 'object' } })), ...extraTools] }, true);
      case 'prompts/list':
        return complete({ prompts: [] }, true);
      case 'tools/call':
        return callTool(params, meta);
      default:
        // initialize, ping, logging/setLevel, resources/subscribe … are not part of this revision.
        throw new RpcError(404, -32601, `Method not found: ${method}`);
    }
  }

  /** `subscriptions/listen`: an event stream that opens with the acknowledgement and stays open. */
  function openSubscription(res: ServerResponse, params: Json): void {
    const requested = (params.notifications ?? {}) as Filter;
    const filter: Filter = { toolsListChanged: requested.toolsListChanged === true, promptsListChanged: requested.promptsListChanged === true };
    const listener: Listener = { res, id: randomUUID(), filter };
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(sse({ jsonrpc: '2.0', method: 'notifications/subscriptions/acknowledged', params: { notifications: filter, _meta: { [META_SUBSCRIPTION]: listener.id } } }));
    listeners.add(listener);
    res.on('close', () => listeners.delete(listener));
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
        return void json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
      }
      const id = message.id ?? null;
      const method = String(message.method);
      methods.push(method);
      const params = (message.params ?? {}) as Json;
      try {
        const meta = checkMeta(req, params);
        if (method === 'subscriptions/listen') return openSubscription(res, params);
        json(res, 200, { jsonrpc: '2.0', id, result: dispatch(method, params, meta) });
      } catch (err) {
        if (!(err instanceof RpcError)) throw err;
        json(res, err.status, { jsonrpc: '2.0', id, error: { code: err.code, message: err.message, ...(err.data === undefined ? {} : { data: err.data }) } });
      }
    });
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    methods,
    close: async () => {
      for (const l of listeners) l.res.end();
      await closeServer(server);
    },
  };
}

const sse = (message: Json) => `event: message\ndata: ${JSON.stringify(message)}\n\n`;

function json(res: ServerResponse, status: number, body: Json): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
