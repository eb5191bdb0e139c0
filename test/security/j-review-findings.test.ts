/**
 * Findings of the second security review (SECURITY-CASES group J and H), each against the real
 * gateway and a recording upstream, over raw sockets where the header bytes matter:
 * - [J47] the 2026-07-28 routing headers have one reading: `Mcp-Method` / `Mcp-Name` values that are
 *   not visible ASCII (Node reads header bytes as latin1, an upstream may read UTF-8), that open with
 *   `=?` and hold a `?=` without being exactly the canonical `=?base64?…?=` form (one with no `?=` is
 *   the literal the sentinel rule makes it), or that come on a GET or DELETE
 *   → 400 with JSON-RPC -32020, nothing upstream; `charset*=` and `Content-Encoding` give a judged
 *   body no second reading;
 * - [H35] identity and credential headers that identity-aware proxies and TLS terminators set
 *   (corpora/header-tricks.json "identityProxies"), DPoP and RFC 9440 certificates never reach the
 *   upstream, in any spelling.
 * - [J54] on the memory store every key class has a budget of its own: one principal flooding
 *   `initialize` loses only its own oldest sessions, never another user's session, refresh token,
 *   registration or revoked grant; revocations and spent one-time values are never evicted.
 */
import { gzipSync } from 'node:zlib';
import { auth } from '@modelcontextprotocol/sdk/client/auth.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { memoryClassBudget } from '../../src/store/memory-class-budgets.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import * as keyNames from '../../src/store/key-names.js';
import { StoreUnavailableError } from '../../src/store/store.js';
import { headlessUser, startBoundedAsGateway } from '../helpers/authorization-server.js';
import { startJwtStage, stopJwtStage, type JwtStage } from '../helpers/jwt-gateway.js';
import { connectWithOAuth, followAuthorization } from '../helpers/mcp-client.js';
import { codeRequestUrl, newVerifier, registerPublicClient } from '../helpers/oauth-requests.js';
import { buildRequest, rawRequest, type RawResponse } from '../helpers/raw-http.js';
import { expectRejection, gatewayYaml, jwtRoute, resourceOf, simplifyRaw, type RecordedRequest } from '../helpers/security-fixtures.js';
import { readCorpus } from './corpora/corpus.js';

/** Runs `run` against `stage`; returns its result and the requests the recording upstream got meanwhile. */
async function upstreamDuring<T>(stage: JwtStage, run: () => Promise<T>): Promise<{ result: T; seen: RecordedRequest[] }> {
  const before = stage.up.requests.length;
  const result = await run();
  await new Promise((r) => setTimeout(r, 20));
  return { result, seen: stage.up.requests.slice(before) };
}

