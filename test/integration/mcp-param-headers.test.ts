/**
 * Mcp-Param-* headers mean what the body says, through the real gateway (MCP 2026-07-28,
 * streamable-http "Custom Headers from Tool Parameters"): a scripted upstream lists `execute_sql`
 * with `x-mcp-header` annotations (as JSON, or as an event stream) and records every request; it
 * validates nothing itself, so what it never receives the gateway refused.
 * - A route learns the annotations from the tools/list answers it carries: a plain route through
 *   the read-only learner, a filtering route through the filter.
 * - Then a header that contradicts the body, stands for an absent argument, or (2026-07-28) is
 *   missing is 400 with JSON-RPC -32020 and the request id, audited, forwarded to nobody; agreeing
 *   headers (any case of the name, plain or base64) pass unchanged.
 * - Before any tools/list, and after a reload, the route knows nothing and forwards (the upstream
 *   must validate: documented in docs/policies.md).
 * - The same on a stdio route (the fixture server's `route_query`), whose child never sees headers.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import type { AuditEvent } from '../../src/observability/audit.js';
import { closeServer, listen } from '../helpers/net.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { FIXTURE_SERVER, startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';
import { gatewayYaml, jwtRoute, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';

const EXECUTE_SQL = {
  name: 'execute_sql',
  inputSchema: {
    type: 'object',
    properties: {
      region: { type: 'string', 'x-mcp-header': 'Region' },
      priority: { type: 'integer', 'x-mcp-header': 'Priority' },
      target: { type: 'object', properties: { tenant: { type: 'string', 'x-mcp-header': 'Tenant' } } },
      query: { type: 'string' },
    },
  },
};

interface Received {
  method: string;
  headers: IncomingMessage['headers'];
}

/** tools/list: `tools` (or the default list), as an event stream when asked by `x-test-sse`; anything else: an empty result. */
function scriptedUpstream(received: Received[], tools: { list: unknown[] }) {
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString() || '{}') as { id?: unknown; method?: string };
      received.push({ method: body.method ?? '', headers: req.headers });
      const answer = JSON.stringify({ jsonrpc: '2.0', id: body.id, result: body.method === 'tools/list' ? { tools: tools.list } : { content: [] } });
      if (req.headers['x-test-sse'] === '1') {
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        return void res.end(`event: message\ndata: ${answer}\n\n`);
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(answer);
    });
  });
}

const PLAIN = '/plain/mcp';
const FILTERED = '/filtered/mcp';
const received: Received[] = [];
const tools = { list: [EXECUTE_SQL, { name: 'echo', inputSchema: { type: 'object' } }] as unknown[] };
const upstream = scriptedUpstream(received, tools);
const audit: AuditEvent[] = [];
let issuer: TestIssuer;
let gw: TestGateway;
let token: string;

beforeAll(async () => {
  const port = await listen(upstream);
  issuer = await startTestIssuer('RS256');
  const upstreamUrl = `http://127.0.0.1:${port}/mcp`;
  gw = await startTestGateway(
    {
      'gateway.yaml': gatewayYaml(),
      'plain.yaml': jwtRoute(PLAIN, upstreamUrl, issuer),
      'filtered.yaml': jwtRoute(FILTERED, upstreamUrl, issuer, { filter_tools_list: true }),
    },
    {},
    { audit: { enabled: true, record: (event) => audit.push(structuredClone(event)) } },
  );
  token = await issuer.mint({ aud: [resourceOf(PLAIN), resourceOf(FILTERED)], sub: 'alice', client_id: 'app', scope: 'mcp:read' });
});

afterAll(async () => {
  await gw?.stop();
  await issuer?.close();
  await closeServer(upstream);
});

interface PostOptions {
  path?: string;
  version?: string;
  sse?: boolean;
}

