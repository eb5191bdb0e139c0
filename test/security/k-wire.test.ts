/**
 * SECURITY-CASES group K, what one request may say on the wire (SECURITY.md, DESIGN.md §8.3):
 * - [K69] `MCP-Protocol-Version` and a message's `_meta` protocol version
 *   (`io.modelcontextprotocol/protocolVersion`, MCP 2026-07-28) that disagree, a repeated header, a
 *   folded key: 400 JSON-RPC -32020, nothing forwarded (batches too);
 * - [K70] HTTP/1.0 with Transfer-Encoding and `Connection: keep-alive`: the 400, the connection
 *   closed, and nothing pipelined behind it answered or forwarded (raw sockets; other codings,
 *   HTTP/1.1 TE+CL, several pipelined requests, in one write or after the answer);
 * - [K76] control, format, invisible and non-character code points (C0, C1, bidi, zero-width, BOM,
 *   separators, tags, noncharacters, surrogates) and non-NFC text in tool, prompt and resource
 *   names: 400, nothing forwarded;
 * - [K83] a batch cannot hide a tools/call, resources/read or prompts/get from the audit log.
 * Against the real gateway in front of a recording upstream.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/observability/audit.js';
import { MAX_AUDITED_LINES } from '../../src/policy/decision-audit.js';
import { recordingAudit } from '../helpers/authorization-server.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { openRaw, rawRequest } from '../helpers/raw-http.js';
import { gatewayYaml, jwtRoute, resourceOf, startRecordingUpstream, startTestIssuer, type RecordingUpstream, type TestIssuer } from '../helpers/security-fixtures.js';

const PATH = '/k/mcp';
const META_KEY = 'io.modelcontextprotocol/protocolVersion';
let issuer: TestIssuer;
let upstream: RecordingUpstream;
let gw: TestGateway;
let token: string;
const audit = recordingAudit();

beforeAll(async () => {
  [issuer, upstream] = await Promise.all([startTestIssuer('RS256'), startRecordingUpstream()]);
  gw = await startTestGateway(
    { 'gateway.yaml': gatewayYaml(), 'k.yaml': jwtRoute(PATH, `${upstream.origin}/mcp`, issuer, { rules: [{ match: { method: 'tools/call', tool: 'shell' }, deny: true }] }) },
    {},
    { audit },
  );
  token = await issuer.mint({ aud: resourceOf(PATH), sub: 'alice', client_id: 'alice-client', scope: 'mcp:read' });
});

afterAll(async () => {
  await gw?.stop();
  await Promise.all([issuer?.close(), upstream?.close()]);
});

/** A POST of `body` with these extra headers; what came back and what reached the upstream meanwhile. */
async function post(body: string, headers: Record<string, string> = {}): Promise<{ status: number; json: unknown; forwarded: number }> {
  const before = upstream.requests.length;
  const res = await fetch(`${gw.url}${PATH}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body,
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as unknown) : undefined, forwarded: upstream.requests.length - before };
}

const message = (id: number, method: string, params: Record<string, unknown> = {}) => ({ jsonrpc: '2.0', id, method, params });

// --- [K69] ----------------------------------------------------------------------------------

describe('[K69] one protocol version per request', () => {
  const ROUTING = { 'mcp-method': 'tools/call', 'mcp-name': 'echo' };
  const VERSIONS = ['2025-03-26', '2025-06-18', '2025-11-25', '2026-07-28'];
  /** What a message's `_meta` says of the revision: nothing, a version, or a value that is not one. */
  const metaArb = fc.oneof(fc.constant<undefined>(undefined), fc.constantFrom(...VERSIONS), fc.constantFrom<unknown>(20260728, null, ['2026-07-28'], { v: 1 }));
  const requestArb = fc.record({
    header: fc.option(fc.constantFrom(...VERSIONS, '2099-01-01'), { nil: undefined }),
    metas: fc.array(metaArb, { minLength: 1, maxLength: 4 }),
    batch: fc.boolean(),
  });

  it('[K69] any header and _meta versions, single or batch: forwarded exactly when every _meta version that is given is a string equal to the header (property)', async () => {
    await fc.assert(
      fc.asyncProperty(requestArb, async ({ header, metas, batch }) => {
        const messages = (batch ? metas : metas.slice(0, 1)).map((meta, i) =>
          message(i + 1, i % 2 ? 'ping' : 'tools/call', { ...(i % 2 ? {} : { name: 'echo', arguments: {} }), ...(meta !== undefined && { _meta: { [META_KEY]: meta, progressToken: i } }) }),
        );
        const agrees = messages.every((m) => {
          const meta = (m.params as { _meta?: Record<string, unknown> })._meta;
          return meta === undefined || meta[META_KEY] === header;
        });
        // A single message carries its 2026-07-28 routing headers (required from that revision on), so only the version can be wrong.
        const routing = batch ? {} : ROUTING;
        const res = await post(JSON.stringify(batch ? messages : messages[0]), header === undefined ? routing : { ...routing, 'mcp-protocol-version': header });
        if (agrees) {
          expect(res.status).toBe(200);
          expect(res.forwarded).toBe(1);
        } else {
          expect(res.status).toBe(400);
          expect(res.forwarded).toBe(0);
          expect(res.json).toMatchObject({ jsonrpc: '2.0', id: batch ? null : 1, error: { code: -32020, message: expect.any(String) } });
        }
      }),
      { numRuns: 80 },
    );
  });

  it('[K69] examples: 2026-07-28 in both places passes; the header saying 2025-11-25 (no Mcp-Param headers required) under a 2026-07-28 _meta does not', async () => {
    const call = (meta: string) => JSON.stringify(message(5, 'tools/call', { name: 'echo', arguments: {}, _meta: { [META_KEY]: meta } }));
    const version = (v?: string) => ({ ...ROUTING, ...(v !== undefined && { 'mcp-protocol-version': v }) });
    expect(await post(call('2026-07-28'), version('2026-07-28'))).toMatchObject({ status: 200, forwarded: 1 });
    expect(await post(call('2026-07-28'), version('2025-11-25'))).toMatchObject({ status: 400, forwarded: 0 });
    expect(await post(call('2026-07-28'), version())).toMatchObject({ status: 400, forwarded: 0 });
    // White space and look-alike dashes are other versions too: nothing is folded into agreement.
    expect(await post(call('2026-07-28 '), version('2026-07-28'))).toMatchObject({ status: 400, forwarded: 0 });
    expect(await post(call('2026–07–28'), version('2026-07-28'))).toMatchObject({ status: 400, forwarded: 0 });
  });

  it('[K69] a folded spelling of the _meta key beside the real one (or alone) is refused: another reader could take it for the version', async () => {
    const spellings = ['IO.modelcontextprotocol/protocolVersion', 'io.modelcontextprotocol/protocolversion', 'io.modelcontextprotocol/protocol\u200bVersion', 'io.modelcontextprotocol/ｐrotocolVersion'];
    for (const spelling of spellings) {
      for (const withReal of [false, true]) {
        const meta = { ...(withReal && { [META_KEY]: '2026-07-28' }), [spelling]: '2025-06-18' };
        const res = await post(JSON.stringify(message(6, 'tools/call', { name: 'echo', _meta: meta })), { ...ROUTING, 'mcp-protocol-version': '2026-07-28' });
        expect((res.json as { error?: { message?: string } }).error?.message, spelling).toMatch(/_meta/);
        expect(res, `${spelling} ${withReal}`).toMatchObject({ status: 400, forwarded: 0 });
      }
    }
  });

  it('[K69] MCP-Protocol-Version twice (same or different values, any case) is refused over a raw socket, nothing forwarded', async () => {
    const body = JSON.stringify(message(7, 'tools/call', { name: 'echo', _meta: { [META_KEY]: '2026-07-28' } }));
    for (const [first, second] of [['MCP-Protocol-Version', 'mcp-protocol-version'], ['MCP-Protocol-Version', 'MCP-Protocol-Version']]) {
      for (const values of [['2026-07-28', '2026-07-28'], ['2025-06-18', '2026-07-28'], ['2026-07-28', '2025-06-18']]) {
        const before = upstream.requests.length;
        const res = await rawRequest(
          gw.port,
          `POST ${PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nAccept: application/json\r\nMcp-Method: tools/call\r\nMcp-Name: echo\r\n${first}: ${values[0]}\r\n${second}: ${values[1]}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
        expect(res.status, `${first}/${second} ${values.join(',')}`).toBe(400);
        expect(JSON.parse(res.body)).toMatchObject({ error: { code: -32020, message: 'MCP-Protocol-Version may appear once' } });
        expect(upstream.requests.length).toBe(before);
      }
    }
  });
});

