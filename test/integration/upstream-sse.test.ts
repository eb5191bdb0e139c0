/**
 * Legacy HTTP+SSE upstreams (`upstream: { sse: URL }`, issue 14): the unmodified
 * server-everything in its `sse` mode behind the real gateway, reached by the
 * real MCP SDK client over Streamable HTTP, gives the same tools and results as
 * a direct SSEClientTransport connection; every rule of a route applies to it
 * (policy, tools/list filtering, session binding, upstream_auth on GET and POST).
 * A recording hop between gateway and server shows what reached the upstream.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const PATH = '/everything/mcp';
const UPSTREAM_KEY = 'sse-upstream-static-credential-0123456789';

let everything: UpstreamHandle;
let hop: RecordingHop;
let issuer: TestIssuer;
let gw: TestGateway;
let routeUrl: string;
const tokens = { alice: '', bob: '', reader: '' };

beforeAll(async () => {
  [everything, issuer] = await Promise.all([startEverythingServer('sse'), startTestIssuer('RS256')]);
  hop = await startRecordingHop(everything.url);
  gw = await startTestGateway(
    {
      'gateway.yaml': gatewayYaml(),
      'everything.yaml': jwtRoute(PATH, '', issuer, {
        upstream: { sse: hop.url },
        scopes_supported: ['mcp:read', 'mcp:write', 'mcp:admin'],
        rules: [
          { match: { method: 'tools/call', tool: 'get-env' }, deny: true },
          { match: { method: 'tools/call', tool: 'trigger-*' }, require_scopes: ['mcp:write'] },
          { match: { method: 'prompts/get', prompt: 'args-*' }, deny: true },
        ],
        filter_tools_list: true,
        upstream_auth: { kind: 'static', header: 'X-Api-Key', value: { env: 'SSE_UPSTREAM_KEY' } },
      }),
    },
    { SSE_UPSTREAM_KEY: UPSTREAM_KEY },
  );
  routeUrl = `${gw.url}${PATH}`;
  const mint = (sub: string, scope: string) => issuer.mint({ aud: resourceOf(PATH), sub, scope });
  tokens.alice = await mint('alice', 'mcp:read mcp:write');
  tokens.bob = await mint('bob', 'mcp:read mcp:write');
  tokens.reader = await mint('carol', 'mcp:read');
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([hop?.close(), issuer?.close()]);
  await everything?.close();
});

async function throughGateway(token: string): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(routeUrl), { requestInit: { headers: { Authorization: `Bearer ${token}` } } });
  const client = new Client({ name: 'through-gateway', version: '0' });
  await client.connect(transport);
  return { client, transport };
}

async function direct(): Promise<Client> {
  const client = new Client({ name: 'direct', version: '0' });
  await client.connect(new SSEClientTransport(new URL(everything.url)));
  return client;
}

/** Tool names without those the policy hides from a caller with `mcp:read mcp:write`. */
const visibleTo = (names: string[]) => names.filter((n) => n !== 'get-env');

describe('an sse route, compared with a direct SSE connection', () => {
  let through: Client;
  let straight: Client;
  beforeAll(async () => {
    [{ client: through }, straight] = await Promise.all([throughGateway(tokens.alice), direct()]);
  });
  afterAll(async () => {
    await Promise.all([through?.close(), straight?.close()]);
  });

  it('initializes with the same server info and capabilities', () => {
    expect(through.getServerVersion()).toEqual(straight.getServerVersion());
    expect(through.getServerCapabilities()).toEqual(straight.getServerCapabilities());
  });

  it('lists the same tools, less the one a deny rule forbids (filter_tools_list)', async () => {
    const [a, b] = await Promise.all([through.listTools(), straight.listTools()]);
    expect(b.tools.map((t) => t.name)).toContain('get-env');
    expect(a.tools.map((t) => t.name)).toEqual(visibleTo(b.tools.map((t) => t.name)));
    expect(a.tools).toEqual(b.tools.filter((t) => t.name !== 'get-env'));
  });

  it('answers tools/call as the server does', async () => {
    for (const call of [
      { name: 'echo', arguments: { message: 'through a legacy upstream' } },
      { name: 'get-sum', arguments: { a: 17, b: 25 } },
    ]) {
      expect(await through.callTool(call)).toEqual(await straight.callTool(call));
    }
  });

  it('relays the progress of a long-running tool on its POST, then its result', async () => {
    const seen: Array<{ via: string; progress: number; total?: number }> = [];
    const call = { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 4 } };
    const [a, b] = await Promise.all([
      through.callTool(call, undefined, { onprogress: (p) => seen.push({ via: 'gateway', progress: p.progress, total: p.total }) }),
      straight.callTool(call, undefined, { onprogress: (p) => seen.push({ via: 'direct', progress: p.progress, total: p.total }) }),
    ]);
    expect(a).toEqual(b);
    const progressOf = (via: string) => seen.filter((s) => s.via === via).map(({ progress, total }) => ({ progress, total }));
    expect(progressOf('gateway')).toEqual([1, 2, 3, 4].map((progress) => ({ progress, total: 4 })));
    // The direct SDK connection may miss the last step (its result can settle the call first); none is invented.
    expect(progressOf('gateway')).toEqual(expect.arrayContaining(progressOf('direct')));
  });

  it('lists and reads resources, lists and gets prompts, as the server does', async () => {
    const [ra, rb] = await Promise.all([through.listResources(), straight.listResources()]);
    expect(ra).toEqual(rb);
    const uri = ra.resources[0]!.uri;
    expect(await through.readResource({ uri })).toEqual(await straight.readResource({ uri }));
    expect(await through.listPrompts()).toEqual(await straight.listPrompts());
    expect(await through.getPrompt({ name: 'simple-prompt' })).toEqual(await straight.getPrompt({ name: 'simple-prompt' }));
  });

  it('refuses what a rule denies with 403 and forwards nothing', async () => {
    const before = hop.requests.length;
    await expect(through.callTool({ name: 'get-env', arguments: {} })).rejects.toThrow(/denied by policy: the tool 'get-env'/);
    await expect(through.getPrompt({ name: 'args-prompt', arguments: { city: 'x' } })).rejects.toThrow(/denied by policy: the prompt 'args-prompt'/);
    expect(hop.requests.slice(before).filter((r) => /get-env|args-prompt/.test(r.body.toString()))).toEqual([]);
  });
});

