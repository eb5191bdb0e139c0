/**
 * SECURITY-CASES group J, the header, framing, deny, dev-login and secrets cases (SECURITY.md, group J):
 * - [J50] header names with `_` (or any character but letters, digits and `-`) never reach an
 *   upstream: a CGI-style upstream (Rack, WSGI, PHP: `HTTP_` + upper case, `-` → `_`) would read
 *   `Mcp_Session_Id` as `Mcp-Session-Id`, so one principal could act in another's session;
 * - [J53] HTTP/1.0 with Transfer-Encoding → 400 and the connection closed, nothing upstream or stored,
 *   on protected routes and on the Hono routes (metadata, operations, the built-in AS);
 * - [J55] a deny rule or allow-list refusal → 403 with a JSON-RPC error per denied message saying
 *   denied by policy (DESIGN §8.4) and no `insufficient_scope` challenge; scope refusals keep theirs;
 *   batches and `explain` agree;
 * - [J51] the dev login only on a loopback listen address and public_url (`check` and `serve`);
 * - [J62] no `check` or `serve` output repeats a configured URL's password or userinfo.
 */
import { execFile } from 'node:child_process';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { main } from '../../src/cli.js';
import { loadConfig } from '../../src/config/load.js';
import { startAsGateway, type AsGateway } from '../helpers/authorization-server.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { buildGatewayCli, spawnGateway, writeConfigDir, type GatewayCli } from '../helpers/gateway-process.js';
import { closeServer, listen } from '../helpers/net.js';
import { buildRequest, headerOf, openRaw, rawRequest, type RawResponse } from '../helpers/raw-http.js';
import { expectPolicyDenial, gatewayYaml, jwtRoute, resourceOf, simplifyRaw, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';

// --- a CGI-style MCP upstream --------------------------------------------------------------

/** What a CGI, WSGI or Rack application sees of one request. */
interface CgiRequest {
  env: Record<string, string>;
  body: { method?: string; params?: { name?: string; arguments?: { text?: string } } };
}

/** `HTTP_` + upper case with `-` → `_`; repeated names joined with ", " (as Node and most servers do). */
function cgiEnvironment(rawHeaders: readonly string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const key = `HTTP_${rawHeaders[i]!.toUpperCase().replaceAll('-', '_')}`;
    env[key] = key in env ? `${env[key]}, ${rawHeaders[i + 1]!}` : rawHeaders[i + 1]!;
  }
  return env;
}

/**
 * A stateful MCP server that reads its headers CGI-style: `initialize` opens a session,
 * `tools/call add_note` stores a note in the session HTTP_MCP_SESSION_ID names, `list_notes` reads it.
 */
function startCgiUpstream(): Promise<{ server: Server; origin: string; requests: CgiRequest[]; close(): Promise<void> }> {
  const requests: CgiRequest[] = [];
  const notes = new Map<string, string[]>();
  let sessions = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const env = cgiEnvironment(req.rawHeaders);
      let body: CgiRequest['body'] & { id?: unknown } = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
      } catch {
        // GET / DELETE
      }
      requests.push({ env, body });
      const session = env.HTTP_MCP_SESSION_ID;
      const headers: Record<string, string> = { 'content-type': 'application/json' };
      let result: unknown = {};
      if (body.method === 'initialize') {
        const id = `cgi-session-${++sessions}`;
        notes.set(id, []);
        headers['mcp-session-id'] = id;
        result = { protocolVersion: '2025-06-18', capabilities: { tools: {} }, serverInfo: { name: 'cgi', version: '1' } };
      } else if (body.method === 'tools/call' && body.params?.name === 'add_note' && session !== undefined) {
        notes.get(session)?.push(body.params.arguments?.text ?? '');
        result = { content: [{ type: 'text', text: 'added' }] };
      } else if (body.method === 'tools/call' && body.params?.name === 'list_notes') {
        result = { content: [{ type: 'text', text: JSON.stringify(session === undefined ? null : (notes.get(session) ?? null)) }] };
      }
      res.writeHead(200, headers).end(JSON.stringify({ jsonrpc: '2.0', id: body.id ?? null, result }));
    });
  });
  return listen(server).then((port) => ({ server, origin: `http://127.0.0.1:${port}`, requests, close: () => closeServer(server) }));
}

// --- the stage ------------------------------------------------------------------------------

const CGI_PATH = '/cgi/mcp';
const POLICY_PATH = '/policy/mcp';
let issuer: TestIssuer;
let cgi: Awaited<ReturnType<typeof startCgiUpstream>>;
let gw: TestGateway;