describe('[J47] Mcp-Method and Mcp-Name have one reading (second review, finding 2)', () => {
  const ROUTE = '/names/mcp';
  let stage: JwtStage;
  let token: string;

  beforeAll(async () => {
    stage = await startJwtStage(({ issuer, up }) => ({
      'gateway.yaml': gatewayYaml(),
      'names.yaml': jwtRoute(ROUTE, `${up.origin}/mcp`, issuer, {
        rules: [
          { match: { method: 'tools/call', tool: 'shell' }, deny: true },
          { match: { method: 'tools/call', tool: 'café' }, deny: true },
        ],
      }),
    }));
    token = await stage.issuer.mint({ aud: resourceOf(ROUTE), scope: 'mcp:read' });
  });
  afterAll(() => stopJwtStage(stage));

  /** Header values are written byte for byte: each char of `value` is one latin1 byte. */
  function send(method: string, headers: Array<[string, string]>, body?: string): Promise<RawResponse> {
    return rawRequest(
      stage.gw.port,
      buildRequest({
        method,
        target: ROUTE,
        host: `127.0.0.1:${stage.gw.port}`,
        headers: [['Authorization', `Bearer ${token}`], ['Accept', 'application/json, text/event-stream'], ...headers],
        body,
      }),
    );
  }
  const call = (name: string, method = 'tools/call') => JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: { name, arguments: {} } });
  /** The UTF-8 bytes of `text` as a header value (one char per byte). */
  const utf8Bytes = (text: string) => Buffer.from(text, 'utf8').toString('latin1');
  const b64 = (text: string) => Buffer.from(text, 'utf8').toString('base64');
  const b64Bytes = (bytes: number[]) => Buffer.from(bytes).toString('base64');
  const SHELL = b64('shell'); // c2hlbGw=

  function expectHeaderMismatch(res: RawResponse, id: number | null): void {
    expect(res.status, res.body).toBe(400);
    const body = JSON.parse(res.body) as { jsonrpc: string; id: unknown; error: { code: number; message: string } };
    expect(body).toEqual({ jsonrpc: '2.0', id, error: { code: -32020, message: expect.any(String) } });
  }

  // [label, Mcp-Name as sent (one char per byte), the name the body carries]
  const REFUSED_NAMES: Array<[string, string, string]> = [
    ['raw UTF-8 bytes of café, body the latin1 reading of them', utf8Bytes('café'), 'cafÃ©'],
    ['raw UTF-8 bytes of café, body café', utf8Bytes('café'), 'café'],
    ['a latin1 byte (é = 0xE9), body café', 'caf\xe9', 'café'],
    ['a latin1 byte (é = 0xE9), body its latin1 reading', 'caf\xe9', 'caf\xe9'],
    ['raw UTF-8 of a fullwidth letter', utf8Bytes('ｓhell'), 'ｓhell'],
    // The body says `shell`: a body name holding U+200B or U+0085 is itself refused (K76), before any header is read.
    ['raw UTF-8 of a zero-width space', utf8Bytes('sh\u200bell'), 'shell'],
    ['a C1 control byte', 'shell\x85', 'shell'],
    ['markers in upper case (=?BASE64?)', `=?BASE64?${SHELL}?=`, `=?BASE64?${SHELL}?=`],
    ['markers in mixed case (=?Base64?)', `=?Base64?${SHELL}?=`, `=?Base64?${SHELL}?=`],
    ['the RFC 2047 short marker =?b?', `=?b?${SHELL}?=`, `=?b?${SHELL}?=`],
    ['the RFC 2047 short marker =?B?', `=?B?${SHELL}?=`, `=?B?${SHELL}?=`],
    ['an RFC 2047 encoded word =?utf-8?b?…?=', `=?utf-8?b?${SHELL}?=`, `=?utf-8?b?${SHELL}?=`],
    ['an RFC 2047 encoded word =?UTF-8?B?…?=', `=?UTF-8?B?${SHELL}?=`, `=?UTF-8?B?${SHELL}?=`],
    ['an RFC 2047 Q encoded word', '=?utf-8?q?shell?=', '=?utf-8?q?shell?='],
    ['=?base64? without its closing ?=, body its decoded reading (the header is the literal)', `=?base64?${SHELL}`, 'shell'],
    ['bytes after the closing ?=', `=?base64?${SHELL}?=x`, 'shell'],
    ['missing padding', '=?base64?c2hlbGw?=', 'shell'],
    ['non-canonical trailing bits (c2hlbGx=)', '=?base64?c2hlbGx=?=', 'shell'],
    ['too much padding', '=?base64?c2hlbGw==?=', 'shell'],
    ['padding in the middle', '=?base64?c2g=bGw=?=', 'shell'],
    ['a space inside the base64', '=?base64?c2hl bGw=?=', 'shell'],
    ['a tab inside the base64', '=?base64?c2hl\tbGw=?=', 'shell'],
    ['a space after the marker', `=?base64? ${SHELL}?=`, 'shell'],
    ['the URL-safe alphabet (Pz8_ for ???)', '=?base64?Pz8_?=', '???'],
    ['bytes that are not UTF-8 (ff fe fd)', `=?base64?${b64Bytes([0xff, 0xfe, 0xfd])}?=`, '\ufffd\ufffd\ufffd'],
    ['an overlong UTF-8 slash (c0 af)', `=?base64?${b64Bytes([0xc0, 0xaf])}?=`, '/'],
    ['a UTF-8-encoded surrogate (CESU-8)', `=?base64?${b64Bytes([0xed, 0xa0, 0x80])}?=`, '\ufffd'],
    ['a byte-order mark before the name', `=?base64?${b64('\ufeffshell')}?=`, 'shell'],
    ['a truncated UTF-8 sequence', `=?base64?${b64Bytes([0x63, 0x61, 0x66, 0xc3])}?=`, 'caf\ufffd'],
  ];

  it.each(REFUSED_NAMES)('[J47] Mcp-Name with %s → 400 -32020, nothing upstream', async (_label, header, bodyName) => {
    const { result, seen } = await upstreamDuring(stage, () => send('POST', [['Mcp-Method', 'tools/call'], ['Mcp-Name', header]], call(bodyName)));
    expectHeaderMismatch(result, 1);
    expect(seen).toEqual([]);
  });

  it('[J47] a malformed Mcp-Name is refused on methods whose name the policy does not compare, too', async () => {
    for (const header of [utf8Bytes('tâche-1'), `=?BASE64?${b64('task-1')}?=`, '=?base64?dGFzay0x?=x']) {
      const { result, seen } = await upstreamDuring(stage, () =>
        send('POST', [['Mcp-Method', 'tools/list'], ['Mcp-Name', header]], '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'),
      );
      expectHeaderMismatch(result, 1);
      expect(seen).toEqual([]);
    }
  });

  it('[J47] a repeated Mcp-Name or Mcp-Method whose joined value equals the body → 400 -32020, nothing upstream', async () => {
    // Node joins them ("shell, x"); an upstream that reads the first sees "shell".
    for (const [headers, name] of [
      [[['Mcp-Method', 'tools/call'], ['Mcp-Name', 'shell'], ['mcp-name', 'x']], 'shell, x'],
      [[['Mcp-Method', 'tools/call'], ['Mcp-Method', 'tools/call'], ['Mcp-Name', 'echo']], 'echo'],
    ] as Array<[Array<[string, string]>, string]>) {
      const { result, seen } = await upstreamDuring(stage, () => send('POST', headers, call(name)));
      expectHeaderMismatch(result, 1);
      expect(seen).toEqual([]);
    }
  });

  // [label, Mcp-Method as sent]; the body's method is plain tools/call (the body's own reading
  // refuses any other character in a method), so the header must be plain tools/call too.
  const REFUSED_METHODS: Array<[string, string]> = [
    ['raw UTF-8 bytes of tools/cäll', utf8Bytes('tools/cäll')],
    ['a latin1 byte', 'tools/c\xe4ll'],
    ['the base64 form of tools/call', `=?base64?${b64('tools/call')}?=`],
    ['upper-case markers around tools/call', `=?BASE64?${b64('tools/call')}?=`],
    ['a tab inside', 'tools/\tcall'],
  ];

  it.each(REFUSED_METHODS)('[J47] Mcp-Method with %s → 400 -32020, nothing upstream', async (_label, header) => {
    const { result, seen } = await upstreamDuring(stage, () => send('POST', [['Mcp-Method', header]], call('echo')));
    expectHeaderMismatch(result, 1);
    expect(seen).toEqual([]);
  });

  // [label, Mcp-Name as sent, the name the body carries]
  const ACCEPTED: Array<[string, string, string]> = [
    ['a plain name', 'echo', 'echo'],
    ['a plain name with inner spaces and punctuation', 'my tool: v2 (beta)!', 'my tool: v2 (beta)!'],
    ['the base64 form of a non-ASCII name', `=?base64?${b64('outil-été')}?=`, 'outil-été'],
    ['the base64 form with / in its alphabet (Pz8/ for ???)', '=?base64?Pz8/?=', '???'],
    ['the base64 form of a name that looks like the sentinel', `=?base64?${b64(`=?BASE64?${SHELL}?=`)}?=`, `=?BASE64?${SHELL}?=`],
    ['the base64 form of a name holding the markers', `=?base64?${b64('a?=b=?c')}?=`, 'a?=b=?c'],
    ['the base64 form of the empty name', '=?base64??=', ''],
    // The sentinel needs both markers (2026-07-28 "Value Encoding"); with no ?= after the opening
    // no decoder reads an encoded word, so these are the literals the body must equal.
    ['a plain value opening with =? and no ?= after it', '=?shell', '=?shell'],
    ['the marker alone', '=?', '=?'],
    ['=?base64? without its closing ?= (a literal)', `=?base64?${SHELL}`, `=?base64?${SHELL}`],
  ];

  it.each(ACCEPTED)('[J47] Mcp-Name as %s is accepted and reaches the upstream unchanged', async (_label, header, bodyName) => {
    const { result, seen } = await upstreamDuring(stage, () => send('POST', [['Mcp-Method', 'tools/call'], ['Mcp-Name', header]], call(bodyName)));
    expect(result.status, result.body).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.headers.filter(([n]) => n.toLowerCase() === 'mcp-name').map(([, v]) => v)).toEqual([header]);
    expect(JSON.parse(seen[0]!.body.toString('utf8'))).toMatchObject({ params: { name: bodyName } });
  });

  it('[J47] a denied tool named in a well-formed header is still denied by policy (403), nothing upstream', async () => {
    for (const [header, name] of [['shell', 'shell'], [`=?base64?${b64('café')}?=`, 'café'], [`=?base64?${SHELL}?=`, 'shell']] as const) {
      const { result, seen } = await upstreamDuring(stage, () => send('POST', [['Mcp-Method', 'tools/call'], ['Mcp-Name', header]], call(name)));
      expect(result.status, result.body).toBe(403);
      expect(seen).toEqual([]);
    }
  });

  const ROUTING_HEADER_SETS: Array<Array<[string, string]>> = [
    [['Mcp-Method', 'tools/call']],
    [['Mcp-Name', 'shell']],
    [['Mcp-Method', 'tools/call'], ['Mcp-Name', 'shell']],
    [['mcp-method', 'tools/list']],
    [['MCP-NAME', `=?base64?${SHELL}?=`]],
    [['Mcp-Method', '']],
  ];
  const NO_BODY_CASES = (['GET', 'DELETE'] as const).flatMap((method) => ROUTING_HEADER_SETS.map((headers) => [method, headers.map(([n, v]) => `${n}: ${v}`).join(', '), headers] as const));

  it.each(NO_BODY_CASES)('[J47] %s carrying %s → 400 -32020 (id null), nothing upstream', async (method, _label, headers) => {
    const { result, seen } = await upstreamDuring(stage, () => send(method, [...headers, ['Mcp-Session-Id', 'session-1']]));
    expectHeaderMismatch(result, null);
    expect(seen).toEqual([]);
  });

  it('[J47] a DELETE without routing headers is still forwarded', async () => {
    const { result, seen } = await upstreamDuring(stage, () => send('DELETE', []));
    expect(result.status, result.body).toBe(200);
    expect(seen.map((r) => r.method)).toEqual(['DELETE']);
  });
});

