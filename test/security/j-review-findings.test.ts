/**
 * Findings of the second security review (SECURITY-CASES group J and H), each against the real
 * gateway and a recording upstream, over raw sockets where the header bytes matter:
 * - [J47] the 2026-07-28 routing headers have one reading: `Mcp-Method` / `Mcp-Name` values that are
 *   not visible ASCII (Node reads header bytes as latin1, an upstream may read UTF-8), that open with
 *   `=?` without being exactly the canonical `=?base64?…?=` form, or that come on a GET or DELETE
 *   → 400 with JSON-RPC -32020, nothing upstream; `charset*=` and `Content-Encoding` give a judged
 *   body no second reading;
 * - [H35] identity and credential headers that identity-aware proxies and TLS terminators set
 *   (corpora/header-tricks.json "identityProxies"), DPoP and RFC 9440 certificates never reach the
 *   upstream, in any spelling.
 */
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startJwtStage, stopJwtStage, type JwtStage } from '../helpers/jwt-gateway.js';
import { buildRequest, rawRequest, type RawResponse } from '../helpers/raw-http.js';
import { expectRejection, gatewayYaml, jwtRoute, resourceOf, simplifyRaw, type RecordedRequest } from '../helpers/security-fixtures.js';

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
    ['raw UTF-8 of a zero-width space', utf8Bytes('sh\u200bell'), 'sh\u200bell'],
    ['a C1 control byte', 'shell\x85', 'shell\x85'],
    ['markers in upper case (=?BASE64?)', `=?BASE64?${SHELL}?=`, `=?BASE64?${SHELL}?=`],
    ['markers in mixed case (=?Base64?)', `=?Base64?${SHELL}?=`, `=?Base64?${SHELL}?=`],
    ['the RFC 2047 short marker =?b?', `=?b?${SHELL}?=`, `=?b?${SHELL}?=`],
    ['the RFC 2047 short marker =?B?', `=?B?${SHELL}?=`, `=?B?${SHELL}?=`],
    ['an RFC 2047 encoded word =?utf-8?b?…?=', `=?utf-8?b?${SHELL}?=`, `=?utf-8?b?${SHELL}?=`],
    ['an RFC 2047 encoded word =?UTF-8?B?…?=', `=?UTF-8?B?${SHELL}?=`, `=?UTF-8?B?${SHELL}?=`],
    ['an RFC 2047 Q encoded word', '=?utf-8?q?shell?=', '=?utf-8?q?shell?='],
    ['a plain value opening with =?', '=?shell', '=?shell'],
    ['the marker alone', '=?', '=?'],
    ['=?base64? without its closing ?=', `=?base64?${SHELL}`, `=?base64?${SHELL}`],
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
  const families = (JSON.parse(readFileSync(new URL('./corpora/header-tricks.json', import.meta.url), 'utf8')) as { identityProxies: IdentityFamily[] })
    .identityProxies;
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

  it('the corpus covers every family the review named, several spellings each', () => {
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
