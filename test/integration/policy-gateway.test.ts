/**
 * Per-tool rules through the real gateway: oidc-provider tokens with different
 * scopes and clients, the unmodified everything server behind a recording hop
 * (what the upstream actually received), and a JSON-answering SDK server.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { connectWithToken } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { mintClientCredentialsToken, startOidcProvider, type OidcProviderHandle } from '../helpers/oidc-provider.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';
import {
  MCP_HEADERS,
  gatewayFile,
  messagesOf,
  openRawSession,
  routeFile,
  startJsonMcpServer,
  startPolicyGateway,
  toolCall,
  type JsonMcpServer,
  type PolicyGateway,
  type RawSession,
} from './policy-harness.js';

const CI_CLIENT = { client_id: 'ci-pipeline', client_secret: 'ci-pipeline-secret-0123456789abcdef' };

let everything: UpstreamHandle;
let hop: RecordingHop;
let jsonServer: JsonMcpServer;
let oidc: OidcProviderHandle;
let gateway: PolicyGateway;
let url: string;
let jsonUrl: string;
const tokens: Record<'read' | 'write' | 'admin' | 'ci', string> = { read: '', write: '', admin: '', ci: '' };

beforeAll(async () => {
  everything = await startEverythingServer();
  hop = await startRecordingHop(everything.url);
  jsonServer = await startJsonMcpServer(['echo', 'delete_repo', 'shell', 'deploy_prod']);
  oidc = await startOidcProvider({
    resources: [],
    scopes: ['mcp:read', 'mcp:write', 'mcp:admin'],
    clients: [{ ...CI_CLIENT, grant_types: ['client_credentials'], response_types: [], redirect_uris: [], token_endpoint_auth_method: 'client_secret_basic' }],
  });
  const port = await freePort();
  url = `http://127.0.0.1:${port}/everything/mcp`;
  jsonUrl = `http://127.0.0.1:${port}/json/mcp`;
  oidc.resources.add(url).add(jsonUrl);
  gateway = await startPolicyGateway({
    'gateway.yaml': gatewayFile(port),
    'everything.yaml': routeFile(oidc, {
      path: '/everything/mcp',
      upstream: hop.url,
      scopes_supported: ['mcp:read', 'mcp:write', 'mcp:admin'],
      required_scopes: ['mcp:read'],
      rules: [
        { match: { method: 'tools/call', tool: 'trigger-*' }, require_scopes: ['mcp:write'] },
        { match: { method: 'tools/call', tool: 'toggle-*' }, require_scopes: ['mcp:write'] },
        { match: { method: 'tools/call', tool: 'get-env' }, require_scopes: ['mcp:admin'] },
        { match: { method: 'tools/call', tool: 'gzip-file-as-resource' }, deny: true },
        { match: { method: 'tools/call', tool: 'get-sum' }, allow_clients: ['ci-pipeline'] },
        { match: { method: 'resources/read', uri: 'demo://resource/static/document/**' }, require_scopes: ['mcp:admin'] },
        { match: { method: 'prompts/get', prompt: 'args-*' }, deny: true },
      ],
      filter_tools_list: true,
    }),
    'json.yaml': routeFile(oidc, {
      path: '/json/mcp',
      upstream: jsonServer.url,
      required_scopes: ['mcp:read'],
      rules: [
        { match: { method: 'tools/call', tool: 'delete_*' }, require_scopes: ['mcp:write'] },
        { match: { method: 'tools/call', tool: 'shell' }, deny: true },
        { match: { method: 'tools/call', tool: 'deploy_*' }, allow_clients: ['ci-pipeline'] },
      ],
      filter_tools_list: true,
    }),
  });
  const mint = (scope: string, resource = url) => oidc.mintAccessToken({ resource, scope });
  tokens.read = await mint('mcp:read');
  tokens.write = await mint('mcp:read mcp:write');
  tokens.admin = await mint('mcp:read mcp:write mcp:admin');
  tokens.ci = await mintClientCredentialsToken({ tokenEndpoint: oidc.tokenEndpoint, confidentialClient: CI_CLIENT }, { resource: url, scope: 'mcp:read' });
});

afterAll(async () => {
  await gateway?.stop();
  await Promise.all([hop?.close(), oidc?.close(), jsonServer?.close()]);
  await everything?.close();
});

/** Hop requests whose body mentions `text` (what reached the upstream). */
const upstreamSaw = (text: string) => hop.requests.filter((r) => r.body.toString().includes(text)).length;