describe('[J47] a judged body has one decoding: charset*= and Content-Encoding (second review, suspicion 3)', () => {
  const ROUTE = '/body/mcp';
  let stage: JwtStage;
  let token: string;
  const ECHO = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}';

  beforeAll(async () => {
    stage = await startJwtStage(({ issuer, up }) => ({
      'gateway.yaml': gatewayYaml(),
      'body.yaml': jwtRoute(ROUTE, `${up.origin}/mcp`, issuer, { rules: [{ match: { method: 'tools/call', tool: 'shell' }, deny: true }] }),
    }));
    token = await stage.issuer.mint({ aud: resourceOf(ROUTE), scope: 'mcp:read' });
  });
  afterAll(() => stopJwtStage(stage));

  function post(headers: Array<[string, string]>, body: string | Buffer = ECHO, contentType = 'application/json'): Promise<RawResponse> {
    return rawRequest(
      stage.gw.port,
      buildRequest({ method: 'POST', target: ROUTE, host: `127.0.0.1:${stage.gw.port}`, headers: [['Authorization', `Bearer ${token}`], ...headers], body, contentType }),
    );
  }

  const REFUSED_CONTENT_TYPES = [
    "application/json; charset*=utf-8''utf-16",
    "application/json; charset*=UTF-8''UTF-16LE",
    "application/json; charset*=''iso-8859-1",
    "application/json; charset*=utf-8'en'utf%2D16",
    "application/json; CHARSET*=utf-8''windows-1252",
    "application/json;charset*=us-ascii''us-ascii",
    'application/json; charset*=utf-16',
    "application/json; charset*=utf-8''utf%ZZ8",
    'application/json; charset*0=utf-16',
    "application/json; charset*0*=utf-8''utf-16",
    "application/json; charset*0=utf-; charset*1=8",
    "application/json; charset=utf-8; charset*=utf-8''utf-16",
    "application/json; charset*=utf-8''utf-8; charset=utf-16",
    "application/json; charset*=utf-8''utf-8; charset=utf-8",
  ];

  it.each(REFUSED_CONTENT_TYPES)('[J47] Content-Type %s → 400 invalid_request, nothing upstream', async (contentType) => {
    const { result, seen } = await upstreamDuring(stage, async () => simplifyRaw(await post([], ECHO, contentType)));
    expectRejection(result, { status: 400, error: 'invalid_request' });
    expect(seen).toEqual([]);
  });

  it.each(["application/json; charset*=utf-8''utf-8", "application/json; charset*=UTF-8''UTF-8", "application/json; charset*=''utf8", 'application/json; charset=utf-8'])(
    '[J47] Content-Type %s is read and forwarded',
    async (contentType) => {
      const { result, seen } = await upstreamDuring(stage, () => post([], ECHO, contentType));
      expect(result.status, result.body).toBe(200);
      expect(seen).toHaveLength(1);
    },
  );

  const REFUSED_ENCODINGS: Array<[string, Array<[string, string]>]> = [
    ...['gzip', 'x-gzip', 'GZIP', 'deflate', 'br', 'zstd', 'compress', 'aes128gcm', 'identity, gzip', 'gzip, identity', 'identity;q=1', 'identityx'].map(
      (value): [string, Array<[string, string]>] => [value, [['Content-Encoding', value]]],
    ),
    ['two headers: identity then gzip', [['Content-Encoding', 'identity'], ['Content-Encoding', 'gzip']]],
  ];

  it.each(REFUSED_ENCODINGS)('[J47] Content-Encoding %s → 400 invalid_request, nothing upstream', async (_label, headers) => {
    const { result, seen } = await upstreamDuring(stage, async () => simplifyRaw(await post(headers)));
    expectRejection(result, { status: 400, error: 'invalid_request' });
    expect(seen).toEqual([]);
  });

  it('[J47] a gzip body naming a denied tool is refused as content-encoded (400), not judged, nothing upstream', async () => {
    const body = gzipSync('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell"}}');
    const { result, seen } = await upstreamDuring(stage, async () => simplifyRaw(await post([['Content-Encoding', 'gzip']], body)));
    expectRejection(result, { status: 400, error: 'invalid_request' });
    expect(result.body).toMatch(/content-encoded/);
    expect(seen).toEqual([]);
  });

  it.each(['identity', 'IDENTITY'])('[J47] Content-Encoding %s is read and forwarded', async (value) => {
    const { result, seen } = await upstreamDuring(stage, () => post([['Content-Encoding', value]]));
    expect(result.status, result.body).toBe(200);
    expect(seen).toHaveLength(1);
  });
});