/** A POST as a 2026-07-28 client sends it, plus the `extra` headers in the order given. */
async function post(method: string, params: Record<string, unknown>, extra: Array<[string, string]> = [], options: PostOptions = {}) {
  const headers = new Headers({ authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-method': method, 'mcp-protocol-version': options.version ?? '2026-07-28' });
  if (typeof params.name === 'string') headers.set('mcp-name', params.name);
  if (options.sse) headers.set('x-test-sse', '1');
  for (const [name, value] of extra) headers.append(name, value);
  const res = await fetch(`${gw.url}${options.path ?? PLAIN}`, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 9, method, params }) });
  return { status: res.status, body: await res.text() };
}

const callSql = (args: Record<string, unknown>, extra: Array<[string, string]> = [], options: PostOptions = {}) => post('tools/call', { name: 'execute_sql', arguments: args }, extra, options);

/** Refused with 400 and -32020, the request id, an audit line, and nothing at the upstream. */
async function expectRefused(request: Promise<{ status: number; body: string }>) {
  const before = received.length;
  const auditBefore = audit.length;
  const res = await request;
  expect(res.status, res.body).toBe(400);
  expect(JSON.parse(res.body)).toMatchObject({ jsonrpc: '2.0', id: 9, error: { code: -32020 } });
  expect(received.length).toBe(before);
  expect(audit.slice(auditBefore)).toEqual([expect.objectContaining({ decision: 'deny', reason: 'header_mismatch', status: 400 })]);
}

/** Passed, and the upstream got the Mcp-Param headers as sent. */
async function expectForwarded(request: Promise<{ status: number; body: string }>, headers: Record<string, string> = {}) {
  const before = received.length;
  const res = await request;
  expect(res.status, res.body).toBe(200);
  expect(received.length).toBe(before + 1);
  const forwarded = Object.fromEntries(Object.entries(received.at(-1)!.headers).filter(([name]) => name.startsWith('mcp-param-')));
  expect(forwarded).toEqual(headers);
}

describe('a route that has not seen tools/list', () => {
  it('forwards a call whatever its Mcp-Param headers say (the upstream must validate)', async () => {
    await expectForwarded(callSql({ region: 'us' }, [['Mcp-Param-Region', 'eu']]), { 'mcp-param-region': 'eu' });
  });
});

describe('after a tools/list answer (JSON) on a route that does not filter', () => {
  beforeAll(async () => {
    expect((await post('tools/list', {})).status).toBe(200);
  });

  it('passes headers that agree with the body, any case of the name, plain or base64, nested arguments included', async () => {
    await expectForwarded(callSql({ region: 'us-west1', priority: 3, query: 'q' }, [['Mcp-Param-Region', 'us-west1'], ['MCP-PARAM-PRIORITY', '3']]), { 'mcp-param-region': 'us-west1', 'mcp-param-priority': '3' });
    const encoded = `=?base64?${Buffer.from('Zürich ').toString('base64')}?=`;
    await expectForwarded(callSql({ region: 'Zürich ', target: { tenant: 'acme' } }, [['mcp-param-region', encoded], ['Mcp-Param-Tenant', 'acme']]), { 'mcp-param-region': encoded, 'mcp-param-tenant': 'acme' });
    await expectForwarded(callSql({ query: 'no mirrored argument' }));
    await expectForwarded(callSql({ region: null }));
  });

  it('refuses a header the body contradicts: another value, another case, another spelling of the integer', async () => {
    await expectRefused(callSql({ region: 'us' }, [['Mcp-Param-Region', 'eu']]));
    await expectRefused(callSql({ region: 'us' }, [['Mcp-Param-Region', 'US']]));
    await expectRefused(callSql({ region: 'us', priority: 1 }, [['Mcp-Param-Region', 'us'], ['Mcp-Param-Priority', '1.0']]));
    await expectRefused(callSql({ target: { tenant: 'acme' } }, [['Mcp-Param-Tenant', 'evil']]));
  });

  it('refuses a header for an argument the body does not have, and a missing header for one it has', async () => {
    await expectRefused(callSql({ query: 'q' }, [['Mcp-Param-Region', 'eu']]));
    await expectRefused(callSql({ region: null }, [['Mcp-Param-Region', 'eu']]));
    await expectRefused(callSql({ region: 'eu' }));
    await expectRefused(callSql({ target: { tenant: 'acme' } }));
  });

  it('lets a 2025-11-25 client (which sends no Mcp-Param headers) through, but still holds a header it sends to the body', async () => {
    await expectForwarded(callSql({ region: 'eu' }, [], { version: '2025-11-25' }));
    await expectRefused(callSql({ region: 'eu' }, [['Mcp-Param-Region', 'us']], { version: '2025-11-25' }));
  });

  it('forgets a tool relisted without annotations', async () => {
    tools.list = [{ name: 'execute_sql', inputSchema: { type: 'object' } }];
    try {
      expect((await post('tools/list', {})).status).toBe(200);
      await expectForwarded(callSql({ region: 'eu' }));
    } finally {
      tools.list = [EXECUTE_SQL];
      expect((await post('tools/list', {})).status).toBe(200);
    }
    await expectRefused(callSql({ region: 'eu' }));
  });
});