function challengeParams(res: Response): Record<string, string> {
  const header = res.headers.get('www-authenticate') ?? '';
  expect(header.startsWith('Bearer ')).toBe(true);
  return Object.fromEntries([...header.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]));
}

const resourceMetadata = () => `${new URL(url).origin}/.well-known/oauth-protected-resource/everything/mcp`;

describe('tools/call rules', () => {
  let read: RawSession;
  beforeAll(async () => {
    read = await openRawSession(url, tokens.read);
  });

  it('passes an allowed call to the upstream and answers it', async () => {
    const client: Client = await connectWithToken(url, tokens.read);
    try {
      const result = await client.callTool({ name: 'echo', arguments: { message: 'policy says yes' } });
      expect(JSON.stringify(result.content)).toContain('policy says yes');
      expect(upstreamSaw('policy says yes')).toBe(1);
    } finally {
      await client.close();
    }
  });

  it('refuses a write tool to a read-only token with the step-up challenge; the upstream sees nothing', async () => {
    const res = await read.post(toolCall(11, 'toggle-simulated-logging'));
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual({ error: 'insufficient_scope', error_description: 'The token does not grant the scopes this operation requires' });
    expect(challengeParams(res)).toEqual({
      error: 'insufficient_scope',
      scope: 'mcp:read mcp:write',
      error_description: 'The token does not grant the scopes this operation requires',
      resource_metadata: resourceMetadata(),
    });
    expect(upstreamSaw('toggle-simulated-logging')).toBe(0);

    const audit = gateway.audit.filter((e) => e.name === 'toggle-simulated-logging');
    expect(audit).toEqual([
      expect.objectContaining({
        event: 'decision',
        route: '/everything/mcp',
        sub: 'harness-confidential',
        client_id: 'harness-confidential',
        method: 'tools/call',
        name: 'toggle-simulated-logging',
        decision: 'deny',
        reason: 'scope',
        rule: `${gateway.dir}/everything.yaml:${ruleLine(1)}`,
      }),
    ]);
  });

  it('lets the same call through with the wider token', async () => {
    const write = await openRawSession(url, tokens.write);
    const res = await write.post(toolCall(12, 'toggle-simulated-logging'));
    expect(res.status).toBe(200);
    const [answer] = (await messagesOf(res)).filter((m) => m.id === 12);
    expect(answer?.result).toBeDefined();
    expect(upstreamSaw('toggle-simulated-logging')).toBe(1);
    expect(gateway.audit.at(-1)).toMatchObject({ name: 'toggle-simulated-logging', decision: 'allow', reason: 'rule' });
  });

  it('refuses a deny rule without scope, whatever the token holds', async () => {
    const admin = await openRawSession(url, tokens.admin);
    const res = await admin.post(toolCall(13, 'gzip-file-as-resource', { name: 'x', data: 'http://169.254.169.254/' }));
    expect(res.status).toBe(403);
    // No step-up could help: no insufficient_scope challenge (SECURITY J55).
    // The body is a JSON-RPC error for the call, which MCP clients show as the call's error (DESIGN §8.4).
    expect(await res.json()).toEqual({
      jsonrpc: '2.0',
      id: 13,
      error: { code: -32003, message: "denied by policy: the tool 'gzip-file-as-resource' is not allowed and no scope would allow it", data: { error: 'access_denied' } },
    });
    expect(res.headers.get('www-authenticate')).toBeNull();
    expect(upstreamSaw('gzip-file-as-resource')).toBe(0);
  });

  it('allow_clients: another client is denied by policy, the listed one passes', async () => {
    const res = await read.post(toolCall(14, 'get-sum', { a: 1, b: 2 }));
    expect(res.status).toBe(403);
    expect(res.headers.get('www-authenticate')).toBeNull();
    expect(await res.json()).toMatchObject({ id: 14, error: { code: -32003, message: "denied by policy: the tool 'get-sum' is not allowed for this client" } });
    const ci = await openRawSession(url, tokens.ci);
    const ok = await ci.post(toolCall(15, 'get-sum', { a: 1, b: 2 }));
    expect(ok.status).toBe(200);
    expect(JSON.stringify(await messagesOf(ok))).toContain('3');
    expect(gateway.audit.at(-1)).toMatchObject({ client_id: 'ci-pipeline', name: 'get-sum', decision: 'allow' });
  });

  it('judges resources/read by URI and prompts/get by name', async () => {
    const secret = await read.post({ jsonrpc: '2.0', id: 16, method: 'resources/read', params: { uri: 'demo://resource/static/document/architecture.md' } });
    expect(secret.status).toBe(403);
    expect(challengeParams(secret).scope).toBe('mcp:read mcp:admin');
    const prompt = await read.post({ jsonrpc: '2.0', id: 17, method: 'prompts/get', params: { name: 'args-prompt', arguments: { city: 'x' } } });
    expect(prompt.status).toBe(403);
    const simple = await read.post({ jsonrpc: '2.0', id: 18, method: 'prompts/get', params: { name: 'simple-prompt' } });
    expect(simple.status).toBe(200);
    expect(upstreamSaw('architecture.md')).toBe(0);
    expect(upstreamSaw('args-prompt')).toBe(0);
  });

  it('refuses a whole batch when one message is refused, asking for every scope it needs', async () => {
    const before = hop.requests.length;
    const res = await read.post([toolCall(21, 'echo', { message: 'batch-echo' }), toolCall(22, 'trigger-long-running-operation')]);
    expect(res.status).toBe(403);
    expect(challengeParams(res).scope).toBe('mcp:read mcp:write');
    const denied = await read.post([toolCall(23, 'echo', { message: 'batch-echo' }), toolCall(24, 'gzip-file-as-resource')]);
    expect(denied.status).toBe(403);
    expect(denied.headers.get('www-authenticate')).toBeNull();
    // One JSON-RPC error per denied member; the allowed echo is refused with its batch, unanswered.
    expect(await denied.json()).toMatchObject([{ id: 24, error: { code: -32003, message: expect.stringMatching(/^denied by policy: the tool 'gzip-file-as-resource'/) } }]);
    expect(hop.requests.length).toBe(before);
    expect(upstreamSaw('batch-echo')).toBe(0);
    // The audit says the allowed-on-its-own echo was refused with its batch.
    expect(gateway.audit.filter((e) => e.method === 'tools/call' && e.name === 'echo').at(-1)).toMatchObject({ decision: 'deny', reason: 'batch' });
  });

  it('refuses a body that is not JSON-RPC with 400 invalid_request, before the upstream', async () => {
    const before = hop.requests.length;
    for (const body of ['not json', '[]', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}']) {
      const res = await read.post(body);
      expect(res.status).toBe(400);
      expect(res.headers.get('www-authenticate')).toBeNull();
      expect(await res.json()).toMatchObject({ error: 'invalid_request', error_description: expect.stringMatching(/^The body is not JSON-RPC/) });
    }
    expect(hop.requests.length).toBe(before);
  });

  it('never writes a token into the audit', () => {
    const audit = JSON.stringify(gateway.audit);
    for (const token of Object.values(tokens)) expect(audit).not.toContain(token);
    expect(gateway.audit.length).toBeGreaterThan(5);
  });
});

