/**
 * A small MCP server that speaks the stateless 2026-07-28 wire, written for the tests from the
 * specification (basic/transports/streamable-http, versioning, subscriptions, mrtr; SEP-2575,
 * SEP-2549, SEP-2243, SEP-2322, SEP-2164). It carries the tools, prompt and resources the
 * conformance suite's 2026-07-28 server scenarios call (server-stateless, http-header-validation,
 * http-custom-header-server-validation, caching, input-required-result-*, sep-2164-…, tools-call-*,
 * prompts-*, resources-*, completion-complete, json-schema-2020-12), so each can
 * judge it directly and again behind the gateway. Every POST is one JSON-RPC message; there are no
 * sessions, GET or DELETE are 405, an unknown method is 404 with -32601, an unsupported revision
 * 400 with -32022, and a request whose routing headers are missing or disagree with the body 400
 * with -32020. The parts: stateless-fixture/ (headers, resources, subscriptions, input rounds,
 * content tools and prompts).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { closeServer, listen } from './net.js';
import { completion, contentPrompt, CONTENT_PROMPTS, contentTool, CONTENT_TOOLS, PROGRESS_TOOL, streamProgress } from './stateless-fixture/content.js';
import { inputRequired, INPUT_REQUIRED_PROMPT, INPUT_REQUIRED_TOOLS } from './stateless-fixture/input-required.js';
import { checkRequestHeaders, CUSTOM_HEADER_TOOL } from './stateless-fixture/request-headers.js';
import { resourcesAnswer } from './stateless-fixture/resources.js';
import { complete, RpcError, text, type Json } from './stateless-fixture/rpc.js';
import { subscriptions, type ListenRecord } from './stateless-fixture/subscriptions.js';

const VERSION = '2026-07-28';
const META_VERSION = 'io.modelcontextprotocol/protocolVersion';
const META_CAPABILITIES = 'io.modelcontextprotocol/clientCapabilities';
const SERVER_INFO = { name: 'mag-stateless-fixture', version: '1.0.0' };
const CAPABILITIES = { tools: { listChanged: true }, prompts: { listChanged: true }, resources: { subscribe: true, listChanged: true }, completions: {} };
const DIAGNOSTIC_TOOLS = [
  'echo',
  'test_missing_capability',
  'test_streaming_elicitation',
  'test_logging_tool',
  'test_trigger_tool_change',
  'test_trigger_prompt_change',
  'test_trigger_resource_update',
  ...INPUT_REQUIRED_TOOLS,
];

export interface StatelessServerOptions {
  /**
   * More tools to list after the fixture's own; a call to one answers with its name. The fixture
   * compares no `Mcp-Param-*` header of these with the body (what the gateway does in front of it shows).
   */
  tools?: Json[];
  /** How often a quiet `subscriptions/listen` stream gets a `:` keep-alive comment, in ms (default 15 s; 0: never). */
  keepAliveMs?: number;
  /** List the fixture's own x-mcp-header tool, whose headers it validates (default true; false: an upstream that checks none). */
  customHeaderTool?: boolean;
  /** End every `subscriptions/listen` right after acknowledging it (a server, or a proxy in front of it, that recycles long-lived streams at once). */
  listenHangUp?: boolean;
}

export interface StatelessServer {
  /** `http://127.0.0.1:<port>/mcp` */
  url: string;
  /** Methods received, in order (a request refused for its headers or metadata too). */
  methods: string[];
  /** Every `subscriptions/listen` stream, with when it opened and closed. */
  listens: ListenRecord[];
  /** Ends every open `subscriptions/listen` stream, the server staying up (its clients may listen again). */
  endListens(): void;
  close(): Promise<void>;
}

