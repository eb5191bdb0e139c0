// Shared set-up of the policy integration tests: the real gateway (in
// process, its audit lines captured), route files pointing at oidc-provider,
// a stateless MCP server built with the SDK that answers in JSON, and a raw
// Streamable HTTP session for requests the SDK client would not send.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { AuditEvent } from '../../src/observability/audit.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { originYaml } from '../helpers/gateway-config.js';
import { closeServer, listen } from '../helpers/net.js';
import type { OidcProviderHandle } from '../helpers/oidc-provider.js';

export interface PolicyGateway extends TestGateway {
  audit: AuditEvent[];
}

/** The gateway from `files` (name → YAML object or text), with audit events kept in memory. */
export async function startPolicyGateway(files: Record<string, unknown>): Promise<PolicyGateway> {
  const audit: AuditEvent[] = [];
  const gateway = await startTestGateway(files, {}, { audit: { enabled: true, record: (event) => audit.push(structuredClone(event)) } });
  return Object.assign(gateway, { audit });
}

export function gatewayFile(port: number): Record<string, unknown> {
  return originYaml({ port, url: `http://127.0.0.1:${port}` });
}

/** A route whose tokens come from the oidc-provider stand-in. */
export function routeFile(oidc: OidcProviderHandle, route: Record<string, unknown>): Record<string, unknown> {
  return {
    authorization_servers: [oidc.issuer],
    token: { jwt: { issuer: oidc.issuer, jwks_uri: oidc.jwksUri, algorithms: ['ES256'] } },
    ...route,
  };
}

export interface JsonMcpServer {
  url: string;
  /** Every JSON-RPC method received. */
  methods: string[];
  close(): Promise<void>;
}

/** A stateless MCP server (the SDK's own) that answers with application/json, never SSE. */
export async function startJsonMcpServer(toolNames: string[]): Promise<JsonMcpServer> {
  const methods: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body: unknown = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
      for (const m of Array.isArray(body) ? body : [body]) if (m && typeof m === 'object' && 'method' in m) methods.push(String(m.method));
      const mcp = new McpServer({ name: 'json-test-server', version: '1.0.0' });
      for (const name of toolNames) mcp.registerTool(name, { description: `the ${name} tool` }, async () => ({ content: [{ type: 'text', text: `${name} done` }] }));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on('close', () => void transport.close().then(() => mcp.close()));
      await mcp.connect(transport);
      await transport.handleRequest(req, res, body);
    })().catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(500).end(String(err));
    });
  });
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}/mcp`, methods, close: () => closeServer(server) };
}

export const MCP_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

export interface RawSession {
  /** POSTs one JSON-RPC payload (object, array or raw text) with the session and token. */
  post(payload: unknown, headers?: Record<string, string>): Promise<Response>;
  sessionId: string | undefined;
}

/** initialize + notifications/initialized over plain fetch, then a POST helper bound to that session. */
export async function openRawSession(url: string, token: string): Promise<RawSession> {
  const auth = { authorization: `Bearer ${token}` };
  const init = await fetch(url, {
    method: 'POST',
    headers: { ...MCP_HEADERS, ...auth },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'policy-test', version: '1' } },
    }),
  });
  if (init.status !== 200) throw new Error(`initialize: ${init.status} ${await init.text()}`);
  await init.text();
  const sessionId = init.headers.get('mcp-session-id') ?? undefined;
  const session: Record<string, string> = sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' } : {};
  const post = (payload: unknown, headers: Record<string, string> = {}) =>
    fetch(url, {
      method: 'POST',
      headers: { ...MCP_HEADERS, ...auth, ...session, ...headers },
      body: typeof payload === 'string' ? payload : JSON.stringify(payload),
    });
  const initialized = await post({ jsonrpc: '2.0', method: 'notifications/initialized' });
  await initialized.text();
  return { post, sessionId };
}

/** The JSON-RPC messages of a response, whether it came as JSON or as an event stream. */
export async function messagesOf(res: Response): Promise<Array<Record<string, unknown>>> {
  const text = await res.text();
  if (!(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    const value = JSON.parse(text) as unknown;
    return (Array.isArray(value) ? value : [value]) as Array<Record<string, unknown>>;
  }
  return text
    .split(/\n\n/)
    .map((event) => event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n'))
    .filter(Boolean)
    .map((data) => JSON.parse(data) as Record<string, unknown>);
}

export const toolCall = (id: number, name: string, args: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args },
});