describe('a filtering route learns from the answers it filters (event stream)', () => {
  it('refuses a contradicting header once its tools/list went by', async () => {
    await expectForwarded(callSql({ region: 'us' }, [['Mcp-Param-Region', 'eu']], { path: FILTERED }), { 'mcp-param-region': 'eu' });
    const listed = await post('tools/list', {}, [], { path: FILTERED, sse: true });
    expect(listed.body).toContain('execute_sql');
    await expectRefused(callSql({ region: 'us' }, [['Mcp-Param-Region', 'eu']], { path: FILTERED }));
    await expectForwarded(callSql({ region: 'us' }, [['Mcp-Param-Region', 'us']], { path: FILTERED }), { 'mcp-param-region': 'us' });
  });
});

describe('a reload', () => {
  it('starts afresh: what the routes learnt is forgotten', async () => {
    await expectRefused(callSql({ region: 'us' }, [['Mcp-Param-Region', 'eu']]));
    await gw.reload(await loadConfig(gw.dir, {}));
    await expectForwarded(callSql({ region: 'us' }, [['Mcp-Param-Region', 'eu']]), { 'mcp-param-region': 'eu' });
  });
});

describe('a stdio route (2026-07-28: one process per principal, no session)', () => {
  const PATH = '/stdio/mcp';
  let stage: StdioStage;

  beforeAll(async () => {
    stage = await startStdioStage({ [PATH]: { upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER, 'probe'] } } } });
  });

  afterAll(async () => {
    await stage?.close();
  });

  async function stdioPost(token: string, id: number, method: string, params: Record<string, unknown>, extra: Record<string, string> = {}) {
    const headers: Record<string, string> = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json', 'mcp-protocol-version': '2026-07-28', 'mcp-method': method, ...extra };
    if (typeof params.name === 'string') headers['mcp-name'] = params.name;
    const res = await fetch(stage.url(PATH), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } } }) });
    return { status: res.status, body: await res.text() };
  }

  it('learns route_query from its tools/list and refuses a contradicting or missing Mcp-Param-Region', async () => {
    const token = await stage.token(PATH);
    const call = (id: number, region: string | undefined, header?: string) => stdioPost(token, id, 'tools/call', { name: 'route_query', arguments: region === undefined ? {} : { region } }, header === undefined ? {} : { 'mcp-param-region': header });
    // Not listed yet: forwarded, whatever the header says.
    expect((await call(1, 'us', 'eu')).status).toBe(200);
    const listed = await stdioPost(token, 2, 'tools/list', {});
    expect(listed.body).toContain('route_query');
    const refused = await call(3, 'us', 'eu');
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body)).toMatchObject({ id: 3, error: { code: -32020 } });
    expect((await call(4, 'us')).status).toBe(400);
    expect((await call(5, undefined, 'eu')).status).toBe(400);
    const agreed = await call(6, 'us', 'us');
    expect(agreed.status, agreed.body).toBe(200);
    expect(JSON.parse(agreed.body)).toMatchObject({ id: 6, result: { content: [{ text: 'called route_query' }] } });
  });
});