// --- [K70] ----------------------------------------------------------------------------------

describe('[K70] HTTP/1.0 with Transfer-Encoding: nothing pipelined behind the refusal is read', () => {
  const BODY = JSON.stringify(message(1, 'tools/call', { name: 'echo', arguments: {} }));
  const chunked = (body: string) => `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
  /** A valid request, as a smuggler would pipeline it. */
  const pipelined = (id: number) => {
    const body = JSON.stringify(message(id, 'tools/call', { name: 'echo', arguments: { smuggled: id } }));
    return `POST ${PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  };
  /** Messages whose framing the gateway (or Node's parser) refuses. */
  const refused = (): Array<[string, string]> => {
    const head = (version: string, lines: string[]) => [`POST ${PATH} ${version}`, 'Host: x', `Authorization: Bearer ${token}`, 'Content-Type: application/json', ...lines].join('\r\n');
    return [
      ['1.0 chunked, keep-alive', `${head('HTTP/1.0', ['Connection: keep-alive', 'Transfer-Encoding: chunked'])}\r\n\r\n${chunked(BODY)}`],
      ['1.0 chunked, Keep-Alive spelled oddly', `${head('HTTP/1.0', ['connection: Keep-Alive', 'transfer-encoding: CHUNKED'])}\r\n\r\n${chunked(BODY)}`],
      ['1.0 gzip, chunked, keep-alive', `${head('HTTP/1.0', ['Connection: keep-alive', 'Transfer-Encoding: gzip, chunked'])}\r\n\r\n${chunked(BODY)}`],
      ['1.0 identity + Content-Length, keep-alive', `${head('HTTP/1.0', ['Connection: keep-alive', 'Transfer-Encoding: identity', `Content-Length: ${BODY.length}`])}\r\n\r\n${BODY}`],
      ['1.0 chunked + Content-Length 0, keep-alive', `${head('HTTP/1.0', ['Connection: keep-alive', 'Content-Length: 0', 'Transfer-Encoding: chunked'])}\r\n\r\n${chunked(BODY)}`],
      ['1.0 gzip alone, keep-alive', `${head('HTTP/1.0', ['Connection: keep-alive', 'Transfer-Encoding: gzip', `Content-Length: ${BODY.length}`])}\r\n\r\n${BODY}`],
      ['1.0 empty coding + Content-Length, keep-alive', `${head('HTTP/1.0', ['Connection: keep-alive', 'Transfer-Encoding: ', `Content-Length: ${BODY.length}`])}\r\n\r\n${BODY}`],
      ['1.0 GET chunked, keep-alive', `GET ${PATH} HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`],
      ['1.1 chunked + Content-Length', `${head('HTTP/1.1', ['Transfer-Encoding: chunked', `Content-Length: ${BODY.length}`])}\r\n\r\n${chunked(BODY)}`],
      ['1.1 gzip (not chunked last)', `${head('HTTP/1.1', ['Transfer-Encoding: gzip'])}\r\n\r\n${BODY}`],
      ['1.1 chunked twice', `${head('HTTP/1.1', ['Transfer-Encoding: chunked', 'Transfer-Encoding: chunked'])}\r\n\r\n${chunked(BODY)}`],
      // Every refusal before routing closes the connection the same way, not only framing's.
      ['1.1 keep-alive, Host twice', `${head('HTTP/1.1', ['Host: y', 'Connection: keep-alive', `Content-Length: ${BODY.length}`])}\r\n\r\n${BODY}`],
      ['1.1 keep-alive, a dot segment in the target', `POST /k/../k/mcp HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nAuthorization: Bearer ${token}\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`],
    ];
  };

  /** Sends the refused message and `behind` pipelined requests (one write, or after the refusal came); returns every byte that came back. */
  async function attack(first: string, behind: number, split: boolean): Promise<{ received: string; closed: boolean; forwarded: number }> {
    const before = upstream.requests.length;
    const conn = await openRaw(gw.port);
    try {
      const rest = Array.from({ length: behind }, (_, i) => pipelined(100 + i)).join('');
      if (split) {
        await conn.write(first);
        await conn.response.catch(() => undefined);
        await conn.write(rest).catch(() => undefined); // the gateway may already have closed
      } else {
        await conn.write(first + rest).catch(() => undefined);
      }
      const closed = (await Promise.race([conn.closed, new Promise<number>((r) => setTimeout(() => r(-1), 3_000))])) !== -1;
      await new Promise((r) => setTimeout(r, 50));
      return { received: conn.received().toString('latin1'), closed, forwarded: upstream.requests.length - before };
    } finally {
      conn.destroy();
    }
  }

  it('[K70] every refused framing × 1–3 pipelined requests × one write or two: one 400 JSON answer, connection closed, nothing forwarded', async () => {
    for (const [name, first] of refused()) {
      for (const behind of [1, 3]) {
        for (const split of [false, true]) {
          const what = `${name}, ${behind} behind, ${split ? 'two writes' : 'one write'}`;
          const { received, closed, forwarded } = await attack(first, behind, split);
          expect(received.match(/^HTTP\/1\.1 \d{3}/gm), what).toEqual(['HTTP/1.1 400']);
          expect(received, what).toMatch(/connection: close/i);
          expect(received, what).toMatch(/"error":"invalid_request"/);
          expect(closed, `${what}: connection left open`).toBe(true);
          expect(forwarded, what).toBe(0);
        }
      }
    }
  });

  it('[K70] random codings, spellings and pipelines (property): never more than the one answer, never anything upstream', async () => {
    const coding = fc.constantFrom('chunked', 'CHUNKED', 'gzip, chunked', 'identity', 'gzip', 'deflate', 'br', 'x-custom', 'chunked, identity', ' chunked');
    const name = fc.constantFrom('Transfer-Encoding', 'transfer-encoding', 'TRANSFER-ENCODING');
    const keepAlive = fc.constantFrom('keep-alive', 'Keep-Alive', 'keep-alive, te', undefined);
    await fc.assert(
      fc.asyncProperty(coding, name, keepAlive, fc.boolean(), fc.integer({ min: 1, max: 4 }), fc.boolean(), async (te, teName, connection, withLength, behind, split) => {
        const lines = [...(connection ? [`Connection: ${connection}`] : []), `${teName}: ${te}`, ...(withLength ? [`Content-Length: ${chunked(BODY).length}`] : [])];
        const first = `POST ${PATH} HTTP/1.0\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n${lines.join('\r\n')}\r\n\r\n${chunked(BODY)}`;
        const { received, closed, forwarded } = await attack(first, behind, split);
        expect(received.match(/^HTTP\/1\.1 \d{3}/gm)).toEqual(['HTTP/1.1 400']);
        expect(closed).toBe(true);
        expect(forwarded).toBe(0);
      }),
      { numRuns: 30 },
    );
  });

  it('[K70] without Transfer-Encoding the same bytes are served: an HTTP/1.1 pipeline in full, an HTTP/1.0 keep-alive request', async () => {
    const first = (version: string) =>
      `POST ${PATH} ${version}\r\nHost: x\r\nConnection: keep-alive\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nAccept: application/json\r\nContent-Length: ${BODY.length}\r\n\r\n${BODY}`;
    // HTTP/1.0 has no chunked answers: Node ends the connection after a streamed one, so only the first is asserted there.
    for (const [version, answers] of [['HTTP/1.1', 3], ['HTTP/1.0', 1]] as const) {
      const before = upstream.requests.length;
      const conn = await openRaw(gw.port);
      try {
        await conn.write(first(version) + pipelined(200) + pipelined(201).replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n'));
        await Promise.race([conn.closed, new Promise((r) => setTimeout(r, 3_000))]);
        expect(conn.received().toString('latin1').match(/^HTTP\/1\.1 \d{3}/gm), version).toEqual(Array(answers).fill('HTTP/1.1 200'));
        expect(upstream.requests.length - before, version).toBeGreaterThanOrEqual(answers);
      } finally {
        conn.destroy();
      }
    }
  });

  it('[K70] the gateway keeps serving other connections, and a gateway holding refused connections stops (none is left half-served)', async () => {
    await attack(refused()[0]![1], 2, false);
    expect((await post(BODY)).status).toBe(200);
    const own = await startTestGateway({ 'gateway.yaml': gatewayYaml(), 'k.yaml': jwtRoute(PATH, `${upstream.origin}/mcp`, issuer) });
    let stopped = false;
    try {
      const conn = await openRaw(own.port);
      await conn.write(refused()[0]![1] + pipelined(300) + pipelined(301)).catch(() => undefined);
      await Promise.race([conn.closed, new Promise((r) => setTimeout(r, 3_000))]);
      // Before the fix the pipelined answer stayed in flight for ever and held shutdown to its grace.
      stopped = await Promise.race([own.stop().then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 15_000))]);
    } finally {
      if (!stopped) await own.stop().catch(() => undefined);
    }
    expect(stopped).toBe(true);
  }, 30_000);
});