const RULES = [
  { match: { method: 'tools/call', tool: 'shell' }, deny: true },
  { match: { method: 'resources/read', uri: 'file:///secret/**' }, deny: true },
  { match: { method: 'prompts/get', prompt: 'admin_*' }, deny: true },
  { match: { method: 'logging/setLevel' }, deny: true },
  { match: { method: 'tools/call', tool: 'ci_only' }, allow_clients: ['ci-pipeline'] },
  { match: { method: 'tools/call', tool: 'ops_only' }, allow_subjects: ['operator'] },
  { match: { method: 'tools/call', tool: 'delete_*' }, require_scopes: ['mcp:write'] },
];

beforeAll(async () => {
  [issuer, cgi] = await Promise.all([startTestIssuer('RS256'), startCgiUpstream()]);
  gw = await startTestGateway({
    'gateway.yaml': gatewayYaml(),
    'cgi.yaml': jwtRoute(CGI_PATH, `${cgi.origin}/mcp`, issuer, { rules: [{ match: { method: 'tools/call', tool: 'shell' }, deny: true }] }),
    'policy.yaml': jwtRoute(POLICY_PATH, `${cgi.origin}/mcp`, issuer, { rules: RULES }),
  });
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([issuer?.close(), cgi?.close()]);
});

const tokenOf = (path: string, sub: string, scope = 'mcp:read', clientId = `${sub}-client`) =>
  issuer.mint({ aud: resourceOf(path), sub, client_id: clientId, scope });

const jsonRpc = (id: number | string, method: string, params?: unknown) => JSON.stringify({ jsonrpc: '2.0', id, method, ...(params !== undefined && { params }) });
const call = (id: number | string, name: string, args: Record<string, unknown> = {}) => jsonRpc(id, 'tools/call', { name, arguments: args });

/** A POST with exactly these header lines (names spelled as given), on its own connection. */
async function rawPost(path: string, token: string, body: string, headers: Array<[string, string]> = []): Promise<RawResponse> {
  return rawRequest(
    gw.port,
    buildRequest({
      method: 'POST',
      target: path,
      host: `127.0.0.1:${gw.port}`,
      headers: [['Authorization', `Bearer ${token}`], ['Accept', 'application/json, text/event-stream'], ...headers],
      body,
    }),
  );
}

/** What reached the upstream while `run` ran. */
async function upstreamDuring<T>(run: () => Promise<T>): Promise<{ result: T; seen: CgiRequest[] }> {
  const before = cgi.requests.length;
  const result = await run();
  await new Promise((r) => setTimeout(r, 20));
  return { result, seen: cgi.requests.slice(before) };
}

// --- [J50] ----------------------------------------------------------------------------------