interface IdentityFamily {
  name: string;
  source: string;
  headers: Array<[string, string]>;
}

describe('[H35] identity-proxy, DPoP and client-certificate headers never reach the upstream (second review, finding 3)', () => {
  const families = readCorpus<{ identityProxies: IdentityFamily[] }>('header-tricks.json').identityProxies;
  const API_KEY = 'operator-upstream-api-key';
  /** route → the credential the upstream must receive (none on /plain). */
  const ROUTES = { '/key/mcp': { header: 'x-api-key', value: API_KEY }, '/plain/mcp': undefined } as const;
  let stage: JwtStage;
  let token: string;

  beforeAll(async () => {
    stage = await startJwtStage(
      ({ issuer, up }) => ({
        'gateway.yaml': gatewayYaml(),
        'key.yaml': jwtRoute('/key/mcp', `${up.origin}/mcp`, issuer, { upstream_auth: { kind: 'static', header: 'X-Api-Key', value: { env: 'J_API_KEY' } } }),
        'plain.yaml': jwtRoute('/plain/mcp', `${up.origin}/mcp`, issuer),
      }),
      { J_API_KEY: API_KEY },
    );
    token = await stage.issuer.mint({ aud: [resourceOf('/key/mcp'), resourceOf('/plain/mcp')], scope: 'mcp:read' });
  });
  afterAll(() => stopJwtStage(stage));

  function post(path: string, headers: Array<[string, string]>): Promise<RawResponse> {
    return rawRequest(
      stage.gw.port,
      buildRequest({
        method: 'POST',
        target: path,
        host: `127.0.0.1:${stage.gw.port}`,
        headers: [['Authorization', `Bearer ${token}`], ...headers],
        body: '{"jsonrpc":"2.0","id":1,"method":"ping"}',
      }),
    );
  }
  const normalise = (name: string) => name.toLowerCase().replaceAll('_', '-');

  it('[H35] the corpus covers every family the review named, several spellings each', () => {
    const names = families.flatMap((f) => f.headers.map(([n]) => n.toLowerCase()));
    for (const required of ['dpop', 'client-cert', 'client-cert-chain', 'x-ms-client-principal', 'x-userinfo', 'x-access-token', 'x-id-token', 'gap-auth', 'remote-user']) {
      expect(names, required).toContain(required);
    }
    for (const prefix of ['x-ms-client-principal-', 'cf-access-', 'x-amzn-oidc-', 'x-goog-authenticated-', 'x-goog-iap-', 'x-pomerium-', 'x-webauth-', 'x-ssl-', 'ssl-client-', 'x-client-cert', 'x-consumer-', 'x-auth-request-', 'x-remote-']) {
      expect(names.some((n) => n.startsWith(prefix)), prefix).toBe(true);
    }
    for (const family of families) expect(family.headers.length, family.name).toBeGreaterThanOrEqual(2);
  });

  const cases = families.flatMap((family) => Object.keys(ROUTES).map((path) => [family.name, path as keyof typeof ROUTES, family] as const));

  it.each(cases)('[H35] %s at %s: none of its headers reaches the upstream, the credential does', async (_name, path, family) => {
    // Each header as sent, and in its `_` spelling (CGI readers fold it onto the `-` one).
    const headers = family.headers.flatMap(([name, value]): Array<[string, string]> => [[name, value], [name.replaceAll('-', '_'), `${value}-underscored`]]);
    const { result, seen } = await upstreamDuring(stage, () => post(path, headers));
    expect(result.status, result.body).toBe(200);
    expect(seen).toHaveLength(1);
    const forwarded = seen[0]!.headers;
    const sent = new Set(headers.map(([n]) => normalise(n)));
    expect(forwarded.filter(([n]) => sent.has(normalise(n)))).toEqual([]);
    const everything = forwarded.map(([n, v]) => `${n}: ${v}`).join('\n');
    for (const [, value] of family.headers) expect(everything).not.toContain(value);
    const credential = ROUTES[path];
    if (credential) expect(forwarded.filter(([n]) => n.toLowerCase() === credential.header).map(([, v]) => v)).toEqual([credential.value]);
    expect(forwarded.filter(([n]) => n.toLowerCase() === 'authorization')).toEqual([]);
  });

  it("[H35] every family at once cannot displace the operator's X-Api-Key; a client's X-Api-Key on a route without one passes", async () => {
    const all = families.flatMap((f) => f.headers);
    const keyed = await upstreamDuring(stage, () => post('/key/mcp', [...all, ['X-Api-Key', 'client-chosen-key']]));
    expect(keyed.result.status, keyed.result.body).toBe(200);
    expect(keyed.seen[0]!.headers.filter(([n]) => n.toLowerCase() === 'x-api-key').map(([, v]) => v)).toEqual([API_KEY]);
    // Not an identity header: an upstream without an injected key may read the client's own.
    const plain = await upstreamDuring(stage, () => post('/plain/mcp', [...all, ['X-Api-Key', 'client-chosen-key']]));
    expect(plain.result.status, plain.result.body).toBe(200);
    const forwarded = plain.seen[0]!.headers;
    expect(forwarded.filter(([n]) => n.toLowerCase() === 'x-api-key').map(([, v]) => v)).toEqual(['client-chosen-key']);
    const sent = new Set(all.map(([n]) => n.toLowerCase()));
    expect(forwarded.filter(([n]) => sent.has(n.toLowerCase()))).toEqual([]);
  });
});