// --- [K76] ----------------------------------------------------------------------------------

describe('[K76] names that read as another name, or as nothing', () => {
  /** Code points no name may hold, by class, chosen independently of the gateway's own test. */
  const UNFIT: ReadonlyArray<readonly [string, number, number]> = [
    ['C0', 0x00, 0x1f], ['DEL', 0x7f, 0x7f], ['C1 (NEL, CSI…)', 0x80, 0x9f], ['soft hyphen', 0xad, 0xad], ['Arabic letter mark', 0x61c, 0x61c],
    ['zero-width and bidi marks', 0x200b, 0x200f], ['line and paragraph separators', 0x2028, 0x2029], ['bidi embeddings and overrides', 0x202a, 0x202e],
    ['word joiner, invisible operators', 0x2060, 0x2064], ['bidi isolates', 0x2066, 0x2069], ['variation selectors', 0xfe00, 0xfe0f], ['BOM', 0xfeff, 0xfeff],
    ['interlinear annotations', 0xfff9, 0xfffb], ['noncharacters', 0xfdd0, 0xfdef], ['U+FFFE, U+FFFF', 0xfffe, 0xffff], ['tags', 0xe0001, 0xe007f],
    ['plane-1 noncharacters', 0x1fffe, 0x1ffff], ['lone surrogates', 0xd800, 0xdfff],
  ];
  const unfit = fc.constantFrom(...UNFIT).chain(([, from, to]) => fc.integer({ min: from, max: to }).map((cp) => String.fromCodePoint(cp)));
  const safe = fc.string({ unit: fc.constantFrom(...'abcxyz_-.0189'.split(''), 'é', 'ß', '日', 'Ω', 'ж'), minLength: 1, maxLength: 12 });
  const operations = ['tools/call', 'prompts/get', 'resources/read'] as const;
  const bodyOf = (method: (typeof operations)[number], name: string, id = 1) =>
    message(id, method, method === 'resources/read' ? { uri: `file:///data/${name}` } : { name, arguments: {} });

  it('[K76] an unfit code point anywhere in a tool, prompt or resource name, alone or in a batch: 400, nothing forwarded (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...operations), safe, unfit, fc.nat(), fc.boolean(), async (method, base, bad, at, batch) => {
        const cut = at % (base.length + 1);
        const name = `${base.slice(0, cut)}${bad}${base.slice(cut)}`;
        const single = bodyOf(method, name, 2);
        const body = JSON.stringify(batch ? [message(1, 'tools/call', { name: 'echo', arguments: {} }), single] : single);
        const res = await post(body);
        expect(res.status).toBe(400);
        expect(res.forwarded).toBe(0);
        expect(res.json).toMatchObject({ error: 'invalid_request' });
      }),
      { numRuns: 150 },
    );
  });

  it('[K76] every class, at its first and last code point, in each kind of name', async () => {
    for (const [what, from, to] of UNFIT) {
      for (const cp of [from, to]) {
        for (const method of operations) {
          const res = await post(JSON.stringify(bodyOf(method, `ab${String.fromCodePoint(cp)}cd`)));
          expect(res, `${what} U+${cp.toString(16)} in ${method}`).toMatchObject({ status: 400, forwarded: 0 });
        }
      }
    }
  });

  it('[K76] a denied tool spelled with an invisible character, a bidi override or in NFD is refused, not called as something else', async () => {
    for (const name of ['sh\u200bell', '\u202eshell', 'shell\u2069', 'shel\u00adl', 'shell\u0085', 'shell\ufe0f', 'shell\u{e0001}']) {
      expect(await post(JSON.stringify(message(3, 'tools/call', { name }))), JSON.stringify(name)).toMatchObject({ status: 400, forwarded: 0 });
    }
    // NFD: `é` as `e` + U+0301 is the same name to a server that normalises.
    for (const method of ['tools/call', 'prompts/get'] as const) {
      expect(await post(JSON.stringify(bodyOf(method, 'caf\u0065\u0301'))), method).toMatchObject({ status: 400, forwarded: 0 });
    }
  });

  it('[K76] names of visible characters in NFC pass (property): the rule is about the characters, not about non-ASCII', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('tools/call', 'prompts/get'), safe, async (method, name) => {
        fc.pre(!/^\s|\s$/.test(name));
        const res = await post(JSON.stringify(bodyOf(method, name.normalize('NFC'))));
        expect(res.status).toBe(200);
        expect(res.forwarded).toBe(1);
      }),
      { numRuns: 40 },
    );
  });
});