describe('[J50] header names a CGI-style upstream would fold onto the gateway\'s own', () => {
  let alice: { token: string; session: string };
  let mallory: { token: string; session: string };

  async function initialize(sub: string): Promise<{ token: string; session: string }> {
    const token = await tokenOf(CGI_PATH, sub);
    const res = await rawPost(CGI_PATH, token, jsonRpc(1, 'initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } }));
    expect(res.status).toBe(200);
    return { token, session: headerOf(res, 'mcp-session-id')! };
  }

  beforeAll(async () => {
    alice = await initialize('alice');
    mallory = await initialize('mallory');
    const added = await rawPost(CGI_PATH, alice.token, call(2, 'add_note', { text: 'alice-private-note' }), [['Mcp-Session-Id', alice.session]]);
    expect(added.status).toBe(200);
    // The upstream does keep sessions apart by the header it reads: alice reads her note.
    const own = await rawPost(CGI_PATH, alice.token, call(3, 'list_notes'), [['Mcp-Session-Id', alice.session]]);
    expect(own.body).toContain('alice-private-note');
  });

  /** Every spelling CGI folds onto Mcp-Session-Id, alone or beside mallory's own `-` header. */
  const spellings = ['Mcp_Session_Id', 'mcp_session_id', 'MCP_SESSION_ID', 'Mcp_Session-Id', 'Mcp-Session_Id', 'mCp_SeSsIoN_iD'];
  const attacks = (aliceSession: string, mallorySession: string): Array<[string, Array<[string, string]>]> =>
    spellings.flatMap((name): Array<[string, Array<[string, string]>]> => [
      [`${name} alone`, [[name, aliceSession]]],
      [`${name} after mallory's Mcp-Session-Id`, [['Mcp-Session-Id', mallorySession], [name, aliceSession]]],
      [`${name} before mallory's Mcp-Session-Id`, [[name, aliceSession], ['Mcp-Session-Id', mallorySession]]],
    ]);

  it(`[J50] mallory cannot act in alice's session with any \`_\` spelling of Mcp-Session-Id (${spellings.length * 3} variants)`, async () => {
    for (const [name, headers] of attacks(alice.session, mallory.session)) {
      for (const [id, body] of [[10, call(10, 'list_notes')], [11, call(11, 'add_note', { text: 'mallory-was-here' })]] as const) {
        const { result, seen } = await upstreamDuring(() => rawPost(CGI_PATH, mallory.token, body, headers));
        expect(result.body, `${name} #${id}`).not.toContain('alice-private-note');
        for (const request of seen) {
          // What the upstream reads as the session is mallory's own, or none.
          expect([mallory.session, undefined], name).toContain(request.env.HTTP_MCP_SESSION_ID);
          expect(Object.keys(request.env).filter((k) => /[a-z]/.test(k)), name).toEqual([]);
        }
      }
    }
    const own = await rawPost(CGI_PATH, alice.token, call(12, 'list_notes'), [['Mcp-Session-Id', alice.session]]);
    expect(JSON.parse((JSON.parse(own.body) as { result: { content: Array<{ text: string }> } }).result.content[0]!.text)).toEqual(['alice-private-note']);
  });

  it('[J50] the gateway still judges the `-` spelling: alice\'s session id in Mcp-Session-Id is refused to mallory (404)', async () => {
    const { result, seen } = await upstreamDuring(() => rawPost(CGI_PATH, mallory.token, call(13, 'list_notes'), [['Mcp-Session-Id', alice.session], ['Mcp_Session_Id', mallory.session]]));
    expect(result.status).toBe(404);
    expect(seen).toEqual([]);
  });

  it('[J50] Mcp_Method, Mcp_Name, MCP_Protocol_Version, Last_Event_ID and identity headers with `_` never reach the upstream', async () => {
    const headers: Array<[string, string]> = [
      ['Mcp_Method', 'tools/call'],
      ['MCP_NAME', 'shell'],
      ['Mcp_Name', 'shell'],
      ['mcp_protocol_version', '1999-01-01'],
      ['Last_Event_ID', '99'],
      ['X_Forwarded_User', 'admin'],
      ['X_Forwarded_Email', 'admin@example.com'],
      ['Remote_User', 'admin'],
      ['X_User', 'admin'],
      ['x.forwarded.user', 'admin'],
      ['Authorization_', 'Bearer x'],
      ['Mcp-Method', 'tools/call'],
      ['Mcp-Name', 'echo'],
      ['MCP-Protocol-Version', '2025-06-18'],
    ];
    const { result, seen } = await upstreamDuring(() => rawPost(CGI_PATH, mallory.token, call(14, 'echo'), [['Mcp-Session-Id', mallory.session], ...headers]));
    expect(result.status).toBe(200);
    expect(seen).toHaveLength(1);
    const { env } = seen[0]!;
    // Exactly what the gateway judged, and nothing an identity-trusting upstream would read.
    expect(env).toMatchObject({ HTTP_MCP_SESSION_ID: mallory.session, HTTP_MCP_METHOD: 'tools/call', HTTP_MCP_NAME: 'echo', HTTP_MCP_PROTOCOL_VERSION: '2025-06-18' });
    for (const key of ['HTTP_LAST_EVENT_ID', 'HTTP_X_FORWARDED_USER', 'HTTP_X_FORWARDED_EMAIL', 'HTTP_REMOTE_USER', 'HTTP_X_USER', 'HTTP_AUTHORIZATION_', 'HTTP_X.FORWARDED.USER']) {
      expect(env, key).not.toHaveProperty(key);
    }
  });

  it('[J50] a denied tool named only in Mcp_Name beside a harmless body reaches the upstream as the body says, never as shell', async () => {
    const { result, seen } = await upstreamDuring(() => rawPost(CGI_PATH, mallory.token, call(15, 'echo'), [['Mcp-Session-Id', mallory.session], ['Mcp_Method', 'tools/call'], ['Mcp_Name', 'shell']]));
    expect(result.status).toBe(200);
    expect(seen.map((r) => r.env.HTTP_MCP_NAME)).toEqual([undefined]);
    // And the denied tool in the body is refused, whatever the `_` headers claim.
    const denied = await upstreamDuring(() => rawPost(CGI_PATH, mallory.token, call(16, 'shell'), [['Mcp_Name', 'echo'], ['Mcp_Method', 'ping']]));
    expect(denied.result.status).toBe(403);
    expect(denied.seen).toEqual([]);
  });
});

// --- [J53] ----------------------------------------------------------------------------------

describe('[J53] HTTP/1.0 with Transfer-Encoding', () => {
  let as: AsGateway;
  beforeAll(async () => {
    as = await startAsGateway({ upstream: `${cgi.origin}/mcp` });
  });
  afterAll(async () => {
    await as?.stop();
  });

  const CHUNKED_BODY = (body: string) => `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  /** Framings that each put a Transfer-Encoding into an HTTP/1.0 message. */
  const framings = (body: string): Array<[string, string[], string]> => [
    ['chunked', ['Transfer-Encoding: chunked'], CHUNKED_BODY(body)],
    ['chunked and Content-Length', ['Transfer-Encoding: chunked', `Content-Length: ${Buffer.byteLength(body)}`], CHUNKED_BODY(body)],
    ['Content-Length then chunked', [`Content-Length: ${Buffer.byteLength(CHUNKED_BODY(body))}`, 'Transfer-Encoding: chunked'], CHUNKED_BODY(body)],
    ['CHUNKED in upper case', ['TRANSFER-ENCODING: CHUNKED'], CHUNKED_BODY(body)],
    ['lower-case name', ['transfer-encoding: chunked'], CHUNKED_BODY(body)],
    ['a tab before the value', ['Transfer-Encoding:\tchunked'], CHUNKED_BODY(body)],
    ['gzip, chunked', ['Transfer-Encoding: gzip, chunked'], CHUNKED_BODY(body)],
    ['identity with Content-Length', ['Transfer-Encoding: identity', `Content-Length: ${Buffer.byteLength(body)}`], body],
    ['identity alone', ['Transfer-Encoding: identity'], body],
    ['an empty value with Content-Length', ['Transfer-Encoding: ', `Content-Length: ${Buffer.byteLength(body)}`], body],
    ['twice', ['Transfer-Encoding: chunked', 'Transfer-Encoding: chunked'], CHUNKED_BODY(body)],
    ['a space before the colon', ['Transfer-Encoding : chunked'], CHUNKED_BODY(body)],
  ];

  /** Sends one HTTP/1.0 message; asserts a JSON 400 and that the gateway closes the connection. */
  async function expectRefusedAndClosed(port: number, what: string, bytes: string): Promise<void> {
    const conn = await openRaw(port);
    try {
      await conn.write(bytes).catch(() => undefined);
      const res = await conn.response;
      expect(res.status, what).toBe(400);
      expect(headerOf(res, 'content-type'), what).toMatch(/^application\/json/);
      const body = JSON.parse(res.body) as Record<string, unknown>;
      expect(body, what).toMatchObject({ error: 'invalid_request' });
      expect(typeof body.error_description, what).toBe('string');
      // Closed by the gateway, not left for a next request read with the wrong framing.
      const closedAt = await Promise.race([conn.closed, new Promise<number>((r) => setTimeout(() => r(-1), 2_000))]);
      expect(closedAt, `${what}: connection left open`).not.toBe(-1);
    } finally {
      conn.destroy();
    }
  }

  it('[J53] on a protected route, with a valid token: 400, closed, nothing upstream', async () => {
    const token = await tokenOf(CGI_PATH, 'alice');
    const body = call(20, 'echo');
    for (const [name, headers, payload] of framings(body)) {
      for (const method of ['POST', 'GET', 'DELETE']) {
        const bytes = [`${method} ${CGI_PATH} HTTP/1.0`, `Host: 127.0.0.1:${gw.port}`, `Authorization: Bearer ${token}`, 'Content-Type: application/json', ...headers, '', payload].join('\r\n');
        const { seen } = await upstreamDuring(() => expectRefusedAndClosed(gw.port, `${method} ${name}`, bytes));
        expect(seen, `${method} ${name}`).toEqual([]);
      }
    }
  });

  it('[J53] a smuggled second request after an HTTP/1.0 chunked body is never read', async () => {
    const token = await tokenOf(CGI_PATH, 'alice');
    const smuggled = `POST ${CGI_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${call(21, 'echo').length}\r\n\r\n${call(21, 'echo')}`;
    const bytes = `POST ${CGI_PATH} HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${smuggled}`;
    const { seen } = await upstreamDuring(() => expectRefusedAndClosed(gw.port, 'smuggled', bytes));
    expect(seen).toEqual([]);
  });

  it('[J53] on the Hono routes (metadata, operations) and the built-in AS (/token, /register, /revoke, /authorize): 400, closed, nothing stored', async () => {
    const body = 'grant_type=client_credentials&client_id=x';
    const targets: Array<[number, string, string]> = [
      [gw.port, 'GET', `/.well-known/oauth-protected-resource${CGI_PATH}`],
      [gw.port, 'GET', '/healthz'],
      [gw.port, 'POST', '/no/such/route'],
      [as.port, 'POST', '/token'],
      [as.port, 'POST', '/register'],
      [as.port, 'POST', '/revoke'],
      [as.port, 'GET', '/authorize?response_type=code'],
      [as.port, 'GET', '/.well-known/oauth-authorization-server'],
    ];
    const writes = as.recording.writes.length;
    for (const [port, method, target] of targets) {
      for (const [name, headers, payload] of framings(body)) {
        const bytes = [`${method} ${target} HTTP/1.0`, `Host: 127.0.0.1:${port}`, 'Content-Type: application/x-www-form-urlencoded', ...headers, '', payload].join('\r\n');
        await expectRefusedAndClosed(port, `${method} ${target} ${name}`, bytes);
      }
    }
    expect(as.recording.writes.length).toBe(writes);
  });

  it('[J53] HTTP/1.0 without Transfer-Encoding still works; other versions are 505', async () => {
    const token = await tokenOf(CGI_PATH, 'alice');
    const body = call(22, 'echo');
    const ok = await rawRequest(gw.port, `POST ${CGI_PATH} HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    expect(ok.status).toBe(200);
    for (const version of ['HTTP/0.9', 'HTTP/2.0']) {
      const res = await rawRequest(gw.port, `POST ${CGI_PATH} ${version}\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
      expect(res.status, version).toBe(505);
      expect(JSON.parse(res.body), version).toMatchObject({ error: 'http_version_not_supported' });
    }
  });
});

// --- [J55] ----------------------------------------------------------------------------------

describe('[J55] denied by policy: 403 without an insufficient_scope challenge', () => {
  /** Refusals no scope can lift: the caller holds every scope the route knows. */
  const denied: Array<[string, string, Array<number | string | null>, boolean]> = [
    ['a denied tool', call(30, 'shell'), [30], false],
    ['a denied resource', jsonRpc(31, 'resources/read', { uri: 'file:///secret/keys/id_rsa' }), [31], false],
    ['a denied prompt', jsonRpc(32, 'prompts/get', { name: 'admin_reset' }), [32], false],
    ['a denied method', jsonRpc(33, 'logging/setLevel', { level: 'debug' }), [33], false],
    ['a tool only for listed clients', call(34, 'ci_only'), [34], false],
    ['a tool only for listed subjects', call(35, 'ops_only'), [35], false],
    // A batch: one error per denied member; the rest of it is refused with it, as before.
    ['a batch with an allowed call and a denied one', `[${call(36, 'echo')},${call(37, 'shell')}]`, [37], true],
    ['a batch with a denied call and one lacking scope', `[${call(38, 'delete_repo')},${call(39, 'shell')}]`, [39], true],
    ['a batch of a notification and a denied call', `[{"jsonrpc":"2.0","method":"notifications/initialized"},${call(40, 'shell')}]`, [40], true],
    ['a batch of two denied calls', `[${call(47, 'shell')},${call('x-48', 'ci_only')}]`, [47, 'x-48'], true],
  ];

  it.each(denied)('[J55] %s → 403, a JSON-RPC error per denied message saying denied by policy, no WWW-Authenticate, nothing upstream', async (_name, body, ids, batch) => {
    const scoped = await tokenOf(POLICY_PATH, 'bob', 'mcp:read');
    const full = await tokenOf(POLICY_PATH, 'bob', 'mcp:read mcp:write');
    for (const token of [scoped, full]) {
      const { result, seen } = await upstreamDuring(() => rawPost(POLICY_PATH, token, body));
      expect(result.status).toBe(403);
      expect(headerOf(result, 'www-authenticate')).toBeUndefined();
      expect(result.body).not.toContain('insufficient_scope');
      expectPolicyDenial(simplifyRaw(result), ids, batch);
      expect(seen).toEqual([]);
    }
  });

  it('[J55] a scope refusal keeps 403 insufficient_scope with scope=, single or batched', async () => {
    const token = await tokenOf(POLICY_PATH, 'bob', 'mcp:read');
    for (const body of [call(41, 'delete_repo'), `[${call(42, 'echo')},${call(43, 'delete_repo')}]`]) {
      const { result, seen } = await upstreamDuring(() => rawPost(POLICY_PATH, token, body));
      expect(result.status).toBe(403);
      const challenge = headerOf(result, 'www-authenticate') ?? '';
      expect(challenge).toMatch(/^Bearer /);
      expect(challenge).toContain('error="insufficient_scope"');
      expect(challenge).toContain('scope="mcp:read mcp:write"');
      expect(JSON.parse(result.body)).toMatchObject({ error: 'insufficient_scope' });
      expect(seen).toEqual([]);
    }
  });

  it('[J55] listed clients and subjects, and allowed calls, still pass', async () => {
    const ci = await issuer.mint({ aud: resourceOf(POLICY_PATH), sub: 'bot', client_id: 'ci-pipeline', scope: 'mcp:read' });
    const operator = await tokenOf(POLICY_PATH, 'operator');
    expect((await rawPost(POLICY_PATH, ci, call(44, 'ci_only'))).status).toBe(200);
    expect((await rawPost(POLICY_PATH, operator, call(45, 'ops_only'))).status).toBe(200);
    expect((await rawPost(POLICY_PATH, operator, call(46, 'echo'))).status).toBe(200);
  });

  it('[J55] explain says the same: denied by policy with no scope to ask for, or the scope that is missing', async () => {
    const explain = async (...args: string[]) => {
      const out: string[] = [];
      const log = vi.spyOn(console, 'log').mockImplementation((line: unknown) => void out.push(String(line)));
      try {
        const code = await main(['explain', '--config', gw.dir, '--route', POLICY_PATH, '--json', ...args]);
        expect(code).toBe(0);
        return JSON.parse(out.join('\n')) as { decision: string; reason: string; missing_scopes: string[] };
      } finally {
        log.mockRestore();
      }
    };
    for (const args of [['--tool', 'shell'], ['--uri', 'file:///secret/keys/id_rsa'], ['--prompt', 'admin_reset'], ['--method', 'logging/setLevel'], ['--tool', 'ci_only'], ['--tool', 'ops_only', '--subject', 'bob']]) {
      const decision = await explain(...args, '--scopes', 'mcp:read,mcp:write', '--client', 'bob-client');
      expect(decision, args.join(' ')).toMatchObject({ decision: 'deny', missing_scopes: [] });
      expect(['deny', 'client', 'subject'], args.join(' ')).toContain(decision.reason);
    }
    expect(await explain('--tool', 'delete_repo', '--scopes', 'mcp:read')).toMatchObject({ decision: 'deny', reason: 'scope', missing_scopes: ['mcp:write'] });
  });
});

// --- [J51] and [J62]: the command line ------------------------------------------------------

/** Runs a CLI command in process, as policy-examples does: exit code and everything printed. */
async function cliInProcess(...args: string[]): Promise<{ code: number | undefined; output: string }> {
  const out: string[] = [];
  const log = vi.spyOn(console, 'log').mockImplementation((...line: unknown[]) => void out.push(line.map(String).join(' ')));
  const error = vi.spyOn(console, 'error').mockImplementation((...line: unknown[]) => void out.push(line.map(String).join(' ')));
  try {
    return { code: await main(args), output: out.join('\n') };
  } finally {
    log.mockRestore();
    error.mockRestore();
  }
}

const ROUTE_YAML = 'path: /mcp\nupstream: http://127.0.0.1:1/mcp\nscopes_supported: [mcp:read]\n';
const devLoginGateway = (host: string, publicUrl: string) =>
  `listen: { host: "${host}", port: 0 }\npublic_url: ${publicUrl}\naudit: { sink: none }\nauthorization_server:\n  enabled: true\n  login: { kind: dev }\n`;

describe('[J51] the dev login only where nobody else can reach it', () => {
  const loopbackHosts = ['127.0.0.1', '127.0.0.2', '127.255.255.254', '::1', '[::1]', '0:0:0:0:0:0:0:1', 'localhost', 'LOCALHOST', '::ffff:127.0.0.1'];
  const exposedHosts = ['0.0.0.0', '::', '[::]', '0', '192.168.1.10', '10.0.0.1', '172.16.0.1', '169.254.169.254', 'fe80::1', '::ffff:10.0.0.1', '128.0.0.1', 'example.com', 'localhost.example.com', '127.0.0.1.nip.io', 'mcp.internal'];
  const exposedUrls = ['https://mcp.example.com', 'http://0.0.0.0:8080', 'http://[::]:8080', 'http://192.168.1.10:8080', 'http://localhost.example.com', 'http://127.0.0.1.nip.io'];

  it(`[J51] check refuses the dev login on ${exposedHosts.length} exposed listen addresses with file:line: message, and accepts ${loopbackHosts.length} loopback ones`, async () => {
    for (const host of exposedHosts) {
      const dir = await writeConfigDir({ 'gateway.yaml': devLoginGateway(host, 'http://127.0.0.1:8080'), 'mcp.yaml': ROUTE_YAML });
      const { code, output } = await cliInProcess('check', '--config', dir);
      expect(code, host).toBe(1);
      expect(output, host).toMatch(/gateway\.yaml:\d+:\d+: authorization_server\.login: the dev login is refused unless listen\.host is loopback/);
    }
    for (const host of loopbackHosts) {
      const dir = await writeConfigDir({ 'gateway.yaml': devLoginGateway(host, 'http://127.0.0.1:8080'), 'mcp.yaml': ROUTE_YAML });
      expect((await cliInProcess('check', '--config', dir)).code, host).toBe(0);
    }
  });

  it('[J51] check refuses a non-loopback public_url, and HOST / PUBLIC_URL overrides are judged too', async () => {
    for (const url of exposedUrls) {
      const dir = await writeConfigDir({ 'gateway.yaml': devLoginGateway('127.0.0.1', url), 'mcp.yaml': ROUTE_YAML });
      const { code, output } = await cliInProcess('check', '--config', dir);
      expect(code, url).toBe(1);
      expect(output, url).toMatch(/authorization_server\.login: the dev login is refused unless public_url is loopback/);
    }
    const dir = await writeConfigDir({ 'gateway.yaml': devLoginGateway('127.0.0.1', 'http://127.0.0.1:8080'), 'mcp.yaml': ROUTE_YAML });
    await expect(loadConfig(dir, { HOST: '0.0.0.0' })).rejects.toThrow(/listen\.host is 0\.0\.0\.0/);
    await expect(loadConfig(dir, { PUBLIC_URL: 'https://mcp.example.com' })).rejects.toThrow(/public_url is loopback/);
    await expect(loadConfig(dir, { HOST: '::1', PUBLIC_URL: 'http://localhost:9000' })).resolves.toMatchObject({ host: '::1' });
  });

  it('[J51] the shipped policies/ listens on loopback with the dev login, and passes check', async () => {
    const config = await loadConfig('policies', {});
    expect(config.authorizationServer?.login.kind).toBe('dev');
    expect(config.host).toBe('127.0.0.1');
    expect((await cliInProcess('check', '--config', 'policies')).code).toBe(0);
    // As the image would run it with HOST=0.0.0.0: refused.
    await expect(loadConfig('policies', { HOST: '0.0.0.0' })).rejects.toThrow(/the dev login is refused unless listen\.host is loopback/);
  });
});

describe('[J51] [J62] the real CLI process: serve and check', () => {
  let cli: GatewayCli;
  beforeAll(async () => {
    cli = await buildGatewayCli();
  }, 180_000);

  const run = (args: string[], env: Record<string, string> = {}) =>
    promisify(execFile)(process.execPath, ['bin/mcp-auth-gateway.js', ...args], { cwd: cli.root, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 20_000 }).then(
      ({ stdout, stderr }) => ({ code: 0, output: `${stdout}\n${stderr}` }),
      (err: { code: number; stdout: string; stderr: string }) => ({ code: err.code, output: `${err.stdout}\n${err.stderr}` }),
    );

  it('[J51] serve refuses the dev login on 0.0.0.0 (from the file, and from HOST) and exits 1 with file:line: message', async () => {
    const exposed = await writeConfigDir({ 'gateway.yaml': devLoginGateway('0.0.0.0', 'http://127.0.0.1:8080'), 'mcp.yaml': ROUTE_YAML });
    const fromFile = await run(['serve', '--config', exposed]);
    expect(fromFile.code).toBe(1);
    expect(fromFile.output).toMatch(/gateway\.yaml:\d+:\d+: authorization_server\.login: the dev login is refused unless listen\.host is loopback/);
    const loopback = await writeConfigDir({ 'gateway.yaml': devLoginGateway('127.0.0.1', 'http://127.0.0.1:8080'), 'mcp.yaml': ROUTE_YAML });
    const fromEnv = await run(['serve', '--config', loopback], { HOST: '0.0.0.0' });
    expect(fromEnv.code).toBe(1);
    expect(fromEnv.output).toMatch(/listen\.host is 0\.0\.0\.0/);
  });

  it('[J51] the shipped policies/ serves on 127.0.0.1', async () => {
    const gateway = await spawnGateway(cli, { args: ['bin/mcp-auth-gateway.js', 'serve', '--config', `${process.cwd()}/policies`], env: { PORT: '0' } });
    try {
      expect(new URL(gateway.url).hostname).toBe('127.0.0.1');
      expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
    } finally {
      await gateway.stop();
    }
  });

  // One canary per piece of a password, so a password cut at any delimiter still leaves one to find.
  const CANARIES = ['Kq7canaryA', 'Kq7canaryB', 'Kq7canaryC', 'Kq7canaryD'];
  const [A, B, C, D] = CANARIES as [string, string, string, string];
  const redisUrls = [
    `redis://user:${A}@${B}:${C}@127.0.0.1:1/0`,
    `redis://:${A}:${B}@${C}@127.0.0.1:1`,
    `redis://:${A}%3A${B}%40${C}@127.0.0.1:1/0`,
    `rediss://u:${A}@${B}@127.0.0.1:1`,
    `redis://:${A}/${B}@127.0.0.1:1/0`,
    `redis://:${A}?${B}@127.0.0.1:1/0`,
    `redis://:${A}#${B}@127.0.0.1:1/0`,
    `redis://:${A}@${B}:notaport/0`,
    `redis://:${A}@[::1/0`,
    `redis://:${A}%zz${B}@127.0.0.1:1/0`,
    `redis+sentinel://app:${A}@${B}@127.0.0.1:1,127.0.0.1:2/mymaster`,
    `redis+sentinel://:${A}@127.0.0.1:1/m?sentinel_password=${B}&${C}=1`,
    `rediss+sentinel://:${A}/${B}@127.0.0.1:1/m`,
    `redis+cluster://:${A}@${B}@127.0.0.1:1,127.0.0.1:2`,
    `redis+cluster://:${A}@127.0.0.1:1,${B}:99999`,
    `rediss+cluster://u:${A}?${B}@127.0.0.1:1`,
  ];
  const expectNoCanary = (where: string, text: string) => {
    for (const canary of CANARIES) expect(text.includes(canary), `${canary} in ${where}:\n${text.slice(0, 2_000)}`).toBe(false);
  };
  const redisGateway = (url: string) => `listen: { host: 127.0.0.1, port: 0 }\npublic_url: https://mcp.example.test\naudit: { sink: none }\nstore: { kind: redis, url: ${JSON.stringify(url)} }\nlimits: { store_timeout: 1s }\n`;
  const JWT_ROUTE = 'path: /mcp\nupstream: http://127.0.0.1:1/mcp\nauthorization_servers: [https://idp.example.test]\ntoken: { jwt: { issuer: https://idp.example.test, jwks_uri: https://idp.example.test/jwks } }\n';

  /** serve until it exits or has listened for a moment: everything it printed either way. */
  async function serveOutput(dir: string, env: Record<string, string> = {}): Promise<string> {
    try {
      const gateway = await spawnGateway(cli, { configDir: dir, env: { PORT: '0', ...env }, startTimeoutMs: 10_000 });
      await new Promise((r) => setTimeout(r, 500));
      await gateway.stop();
      return `${JSON.stringify(gateway.logs)}\n${gateway.stderr()}`;
    } catch (err) {
      return (err as Error).message;
    }
  }

  it(`[J62] ${redisUrls.length} Redis URLs with @, :, /, ?, # in the password: no piece of it in check or serve output, file or REDIS_URL`, async () => {
    const viaEnv = await writeConfigDir({ 'gateway.yaml': redisGateway('redis://127.0.0.1:1/0'), 'mcp.yaml': JWT_ROUTE });
    let refused = 0;
    // Two URLs at a time: each is three processes.
    for (let i = 0; i < redisUrls.length; i += 2) {
      await Promise.all(
        redisUrls.slice(i, i + 2).map(async (url) => {
          const dir = await writeConfigDir({ 'gateway.yaml': redisGateway(url), 'mcp.yaml': JWT_ROUTE });
          const checked = await run(['check', '--config', dir]);
          if (checked.code === 1) refused++;
          expectNoCanary(`check ${url}`, checked.output);
          expectNoCanary(`serve ${url}`, await serveOutput(dir));
          // REDIS_URL takes the same path through the configuration loader that check prints from.
          const fromEnv = await loadConfig(viaEnv, { REDIS_URL: url }).then(() => '', (err: unknown) => String((err as Error).message));
          expectNoCanary(`REDIS_URL ${url}`, fromEnv);
        }),
      );
    }
    // Most are malformed, and check says so (the rest reach a Redis that is not there, and are logged).
    expect(refused).toBeGreaterThanOrEqual(redisUrls.length / 2);
  }, 240_000);

  it('[J62] credentials in the userinfo of JWKS, introspection, IdP issuer and upstream URLs appear in no check or serve output', async () => {
    const userinfo = `gw:${A}`;
    const dir = await writeConfigDir({
      'gateway.yaml': `listen: { host: 127.0.0.1, port: 0 }\npublic_url: https://mcp.example.test\naudit: { sink: none }\nauthorization_server:\n  enabled: true\n  signing_key: { env: SIGNING_KEY }\n  login: { kind: oidc, issuer: "http://${userinfo}@idp.invalid", client_id: gw }\n`,
      'jwt.yaml': `path: /jwt/mcp\nupstream: "http://u:${B}@10.0.0.5/mcp"\nauthorization_servers: [https://idp.example.test]\ntoken: { jwt: { issuer: https://idp.example.test, jwks_uri: "http://${userinfo}@jwks.invalid/jwks" } }\n`,
      'introspect.yaml': `path: /introspect/mcp\nupstream: http://127.0.0.1:1/mcp\nauthorization_servers: [https://idp.example.test]\ntoken: { introspection: { endpoint: "http://gw:${C}@idp.invalid/introspect", client_id: gw, client_secret: { env: INTROSPECTION_SECRET } } }\n`,
      'builtin.yaml': `path: /builtin/mcp\nupstream: http://127.0.0.1:1/mcp\nscopes_supported: [mcp:read]\nauthorization_servers: ["https://u:${D}@as.example.test"]\ntoken: { jwt: { issuer: https://as.example.test } }\n`,
    });
    const { generateSigningKey } = await import('../../src/authorization-server/keys/signing-keys.js');
    const env = { SIGNING_KEY: JSON.stringify(await generateSigningKey()), INTROSPECTION_SECRET: 'introspection-secret' };
    const checked = await run(['check', '--config', dir], env);
    expect(checked.code, checked.output).toBe(0);
    expect(checked.output).toMatch(/\*\*\*@/); // the URLs are still named, their credentials are not
    expectNoCanary('check', checked.output);
    expectNoCanary('serve', await serveOutput(dir, env));
  }, 60_000);
});