describe('upstream_auth on a legacy upstream', () => {
  it('puts the static credential on the GET stream and on every POST, never the client token', async () => {
    const before = hop.requests.length;
    const { client } = await throughGateway(tokens.bob);
    await client.callTool({ name: 'echo', arguments: { message: 'credential check' } });
    await client.close();
    const seen = hop.requests.slice(before);
    const get = seen.filter((r) => r.method === 'GET');
    const posts = seen.filter((r) => r.method === 'POST');
    expect(get).toHaveLength(1);
    expect(posts.length).toBeGreaterThanOrEqual(3); // initialize, notifications/initialized, tools/call
    for (const r of seen) {
      const names = r.headers.map(([n]) => n.toLowerCase());
      expect(r.headers.filter(([n]) => n.toLowerCase() === 'x-api-key').map(([, v]) => v)).toEqual([UPSTREAM_KEY]);
      expect(names).not.toContain('authorization');
      expect(JSON.stringify(r.headers)).not.toContain(tokens.bob);
    }
  });
});

describe('sessions of two principals', () => {
  it('each gets an upstream stream of its own, and neither can use the other\'s session', async () => {
    const before = hop.requests.length;
    const [alice, bob] = await Promise.all([throughGateway(tokens.alice), throughGateway(tokens.bob)]);
    try {
      const aliceSession = alice.transport.sessionId!;
      const bobSession = bob.transport.sessionId!;
      expect(aliceSession).not.toEqual(bobSession);
      // Two GET streams upstream, and each session's POSTs went to its own upstream session.
      const fresh = hop.requests.slice(before);
      expect(fresh.filter((r) => r.method === 'GET')).toHaveLength(2);
      const upstreamSessions = new Set(fresh.filter((r) => r.method === 'POST').map((r) => new URL(r.url, 'http://x').searchParams.get('sessionId')));
      expect(upstreamSessions.size).toBe(2);

      // Bob presents alice's session id: 404, and nothing reaches the upstream.
      const count = hop.requests.length;
      const stolen = await fetch(routeUrl, {
        method: 'POST',
        headers: { authorization: `Bearer ${tokens.bob}`, 'mcp-session-id': aliceSession, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'tools/call', params: { name: 'echo', arguments: { message: 'not mine' } } }),
      });
      expect(stolen.status).toBe(404);
      expect(await stolen.json()).toMatchObject({ error: 'not_found' });
      const stolenGet = await fetch(routeUrl, { headers: { authorization: `Bearer ${tokens.bob}`, 'mcp-session-id': aliceSession, accept: 'text/event-stream' } });
      expect(stolenGet.status).toBe(404);
      const stolenDelete = await fetch(routeUrl, { method: 'DELETE', headers: { authorization: `Bearer ${tokens.bob}`, 'mcp-session-id': aliceSession } });
      expect(stolenDelete.status).toBe(404);
      expect(hop.requests.length).toBe(count);
      // Alice's session still works.
      expect(await alice.client.callTool({ name: 'echo', arguments: { message: 'still mine' } })).toMatchObject({ content: [{ text: 'Echo: still mine' }] });
    } finally {
      await Promise.all([alice.client.close(), bob.client.close()]);
    }
  });

  it('a caller without mcp:write does not see the trigger-* tools (filtered by its scopes)', async () => {
    const { client } = await throughGateway(tokens.reader);
    try {
      const names = (await client.listTools()).tools.map((t) => t.name);
      expect(names).toContain('echo');
      expect(names.some((n) => n.startsWith('trigger-'))).toBe(false);
    } finally {
      await client.close();
    }
  });
});

describe('DELETE', () => {
  it('ends the session and closes its upstream stream; the id is unknown afterwards', async () => {
    const { client, transport } = await throughGateway(tokens.alice);
    const session = transport.sessionId!;
    await transport.terminateSession();
    const after = await fetch(routeUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${tokens.alice}`, 'mcp-session-id': session, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    });
    expect(after.status).toBe(404);
    await client.close();
  });
});