// --- [K83] ----------------------------------------------------------------------------------

describe('[K83] a batch cannot hide a call from the audit log', () => {
  const filler = fc.constantFrom<(id: number) => Record<string, unknown>>(
    (id) => message(id, 'ping'),
    (id) => message(id, 'tools/list'),
    () => ({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    (id) => ({ jsonrpc: '2.0', id: `answer-${id}`, result: {} }),
  );
  const named = fc.constantFrom<(id: number, tag: string) => Record<string, unknown>>(
    (id, tag) => message(id, 'tools/call', { name: `tool_${tag}`, arguments: {} }),
    (id, tag) => message(id, 'prompts/get', { name: `prompt_${tag}` }),
    (id, tag) => message(id, 'resources/read', { uri: `file:///data/${tag}` }),
    (_id, tag) => ({ jsonrpc: '2.0', method: 'tools/call', params: { name: `tool_${tag}` } }),
  );
  const nameOf = (m: Record<string, unknown>) => {
    const params = m.params as { name?: string; uri?: string };
    return params.name ?? params.uri;
  };

  /** Sends a batch and returns the audit lines it wrote. */
  async function audited(batch: Array<Record<string, unknown>>): Promise<{ status: number; lines: AuditEvent[] }> {
    const mark = audit.events.length;
    const res = await post(JSON.stringify(batch));
    return { status: res.status, lines: audit.events.slice(mark) };
  }

  it('[K83] any mix of fillers and calls (up to the bound): every call is named in its own line (property)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.oneof({ arbitrary: filler.map((f) => ({ filler: f })), weight: 2 }, { arbitrary: named.map((n) => ({ named: n })), weight: 1 }), { minLength: 1, maxLength: 90 }), async (shape) => {
        const calls = shape.filter((s) => 'named' in s).length;
        fc.pre(calls > 0 && calls + 10 <= MAX_AUDITED_LINES);
        const tag = Math.random().toString(36).slice(2, 8);
        const batch = shape.map((s, i) => ('named' in s ? s.named(i + 1, `${tag}_${i}`) : s.filler(i + 1)));
        const { status, lines } = await audited(batch);
        expect(status).toBe(200);
        const expected = batch.filter((m) => ['tools/call', 'prompts/get', 'resources/read'].includes(m.method as string)).map(nameOf);
        expect(lines.filter((l) => l.name !== undefined).map((l) => l.name)).toEqual(expected);
        for (const line of lines) expect(line).toMatchObject({ event: 'decision', sub: 'alice', client_id: 'alice-client' });
      }),
      { numRuns: 25 },
    );
  });

  /** Every size around the bounds (10 lines of their own, 50 in all, 100 messages) and the positions around them. */
  const SHAPES = [1, 2, 10, 11, 12, 49, 50, 51, 60, 99, 100].flatMap((size) =>
    [...new Set([0, 1, 9, 10, 11, 49, 50, 51, Math.floor(size / 2), size - 1].filter((at) => at < size))].map((at) => ({ size, at, kind: ['tools/call', 'resources/read', 'prompts/get', 'notification'][(size + at) % 4]! })),
  );

  it.each(SHAPES)('[K83] one $kind at position $at of a batch of $size pings: named in its own line', async ({ size, at, kind }) => {
    const tag = `hid_${size}_${at}`;
    const hidden =
      kind === 'tools/call' ? message(at + 1, kind, { name: tag, arguments: {} })
      : kind === 'prompts/get' ? message(at + 1, kind, { name: tag })
      : kind === 'resources/read' ? message(at + 1, kind, { uri: `file:///data/${tag}` })
      : { jsonrpc: '2.0', method: 'tools/call', params: { name: tag } };
    const batch = Array.from({ length: size }, (_, i) => (i === at ? hidden : message(i + 1, 'ping')));
    const { status, lines } = await audited(batch);
    expect([200, 202]).toContain(status);
    const named = lines.filter((l) => l.name !== undefined);
    expect(named.map((l) => l.name)).toEqual([kind === 'resources/read' ? `file:///data/${tag}` : tag]);
    // Nothing unaccounted for: lines of their own plus the summary's count make the batch.
    const summary = lines.find((l) => l.reason === 'batch_rest');
    expect(lines.filter((l) => l.reason !== 'batch_rest').length + ((summary?.messages as number | undefined) ?? 0)).toBe(size);
  });

  it('[K83] ten pings in front, then a call and a denied call: both named, the refusal with its rule', async () => {
    const pings = Array.from({ length: 10 }, (_, i) => message(i + 1, 'ping'));
    const { status, lines } = await audited([...pings, message(11, 'tools/call', { name: 'hidden_exfiltrate' })]);
    expect(status).toBe(200);
    expect(lines).toContainEqual(expect.objectContaining({ method: 'tools/call', name: 'hidden_exfiltrate', decision: 'allow' }));
    const denied = await audited([...pings, message(11, 'tools/call', { name: 'echo' }), message(12, 'tools/call', { name: 'shell' })]);
    expect(denied.status).toBe(403);
    expect(denied.lines).toContainEqual(expect.objectContaining({ name: 'shell', decision: 'deny', reason: 'deny', status: 403 }));
    expect(denied.lines).toContainEqual(expect.objectContaining({ name: 'echo', decision: 'deny', reason: 'batch' }));
  });

  it('[K83] beyond the bound the summary line says how many calls it did not name; nothing is dropped without a word', async () => {
    const batch = [...Array.from({ length: 20 }, (_, i) => message(i + 1, 'ping')), ...Array.from({ length: 80 }, (_, i) => message(100 + i, 'tools/call', { name: `bulk_${i}` }))];
    const { lines } = await audited(batch);
    const own = lines.filter((l) => l.reason !== 'batch_rest');
    const summary = lines.filter((l) => l.reason === 'batch_rest');
    expect(own).toHaveLength(MAX_AUDITED_LINES);
    expect(summary).toHaveLength(1);
    const namedOwn = own.filter((l) => l.name !== undefined).length;
    expect(summary[0]).toMatchObject({ messages: batch.length - MAX_AUDITED_LINES, calls: 80 - namedOwn });
    // Every message is accounted for: its own line, or counted in the summary.
    expect(own.length + (summary[0]!.messages as number)).toBe(batch.length);
  });
});