describe('[J54] one principal flooding `initialize` evicts only its own sessions (second review, finding 1; memory store, max_entries 200)', () => {
  const MAX_ENTRIES = 200;
  /** Well past the session budget: before the fix, 210 evicted another user's session. */
  const FLOOD = 260;
  let gateway: { issuer: string; stop(): Promise<void> };
  let issuer: string;
  const mcpUrl = () => `${issuer}/everything/mcp`;

  beforeAll(async () => {
    gateway = await startBoundedAsGateway(MAX_ENTRIES);
    issuer = gateway.issuer;
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  /** A user's grant through a client registered by hand: its access and refresh tokens. */
  async function grantOf(user: string) {
    const client = await registerPublicClient(issuer, `j54-${user}`);
    const verifier = newVerifier();
    const callback = await followAuthorization(codeRequestUrl(issuer, { client, verifier, state: 's', resource: mcpUrl(), scope: 'mcp:read' }), client.redirectUri, { onPage: headlessUser(user) });
    const issued = await tokenRequest({ grant_type: 'authorization_code', code: callback.searchParams.get('code')!, code_verifier: verifier, client_id: client.id, redirect_uri: client.redirectUri, resource: mcpUrl() });
    expect(issued.status).toBe(200);
    return { client, accessToken: issued.json.access_token!, refreshToken: issued.json.refresh_token! };
  }

  async function tokenRequest(params: Record<string, string>) {
    const res = await fetch(`${issuer}/token`, { method: 'POST', body: new URLSearchParams(params) });
    return { status: res.status, json: (await res.json()) as Record<string, string> };
  }

  /** One MCP POST with `token` (and `session`): status, the session id handed out, the body. */
  async function mcpPost(token: string, message: Record<string, unknown>, session?: string) {
    const res = await fetch(mcpUrl(), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(session && { 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' }) },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...message }),
    });
    return { status: res.status, session: res.headers.get('mcp-session-id') ?? undefined, body: await res.text() };
  }
  const initialize = (token: string) => mcpPost(token, { method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'j54', version: '0' } } });
  const ping = (token: string, session: string) => mcpPost(token, { method: 'ping' }, session);

  it('[J54] 260 initialize by mallory: alice\'s session, refresh token, registration and revoked grant are untouched; mallory loses only her own oldest sessions', async () => {
    // Alice, through the SDK: a live MCP session, a refresh token, a registered client.
    const alice = await connectWithOAuth(mcpUrl(), { onPage: headlessUser('alice') });
    try {
      const aliceSession = alice.transport.sessionId!;
      expect(aliceSession).toBeTruthy();
      // A second grant of alice's, revoked: its refresh token is refused from now on.
      const revoked = await grantOf('alice');
      expect((await fetch(`${issuer}/revoke`, { method: 'POST', body: new URLSearchParams({ token: revoked.refreshToken, client_id: revoked.client.id }) })).status).toBe(200);
      const refreshRevoked = () => tokenRequest({ grant_type: 'refresh_token', refresh_token: revoked.refreshToken, client_id: revoked.client.id });
      expect((await refreshRevoked()).json.error).toBe('invalid_grant');

      // Mallory floods initialize; every one is a new upstream session, so a new binding in the store.
      const mallory = await grantOf('mallory');
      const floodSessions: string[] = [];
      for (let batch = 0; batch < FLOOD; batch += 20) {
        const answers = await Promise.all(Array.from({ length: 20 }, () => initialize(mallory.accessToken)));
        for (const answer of answers) {
          expect(answer.status, answer.body).toBe(200);
          floodSessions.push(answer.session!);
        }
      }
      expect(new Set(floodSessions).size).toBe(FLOOD);

      // Alice's session binding: her session still works, through the SDK and by hand.
      const echoed = await alice.client.callTool({ name: 'echo', arguments: { message: 'after the flood' } });
      expect(echoed.content).toEqual([{ type: 'text', text: 'Echo: after the flood' }]);
      expect((await ping(alice.tokens()!.access_token, aliceSession)).status).toBe(200);
      // Her refresh token still rotates (refresh: and refresh-family: survived).
      const before = alice.tokens()!;
      await expect(auth(alice.provider, { serverUrl: mcpUrl() })).resolves.toBe('AUTHORIZED');
      expect(alice.tokens()!.refresh_token).not.toBe(before.refresh_token);
      // Her registration: the client is still known (a consent page, not an unknown-client page).
      const clientId = alice.provider.clientInformation()!.client_id;
      const page = await fetch(codeRequestUrl(issuer, { client: { id: clientId, redirectUri: alice.provider.redirectUrl }, verifier: newVerifier(), state: 's', resource: mcpUrl() }));
      expect(page.status).toBe(200);
      expect(await page.text()).toContain('mcp-auth-gateway test harness');
      // The revoked grant stays revoked (its grant: marker survived).
      expect(await refreshRevoked()).toMatchObject({ status: 400, json: { error: 'invalid_grant' } });

      // Mallory's own oldest sessions went; her newest still work.
      const oldest = await ping(mallory.accessToken, floodSessions[0]!);
      expect(oldest.status).toBe(404);
      expect(JSON.parse(oldest.body)).toEqual({ error: 'not_found', error_description: 'Unknown session' });
      expect((await ping(mallory.accessToken, floodSessions.at(-1)!)).status).toBe(200);
      // Alice's session is hers alone: mallory presenting it is refused, as before the flood.
      expect((await ping(mallory.accessToken, aliceSession)).status).toBe(404);
    } finally {
      await alice.close();
    }
  });
});

describe('[J54] memory store: every key class has a budget of its own (second review, finding 1)', () => {
  const LONG_TTL = 3_600_000;
  /** One key builder per class, each from key-names.ts: index i → the i-th key of that class. */
  const CLASSES: Record<string, (i: number) => string> = {
    session: (i) => keyNames.sessionBindingKey('/r/mcp', `sid-${i}`),
    client: (i) => keyNames.clientKey(`client-${i}`),
    code: (i) => keyNames.authorizationCodeKey(`code-${i}`),
    'code-used': (i) => keyNames.usedCodeKey(`code-${i}`),
    refresh: (i) => keyNames.refreshTokenKey(`rt-${i}`),
    'refresh-family': (i) => keyNames.refreshFamilyKey(`grant-${i}`),
    grant: (i) => keyNames.grantKey(`grant-${i}`),
    consent: (i) => keyNames.consentKey('https://as.example', `user-${i}`, 'client'),
    'pending-authz': (i) => keyNames.pendingAuthorizationKey(`state-${i}`),
    'idp-token': (i) => keyNames.idpTokenKey(`grant-${i}`),
    'idp-refresh': (i) => keyNames.idpRefreshLockKey(`grant-${i}`),
    ratelimit: (i) => keyNames.rateLimitKey('authorize', `10.0.0.${i}`),
    'idp-logout-jti': (i) => keyNames.logoutTokenKey('https://idp.example', `jti-${i}`),
    'route-limit': (i) => keyNames.routeRateLimitKey('/r/mcp', 'per principal 5/1m', `who-${i}`),
    'dpop-jti': (i) => keyNames.dpopProofKey('jkt', `jti-${i}`),
    'dpop-share': (i) => keyNames.dpopShareKey(`owner-${i}`),
    'sign-in-share': (i) => keyNames.signInShareKey(`owner-${i}`),
    'id-jag-jti': (i) => keyNames.idJagKey('https://idp.example', `jti-${i}`),
    'account-apps': (i) => keyNames.connectedAppsKey('https://as.example', `user-${i}`),
    'account-app-used': (i) => keyNames.appLastUsedKey('https://as.example', `user-${i}`, 'client'),
    'account-session': (i) => keyNames.accountSessionKey(`session-${i}`),
    task: (i) => keyNames.taskOwnerKey('/r/mcp', `task-${i}`),
    'event-id': (i) => keyNames.eventIdOwnerKey('/r/mcp', `event-${i}`),
    'upstream-grant': (i) => keyNames.upstreamGrantKey('https://as.example', `user-${i}`, '/r/mcp'),
    'upstream-refresh': (i) => keyNames.upstreamRefreshLockKey(`grant-${i}`),
    'upstream-client': (i) => keyNames.upstreamClientKey('/r/mcp', `https://as-${i}.example`),
    'upstream-connect': (i) => keyNames.upstreamConnectKey(`state-${i}`),
    'connect-link': (i) => keyNames.connectLinkKey(`link-${i}`),
    'connect-link-of': (i) => keyNames.connectLinkOfKey('https://as.example', `user-${i}`, '/r/mcp'),
    'upstream-used': (i) => keyNames.upstreamUsedKey(`grant-${i}`),
    'owner-share': (i) => keyNames.ownerShareKey(`owner-${i}`),
  };
  const CLASS_NAMES = Object.keys(CLASSES);

  /** Time-ordered logs: kept apart from every LRU (appendToLog), so no class budget applies. */
  const LOG_CLASSES = ['revoked-grants', 'idp-session', 'idp-subject', 'principal-tasks'];

  it('[J54] the builders cover every class key-names.ts names, and each key lands in its namespace', () => {
    for (const [name, build] of Object.entries(CLASSES)) expect(build(1).split(':')[0]).toBe(name);
    const namespaces = Object.entries(keyNames)
      .filter(([name, value]) => name !== 'hashKeyPart' && typeof value === 'function')
      .map(([, build]) => (build as (...parts: string[]) => string)('x', 'x', 'x').split(':')[0]);
    expect(new Set(namespaces)).toEqual(new Set([...CLASS_NAMES, ...LOG_CLASSES]));
    expect(memoryClassBudget('grant', 10)).toEqual({ maxEntries: 10, whenFull: 'refuse' });
    for (const name of ['grant', 'code-used', 'idp-logout-jti', 'dpop-jti', 'id-jag-jti', 'account-apps']) expect(memoryClassBudget(name, 10).whenFull).toBe('refuse');
  });

  type FloodOp = { op: 'set' | 'setIfAbsent' | 'increment' | 'take' | 'delete'; index: number; owner: number };
  const floodOp: fc.Arbitrary<FloodOp> = fc.record({
    op: fc.constantFrom('set', 'setIfAbsent', 'increment', 'take', 'delete'),
    index: fc.nat({ max: 400 }),
    owner: fc.nat({ max: 3 }),
  });

  /** Applies one flood write to `store`; a class that never evicts may refuse it (503), nothing else may fail. */
  async function apply(store: MemoryStore, key: string, write: FloodOp): Promise<void> {
    const value = `owner-${write.owner}`;
    try {
      if (write.op === 'set') await store.set(key, value, LONG_TTL);
      else if (write.op === 'setIfAbsent') await store.setIfAbsent(key, value, LONG_TTL);
      else if (write.op === 'increment') await store.increment(key, LONG_TTL);
      else if (write.op === 'take') await store.take(key);
      else await store.delete(key);
    } catch (err) {
      expect(err).toBeInstanceOf(StoreUnavailableError);
    }
  }

  it('[J54] any interleaving of writes in one class never removes a key of another class before its TTL', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 2, max: 24 }),
        fc.constantFrom(...CLASS_NAMES),
        // Victims: other classes' keys, interleaved with the flood (each victim write is a `null` slot in the flood's order).
        fc.array(fc.tuple(fc.constantFrom(...CLASS_NAMES), fc.nat({ max: 40 })), { maxLength: 60 }),
        fc.array(fc.option(floodOp, { nil: null, freq: 6 }), { minLength: 1, maxLength: 500 }),
        async (maxEntries, flooded, victimPicks, schedule) => {
          const store = new MemoryStore({ maxEntries });
          // At most a class's own budget of victims (so the victims never evict each other), distinct owners for sessions.
          const victims = new Map<string, string>();
          const perClass = new Map<string, number>();
          for (const [name, i] of victimPicks) {
            if (name === flooded) continue;
            const count = perClass.get(name) ?? 0;
            if (count >= Math.min(memoryClassBudget(name, maxEntries).maxEntries, memoryClassBudget(name, maxEntries).perOwner ?? Infinity)) continue;
            const key = CLASSES[name]!(1000 + i);
            if (victims.has(key)) continue;
            perClass.set(name, count + 1);
            victims.set(key, `victim-${name}-${i}`);
          }
          const pending = [...victims];
          for (const slot of schedule) {
            if (slot === null) {
              const next = pending.shift();
              if (next) await store.set(next[0], next[1], LONG_TTL);
            } else await apply(store, CLASSES[flooded]!(slot.index), slot);
          }
          for (const [key, value] of pending) await store.set(key, value, LONG_TTL);
          for (const [key, value] of victims) expect(await store.get(key), key).toBe(value);
        },
      ),
      { numRuns: 150 },
    );
  });

  it('[J54] revocations and spent one-time values are never evicted: a full class refuses the new key (503), every old one stays', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 30 }),
        fc.constantFrom('grant', 'code-used', 'idp-logout-jti', 'dpop-jti'),
        fc.array(fc.nat({ max: 100 }), { minLength: 1, maxLength: 200 }),
        async (maxEntries, name, writes) => {
          const store = new MemoryStore({ maxEntries });
          const kept = new Set<string>();
          for (const i of writes) {
            const key = CLASSES[name]!(i);
            const fresh = !kept.has(key);
            const wrote = await store.setIfAbsent(key, 'marker', LONG_TTL).then(
              (claimed) => claimed,
              (err: unknown) => (expect(err).toBeInstanceOf(StoreUnavailableError), 'refused' as const),
            );
            if (wrote === 'refused') expect(kept.size).toBe(maxEntries);
            else expect(wrote).toBe(fresh);
            if (wrote === true) kept.add(key);
          }
          for (const key of kept) expect(await store.get(key)).toBe('marker');
        },
      ),
      { numRuns: 100 },
    );
  });

  it('[J54] a full never-evicted class takes new keys again once old ones reach their TTL', async () => {
    const store = new MemoryStore({ maxEntries: 3 });
    for (let i = 0; i < 3; i++) await store.set(keyNames.grantKey(`g${i}`), 'revoked', 40);
    await expect(store.set(keyNames.grantKey('late'), 'revoked', LONG_TTL)).rejects.toBeInstanceOf(StoreUnavailableError);
    await new Promise((r) => setTimeout(r, 60));
    await store.set(keyNames.grantKey('late'), 'revoked', LONG_TTL);
    expect(await store.get(keyNames.grantKey('late'))).toBe('revoked');
  });

  it('[J54] session bindings: one principal over its share on a route loses its own oldest, never another principal\'s', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 10, max: 200 }), fc.integer({ min: 1, max: 600 }), fc.nat({ max: 3 }), async (maxEntries, flood, others) => {
        const store = new MemoryStore({ maxEntries });
        const perOwner = memoryClassBudget('session', maxEntries).perOwner!;
        // Other principals: each up to its own share, together within what the flooder leaves.
        const victims: Array<[string, string]> = [];
        for (let o = 0; o < others && victims.length + perOwner <= maxEntries - perOwner; o++) {
          for (let s = 0; s < perOwner; s++) victims.push([keyNames.sessionBindingKey('/r', `victim-${o}-${s}`), `["iss","user-${o}","c"]`]);
        }
        for (const [key, owner] of victims) await store.setIfAbsent(key, owner, LONG_TTL);
        for (let i = 0; i < flood; i++) await store.setIfAbsent(keyNames.sessionBindingKey('/r', `flood-${i}`), '["iss","mallory","evil"]', LONG_TTL);
        for (const [key, owner] of victims) expect(await store.get(key)).toBe(owner);
        // The flooder keeps exactly its newest `perOwner` sessions on that route.
        const live = [];
        for (let i = 0; i < flood; i++) if ((await store.get(keyNames.sessionBindingKey('/r', `flood-${i}`))) !== undefined) live.push(i);
        expect(live).toEqual(Array.from({ length: Math.min(flood, perOwner) }, (_, k) => flood - Math.min(flood, perOwner) + k));
        // Another route is another share.
        await store.setIfAbsent(keyNames.sessionBindingKey('/other', 'flood-0'), '["iss","mallory","evil"]', LONG_TTL);
        expect(await store.get(keyNames.sessionBindingKey('/r', `flood-${flood - 1}`))).toBeDefined();
      }),
      { numRuns: 60 },
    );
  });
});