export async function startStatelessServer(options: StatelessServerOptions = {}): Promise<StatelessServer> {
  const methods: string[] = [];
  const extraTools = options.tools ?? [];
  const extraNames = new Set(extraTools.map((tool) => tool.name));
  const listens = subscriptions(options.keepAliveMs ?? 15_000, options.listenHangUp);
  const rounds = inputRequired();
  const ownHeaderTool = options.customHeaderTool === false ? [] : [CUSTOM_HEADER_TOOL];

  function callTool(params: Json, meta: Json): Json {
    const capabilities = (meta[META_CAPABILITIES] ?? {}) as Json;
    const name = String(params.name);
    if (INPUT_REQUIRED_TOOLS.includes(name)) return rounds.callTool(name, params, capabilities);
    const content = contentTool(name, (params.arguments ?? {}) as Json);
    if (content) return content;
    switch (name) {
      case 'test_missing_capability':
        if (capabilities.sampling === undefined) throw new RpcError(400, -32021, 'Missing required client capability', { requiredCapabilities: { sampling: {} } });
        return text('sampling declared');
      case 'test_trigger_tool_change':
        listens.notifyListChanged('toolsListChanged', 'notifications/tools/list_changed');
        return text('tools changed');
      case 'test_trigger_prompt_change':
        listens.notifyListChanged('promptsListChanged', 'notifications/prompts/list_changed');
        return text('prompts changed');
      case 'test_trigger_resource_update':
        listens.notifyResourceUpdated(String((params.arguments as Json | undefined)?.uri));
        return text('resource updated');
      case 'test_custom_headers':
        return text(`region ${String((params.arguments as Json | undefined)?.region)}`);
      case 'echo':
      case 'test_streaming_elicitation':
      case 'test_logging_tool':
        // No log line without `_meta.logLevel`, and no request of the server's on the stream.
        return text(name);
      default:
        if (extraNames.has(name)) return text(name);
        throw new RpcError(400, -32602, `Unknown tool: ${name}`);
    }
  }

  function getPrompt(params: Json): Json {
    if (params.name === INPUT_REQUIRED_PROMPT) return rounds.getPrompt(params);
    const content = contentPrompt(String(params.name), (params.arguments ?? {}) as Json);
    if (content) return content;
    throw new RpcError(400, -32602, `Unknown prompt: ${String(params.name)}`);
  }

  function dispatch(method: string, params: Json, meta: Json): Json {
    switch (method) {
      case 'server/discover':
        return complete({ supportedVersions: [VERSION], capabilities: CAPABILITIES, _meta: { 'io.modelcontextprotocol/serverInfo': SERVER_INFO } }, true);
      case 'tools/list':
        return complete({ tools: [...DIAGNOSTIC_TOOLS.map((name) => ({ name, description: `Diagnostic tool ${name}`, inputSchema: { type: 'object' } })), ...CONTENT_TOOLS, ...ownHeaderTool, ...extraTools] }, true);
      case 'prompts/list':
        return complete({ prompts: [{ name: INPUT_REQUIRED_PROMPT, description: 'Asks for context before it answers' }, ...CONTENT_PROMPTS] }, true);
      case 'completion/complete':
        return completion(params);
      case 'tools/call':
        return callTool(params, meta);
      case 'prompts/get':
        return getPrompt(params);
      default: {
        const answer = resourcesAnswer(method, params);
        if (answer) return answer;
        // initialize, ping, logging/setLevel, resources/subscribe … are not part of this revision.
        throw new RpcError(404, -32601, `Method not found: ${method}`);
      }
    }
  }

  function handle(req: IncomingMessage, res: ServerResponse, body: Buffer): void {
    let message: Json;
    try {
      message = JSON.parse(body.toString('utf8')) as Json;
    } catch {
      return void json(res, 400, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } });
    }
    const id = message.id ?? null;
    const method = String(message.method);
    methods.push(method);
    const params = (message.params ?? {}) as Json;
    try {
      const meta = checkMeta(req, params);
      checkRequestHeaders(req, message);
      if (message.id === undefined) return void res.writeHead(202).end(); // a notification: accepted, nothing to answer
      if (method === 'subscriptions/listen') return listens.open(res, params, id);
      if (method === 'tools/call' && params.name === PROGRESS_TOOL) return streamProgress(res, id, params);
      json(res, 200, { jsonrpc: '2.0', id, result: dispatch(method, params, meta) });
    } catch (err) {
      if (!(err instanceof RpcError)) throw err;
      json(res, err.status, { jsonrpc: '2.0', id, error: { code: err.code, message: err.message, ...(err.data === undefined ? {} : { data: err.data }) } });
    }
  }

  const server = createServer((req, res) => {
    if (req.method !== 'POST') return void res.writeHead(405, { allow: 'POST' }).end();
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, res, Buffer.concat(chunks)));
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    methods,
    listens: listens.records,
    endListens: () => listens.endAll(),
    close: async () => {
      listens.endAll();
      await closeServer(server);
    },
  };
}

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

function json(res: ServerResponse, status: number, body: Json): void {
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}