describe('2026-07-28 Mcp-Method / Mcp-Name headers', () => {
  it('rejects a header the body contradicts with 400 and JSON-RPC -32020; the upstream sees nothing', async () => {
    const admin = await openRawSession(url, tokens.admin);
    const before = hop.requests.length;
    // The header claims a harmless tool; the body calls a denied one (or the reverse).
    const lying = await admin.post(toolCall(31, 'gzip-file-as-resource'), { 'mcp-method': 'tools/call', 'mcp-name': 'echo' });
    expect(lying.status).toBe(400);
    expect(await lying.json()).toEqual({ jsonrpc: '2.0', id: 31, error: { code: -32020, message: 'Mcp-Name header does not match the name in the body' } });
    const method = await admin.post(toolCall(32, 'echo', { message: 'hdr' }), { 'mcp-method': 'tools/list' });
    expect(method.status).toBe(400);
    expect(await method.json()).toMatchObject({ id: 32, error: { code: -32020 } });
    expect(hop.requests.length).toBe(before);
    expect(gateway.audit.at(-1)).toMatchObject({ decision: 'deny', reason: 'header_mismatch', status: 400 });
  });

  it('passes headers that equal the body (base64 form included)', async () => {
    const read = await openRawSession(url, tokens.read);
    const res = await read.post(toolCall(33, 'echo', { message: 'headers agree' }), {
      'mcp-method': 'tools/call',
      'mcp-name': `=?base64?${Buffer.from('echo').toString('base64')}?=`,
    });
    expect(res.status).toBe(200);
    expect(upstreamSaw('headers agree')).toBe(1);
  });
});

describe('tools/list filtering', () => {
  const listWith = async (token: string) => {
    const client = await connectWithToken(url, token);
    try {
      return (await client.listTools()).tools.map((t) => t.name);
    } finally {
      await client.close();
    }
  };

  it('hides from an event-stream answer the tools the caller may not call', async () => {
    const read = await listWith(tokens.read);
    expect(read).toContain('echo');
    expect(read).toContain('get-tiny-image');
    for (const hidden of ['toggle-simulated-logging', 'trigger-long-running-operation', 'get-env', 'gzip-file-as-resource', 'get-sum']) {
      expect(read).not.toContain(hidden);
    }
    const write = await listWith(tokens.write);
    expect(write).toEqual(expect.arrayContaining(['toggle-simulated-logging', 'trigger-long-running-operation']));
    expect(write).not.toContain('get-env');
    const admin = await listWith(tokens.admin);
    expect(admin).toContain('get-env');
    expect(admin).not.toContain('gzip-file-as-resource');
    expect(await listWith(tokens.ci)).toContain('get-sum');
  });

  it('rewrites only the answering event, keeping its SSE fields, on a stream that is not buffered', async () => {
    const read = await openRawSession(url, tokens.read);
    const res = await read.post({ jsonrpc: '2.0', id: 41, method: 'tools/list' });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    expect(res.headers.get('content-length')).toBeNull();
    const text = await res.text();
    expect(text).toMatch(/^event: message\nid: \S+\ndata: \{/);
    expect(text).not.toContain('get-env');
    expect(JSON.parse(text.split('\ndata: ')[1]!.split('\n')[0]!)).toMatchObject({ id: 41, result: { tools: expect.any(Array) } });
  });

  it('still refuses tools/call on a hidden tool', async () => {
    const read = await openRawSession(url, tokens.read);
    const res = await read.post(toolCall(42, 'get-env'));
    expect(res.status).toBe(403);
    expect(challengeParams(res).scope).toBe('mcp:read mcp:admin');
  });

  it('filters a JSON answer (and leaves other JSON answers alone)', async () => {
    const token = await oidc.mintAccessToken({ resource: jsonUrl, scope: 'mcp:read' });
    const post = (payload: unknown) =>
      fetch(jsonUrl, {
        method: 'POST',
        headers: { ...MCP_HEADERS, authorization: `Bearer ${token}`, 'mcp-protocol-version': '2025-06-18' },
        body: JSON.stringify(payload),
      });
    const res = await post({ jsonrpc: '2.0', id: 'list-1', method: 'tools/list' });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const body = (await res.json()) as { id: string; result: { tools: Array<{ name: string; description: string }> } };
    expect(body.id).toBe('list-1');
    expect(body.result.tools.map((t) => t.name)).toEqual(['echo']);
    expect(body.result.tools[0]!.description).toBe('the echo tool');
    expect(jsonServer.methods).toContain('tools/list');

    const call = await post(toolCall(43, 'echo'));
    expect(await call.json()).toMatchObject({ id: 43, result: { content: [{ type: 'text', text: 'echo done' }] } });

    const hidden = await post(toolCall(44, 'delete_repo'));
    expect(hidden.status).toBe(403);
    expect(jsonServer.methods.filter((m) => m === 'tools/call')).toHaveLength(1);

    const ci = await mintClientCredentialsToken({ tokenEndpoint: oidc.tokenEndpoint, confidentialClient: CI_CLIENT }, { resource: jsonUrl, scope: 'mcp:read mcp:write' });
    const ciList = await fetch(jsonUrl, {
      method: 'POST',
      headers: { ...MCP_HEADERS, authorization: `Bearer ${ci}`, 'mcp-protocol-version': '2025-06-18' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }),
    });
    expect(((await ciList.json()) as typeof body).result.tools.map((t) => t.name)).toEqual(['echo', 'delete_repo', 'deploy_prod']);
  });
});

/** 1-based line of `rules[index]` in the route file the harness wrote (read back: the real file's lines). */
function ruleLine(index: number): number {
  const lines = readFileSync(`${gateway.dir}/everything.yaml`, 'utf8').split('\n');
  let seen = -1;
  for (let i = lines.indexOf('rules:') + 1; i < lines.length; i++) {
    if (lines[i]!.startsWith('  - ') && ++seen === index) return i + 1;
  }
  throw new Error('rule not found');
}
