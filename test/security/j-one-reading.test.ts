/**
 * SECURITY-CASES J47, J48, J57 (SECURITY.md "One reading of every message",
 * "Bounded work") against the real gateway, a recording upstream, a scripted
 * tools/list upstream, and real JSON readers of other ecosystems (Python's
 * json, Go's encoding/json). Bodies live in corpora/json-ambiguity.json; the
 * generated ones in fuzz/one-reading.test.ts.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseJsonRpcBody } from '../../src/policy/json-rpc.js';
import type { TestGateway } from '../helpers/gateway.js';
import { comparable, gatewayReading, startJsonReaders, type JsonReader, type ReaderAnswer } from '../helpers/json-readers.js';
import { startJwtStage, stopJwtStage } from '../helpers/jwt-gateway.js';
import { watchLoopBlocks } from '../helpers/loop-blocks.js';
import { closeServer, listen } from '../helpers/net.js';
import { buildRequest, rawRequest } from '../helpers/raw-http.js';
import { readCorpus } from './corpora/corpus.js';
import { expectRejection, gatewayYaml, jwtRoute, resourceOf, simplify, simplifyRaw, type RecordingUpstream, type TestIssuer } from '../helpers/security-fixtures.js';

interface CorpusCase {
  name: string;
  body?: string;
  base64?: string;
  expect: 'refused' | 'forwarded';
  readersDisagree?: boolean;
}
const corpus = readCorpus<{ cases: CorpusCase[] }>('json-ambiguity.json').cases;
const bytesOf = (c: CorpusCase) => (c.base64 !== undefined ? Buffer.from(c.base64, 'base64') : Buffer.from(c.body!, 'utf8'));

const FORBIDDEN = 'forbidden_tool';
const ALLOWED = 'allowed_tool';
/** Ten wildcard rules, as in the report: each glob runs over every name the policy reads. */
const WILDCARD_RULES = Array.from({ length: 10 }, (_, i) => ({ match: { method: 'tools/call', tool: `*x${i}*y*z*` }, require_scopes: ['mcp:write'] }));

let issuer: TestIssuer;
let up: RecordingUpstream;
let gw: TestGateway;
let token: string;
let tools: ToolsUpstream;
let python: JsonReader;
let go: JsonReader | undefined;

beforeAll(async () => {
  tools = await startToolsUpstream();
  ({ issuer, up, gw } = await startJwtStage((stage) => {
    const route = (path: string, upstream: string, extra: Record<string, unknown> = {}) => jwtRoute(path, upstream, stage.issuer, extra);
    const rules = [{ match: { method: 'tools/call', tool: 'shell' }, deny: true }, { match: { method: 'tools/call', tool: FORBIDDEN }, deny: true }, ...WILDCARD_RULES];
    return {
      'gateway.yaml': gatewayYaml(),
      'rules.yaml': route('/rules/mcp', `${stage.up.origin}/mcp`, { rules }),
      'plain.yaml': route('/plain/mcp', `${stage.up.origin}/mcp`),
      'filter.yaml': route('/filter/mcp', tools.url, { rules, filter_tools_list: true }),
    };
  }));
  token = await issuer.mint({ aud: [resourceOf('/rules/mcp'), resourceOf('/plain/mcp'), resourceOf('/filter/mcp')], sub: 'alice', client_id: 'client-a', scope: 'mcp:read' });
  ({ python, go } = await startJsonReaders());
}, 180_000);

afterAll(async () => {
  await Promise.all([python?.close(), go?.close()]);
  await stopJwtStage({ gw, issuer, up });
  await tools?.close();
});

function post(path: string, body: Buffer | string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`http://127.0.0.1:${gw.port}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: typeof body === 'string' ? body : new Uint8Array(body),
  });
}

/** Runs `run`; returns its result and the requests the recording upstream got meanwhile. */
async function upstreamDuring<T>(run: () => Promise<T>) {
  const before = up.requests.length;
  const result = await run();
  await new Promise((r) => setTimeout(r, 20));
  return { result, seen: up.requests.slice(before) };
}

/** What JSON.parse made of a body (the gateway's reading before this fix), in the readers' terms. */
function looseReading(bytes: Buffer): string {
  try {
    const value = JSON.parse(bytes.toString('utf8')) as unknown;
    const messages = (Array.isArray(value) ? value : [value]) as Parameters<typeof gatewayReading>[0]['messages'];
    return JSON.stringify(gatewayReading({ batch: Array.isArray(value), messages }));
  } catch {
    return 'fails';
  }
}
const readingOf = (answer: ReaderAnswer) => (answer.ok ? JSON.stringify(comparable(answer)) : 'fails');

describe('[J47] one reading: corpora/json-ambiguity.json through the real gateway', () => {
  it('[J47] the corpus holds both kinds, and the ambiguous cases are ambiguous to the readers that run here', async () => {
    expect(corpus.filter((c) => c.expect === 'refused').length).toBeGreaterThan(40);
    expect(corpus.filter((c) => c.expect === 'forwarded').length).toBeGreaterThan(15);
    for (const c of corpus.filter((c) => c.readersDisagree)) {
      const bytes = bytesOf(c);
      const readings = new Set([looseReading(bytes), readingOf(await python.read(bytes)), ...(go ? [readingOf(await go.read(bytes))] : [])]);
      // Go is the reader most of them are about: without it, only what Python and JSON.parse disagree on is checked.
      if (go || readings.size > 1) expect(readings.size, c.name).toBeGreaterThan(1);
    }
  });

  it.each(corpus.filter((c) => c.expect === 'refused').map((c) => [c.name, c] as const))('[J47] refuses %s with 400 invalid_request, nothing upstream, on a route with rules and one without', async (_name, c) => {
    for (const path of ['/rules/mcp', '/plain/mcp']) {
      const { result, seen } = await upstreamDuring(async () => simplify(await post(path, bytesOf(c))));
      expectRejection(result, { status: 400, error: 'invalid_request' });
      expect(seen, `${path} ${c.name}`).toEqual([]);
    }
  });

  it.each(corpus.filter((c) => c.expect === 'forwarded').map((c) => [c.name, c] as const))('[J47] forwards %s byte for byte, read the same by Python json and Go encoding/json', async (_name, c) => {
    const bytes = bytesOf(c);
    const { result, seen } = await upstreamDuring(() => post('/plain/mcp', bytes));
    expect(result.status, await result.text()).toBe(200);
    expect(seen).toHaveLength(1);
    expect(seen[0]!.body.equals(bytes)).toBe(true);
    const expected = gatewayReading(parseJsonRpcBody(bytes));
    for (const reader of [python, ...(go ? [go] : [])]) {
      const answer = await reader.read(bytes);
      expect(answer.ok, `${reader.name}: ${answer.error}`).toBe(true);
      expect(comparable(answer), reader.name).toEqual(expected);
    }
  });

  it('[J47] a denied tool cannot be reached through any spelling Go would accept', async () => {
    const spellings = ['"Name":"shell"', '"NAME":"shell"', '"nAme":"shell"'];
    for (const member of spellings) {
      const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",${member}}}`;
      const { result, seen } = await upstreamDuring(async () => simplify(await post('/rules/mcp', body)));
      expectRejection(result, { status: 400, error: 'invalid_request' });
      expect(seen).toEqual([]);
      if (go) expect(comparable(await go.read(Buffer.from(body)))[0]!.name).toBe('shell');
    }
    // The exact spelling is denied by the rule (403), not by the reading.
    expect((await post('/rules/mcp', '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"shell"}}')).status).toBe(403);
  });

  // A Java or .NET upstream decodes by the declared charset: UTF-16 or Latin-1 bytes are other names than the UTF-8 the policy read.
  const OTHER_CHARSETS = ['utf-16', 'UTF-16LE', 'iso-8859-1', 'latin1', 'windows-1252', '"utf-16"', 'us-ascii', 'utf-7', 'utf-8; charset=utf-16', 'utf-8, utf-16'];
  const UTF8_CHARSETS = ['utf-8', 'UTF-8', '"utf-8"', 'utf8'];
  const echo = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}';

  it.each(OTHER_CHARSETS)('[J47] a body declared as charset=%s is refused with 400, nothing upstream', async (charset) => {
    const { result, seen } = await upstreamDuring(async () => simplify(await post('/plain/mcp', echo, { 'content-type': `application/json; charset=${charset}` })));
    expectRejection(result, { status: 400, error: 'invalid_request' });
    expect(seen).toEqual([]);
  });

  it.each(UTF8_CHARSETS)('[J47] a body declared as charset=%s is read and forwarded', async (charset) => {
    const { result, seen } = await upstreamDuring(async () => post('/plain/mcp', echo, { 'content-type': `application/json; charset=${charset}` }));
    expect(result.status).toBe(200);
    expect(seen).toHaveLength(1);
  });

  it('[J47] two Content-Type headers are refused with 400 before routing, nothing upstream', async () => {
    for (const [first, second] of [['application/json', 'application/json; charset=utf-16'], ['application/json', 'application/json']]) {
      const request = buildRequest({ method: 'POST', target: '/plain/mcp', host: `127.0.0.1:${gw.port}`, headers: [['Authorization', `Bearer ${token}`], ['Content-Type', first!], ['Content-Type', second!], ['Content-Length', String(Buffer.byteLength(echo))]] });
      const { result, seen } = await upstreamDuring(async () => simplifyRaw(await rawRequest(gw.port, Buffer.concat([request, Buffer.from(echo)]))));
      expectRejection(result, { status: 400, error: 'invalid_request' });
      expect(seen).toEqual([]);
    }
  });
});

describe('[J48] batches that repeat an id, and tools/list answers of every shape', () => {
  it('[J48] refuses a batch repeating an id (by type and value) with 400, nothing upstream; 1 and "1" stay apart', async () => {
    const msg = (id: string, method = 'ping') => `{"jsonrpc":"2.0","id":${id},"method":"${method}"}`;
    for (const body of [`[${msg('1', 'tools/list')},${msg('1')}]`, `[${msg('"x"')},${msg('2')},${msg('"x"', 'tools/list')}]`, `[${msg('7')},${msg('7e0')}]`]) {
      const { result, seen } = await upstreamDuring(async () => simplify(await post('/filter/mcp', body)));
      expectRejection(result, { status: 400, error: 'invalid_request' });
      expect(result.body).toMatch(/repeats an id/);
      expect(seen).toEqual([]);
    }
    expect((await post('/plain/mcp', `[${msg('1')},${msg('"1"')}]`)).status).toBe(200);
  });

  const SHAPES = ['json', 'sse', 'sse-foreign-ids', 'json-foreign-ids', 'sse-bom', 'sse-late-second-answer', 'json-bridge'] as const;
  const BODIES = {
    'tools/list': '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
    'tools/list notification': '{"jsonrpc":"2.0","method":"tools/list"}',
    'batch with tools/list': '[{"jsonrpc":"2.0","id":1,"method":"tools/list"},{"jsonrpc":"2.0","id":2,"method":"ping"}]',
    'two tools/list in a batch': '[{"jsonrpc":"2.0","id":"a","method":"tools/list"},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]',
    'tools/call (no tool list asked for)': '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo"}}',
  };

  it('[J48] never lists a tool the caller may not call, whatever the body and the answer shape', async () => {
    let listsSeen = 0;
    for (const shape of SHAPES) {
      for (const [label, body] of Object.entries(BODIES)) {
        const text = await post('/filter/mcp', body, { 'x-test-shape': shape })
          .then((res) => res.text())
          .catch(() => '');
        expect(text, `${shape} / ${label}`).not.toContain(FORBIDDEN);
        if (text.includes(ALLOWED)) listsSeen++;
      }
    }
    // The upstream answered with tool lists and the filter let the callable tool through.
    expect(listsSeen).toBeGreaterThanOrEqual(SHAPES.length * Object.keys(BODIES).length - 2);
    expect(tools.answered).toBeGreaterThan(0);
  });

  it('[J48] cuts an answer that another reader could read as a different tool list', async () => {
    for (const shape of ['sse-case-variant', 'json-duplicate-tools', 'sse-nan']) {
      // Cut: the client gets a broken answer (or none), never the list.
      const text = await post('/filter/mcp', BODIES['tools/list'], { 'x-test-shape': shape })
        .then((res) => res.text())
        .catch(() => '');
      expect(text, shape).not.toContain(FORBIDDEN);
      expect(text, shape).not.toContain(ALLOWED);
    }
  });

  it('[J48] filters tool lists on a GET stream', async () => {
    const res = await fetch(`http://127.0.0.1:${gw.port}/filter/mcp`, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } });
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = '';
    while (!text.includes('done')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString();
    }
    await reader.cancel().catch(() => undefined);
    expect(text).toContain(ALLOWED);
    expect(text).not.toContain(FORBIDDEN);
  });
});

describe('[J57] bounded work', () => {
  const hugeName = (bytes: number) => `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"${'x0y'.repeat(Math.floor((bytes - 80) / 3))}"}}`;
  const hugeBatch = (bytes: number) => {
    const one = '{"jsonrpc":"2.0","method":"ping"},';
    return `[${one.repeat(Math.floor((bytes - 2) / one.length)).slice(0, -1)}]`;
  };

  it('[J57] refuses a 4 MiB tool name, prompt name or URI and a 4 MiB batch with 400 before any rule, nothing upstream', async () => {
    const limit = 4 * 1024 * 1024;
    const bodies = [
      hugeName(limit),
      hugeName(limit).replace('tools/call', 'prompts/get'),
      hugeName(limit).replace('tools/call', 'resources/read').replace('"name"', '"uri"'),
      hugeBatch(limit),
      `[${Array.from({ length: 101 }, (_, i) => `{"jsonrpc":"2.0","id":${i},"method":"ping"}`).join(',')}]`,
    ];
    for (const body of bodies) {
      expect(Buffer.byteLength(body)).toBeLessThanOrEqual(limit);
      const work = watchLoopBlocks();
      const { result, seen } = await upstreamDuring(async () => simplify(await post('/rules/mcp', body)));
      expectRejection(result, { status: 400, error: 'invalid_request' });
      expect(result.body).toMatch(/longer than 4096|more than 100/);
      expect(seen).toEqual([]);
      // Bounded work, counted in CPU time (this process: the client's 4 MiB write too), which a loaded machine does not stretch.
      expect(work.stop().totalCpuMs).toBeLessThan(1_000);
    }
  });

  it('[J57] /healthz stays fast while 4 MiB bodies with huge names are being refused', async () => {
    const body = Buffer.from(hugeName(4 * 1024 * 1024));
    const latencies: number[] = [];
    let attacking = true;
    const attack = (async () => {
      const statuses: number[] = [];
      for (let round = 0; round < 6; round++) {
        const answers = await Promise.all(Array.from({ length: 3 }, () => post('/rules/mcp', body)));
        statuses.push(...answers.map((r) => r.status));
        await Promise.all(answers.map((r) => r.arrayBuffer()));
      }
      attacking = false;
      return statuses;
    })();
    const blocks = watchLoopBlocks();
    while (attacking) {
      const started = performance.now();
      const res = await fetch(`http://127.0.0.1:${gw.port}/healthz`);
      await res.arrayBuffer();
      expect(res.status).toBe(200);
      latencies.push(performance.now() - started);
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(await attack).toEqual(Array(18).fill(400));
    const { longestCpuMs, totalCpuMs, ticks } = blocks.stop();
    latencies.sort((a, b) => a - b);
    const p50 = latencies[Math.floor(latencies.length / 2)]!;
    const max = latencies.at(-1)!;
    console.info(
      `[J57] /healthz during 18 refusals of 4 MiB names: ${latencies.length} probes, p50 ${p50.toFixed(1)} ms, max ${max.toFixed(1)} ms; ` +
        `CPU ${totalCpuMs.toFixed(0)} ms in all, at most ${longestCpuMs.toFixed(1)} ms in one turn of the loop (${ticks} turns)`,
    );
    expect(latencies.length).toBeGreaterThan(5);
    // Before the bound, one such request held the event loop for about a second of CPU (/healthz:
    // 1.7 s). Counted in CPU time, not /healthz's wall-clock latency, which a loaded machine stretches
    // (p50 350 ms at load 14 with nothing held). The client here shares the gateway's event loop:
    // its own 4 MiB writes count too. Seen under load 19: about 115 ms of CPU per refusal, at most 270 ms
    // in one turn (several requests' chunks read in one turn).
    expect(totalCpuMs / 18).toBeLessThan(400);
    expect(longestCpuMs).toBeLessThan(750);
  });
});

// --- a tools/list upstream with every answer shape ---------------------------

interface ToolsUpstream {
  url: string;
  /** Requests answered with a tool list. */
  answered: number;
  close(): Promise<void>;
}

const TOOL_LIST = [{ name: ALLOWED, inputSchema: { type: 'object' } }, { name: FORBIDDEN, inputSchema: { type: 'object' } }];
const listAnswer = (id: unknown) => ({ jsonrpc: '2.0', id, result: { tools: TOOL_LIST } });
const event = (value: unknown) => `event: message\ndata: ${JSON.stringify(value)}\n\n`;

async function startToolsUpstream(): Promise<ToolsUpstream> {
  const state = { answered: 0 };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => answer(req, res, Buffer.concat(chunks).toString('utf8'), state));
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    get answered() {
      return state.answered;
    },
    close: () => closeServer(server),
  };
}

function answer(req: IncomingMessage, res: ServerResponse, text: string, state: { answered: number }): void {
  if (req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.write(event(listAnswer('resumed-1')));
    res.write(event({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }));
    res.write(event(listAnswer(99)));
    res.write(event({ jsonrpc: '2.0', method: 'notifications/message', params: { data: 'done' } }));
    return;
  }
  const parsed = JSON.parse(text) as unknown;
  const messages = (Array.isArray(parsed) ? parsed : [parsed]) as Array<{ id?: unknown; method?: string }>;
  // A sloppy server answers a notification too (id null), and answers every request with a tool list.
  const answers = messages.filter((m) => m.method !== undefined).map((m) => listAnswer(m.id ?? null));
  state.answered++;
  const shape = String(req.headers['x-test-shape'] ?? 'json');
  const json = (value: unknown, type = 'application/json') => void res.writeHead(200, { 'content-type': type }).end(JSON.stringify(value));
  const sse = (...events: string[]) => {
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    for (const e of events) res.write(e);
    res.end();
  };
  switch (shape) {
    case 'json':
      return json(Array.isArray(parsed) ? answers : answers[0]);
    case 'json-foreign-ids':
      return json([...answers, listAnswer(12345), listAnswer('other')], 'text/plain, application/json');
    case 'json-bridge':
      // A bridge that routes answers by id hands this POST another request's tool list.
      return json(listAnswer('elsewhere'));
    case 'sse':
      return sse(...answers.map(event));
    case 'sse-foreign-ids':
      return sse(event({ jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } }), ...answers.map(event), event(listAnswer(4242)), event(listAnswer(null)));
    case 'sse-late-second-answer':
      return sse(...answers.map(event), ': keepalive\n\n', ...answers.map(event));
    case 'sse-bom':
      return sse(`\ufeff${event(listAnswer(1))}`, ...answers.map(event));
    case 'sse-case-variant':
      return sse(`data: {"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"${ALLOWED}"}],"Tools":[{"name":"${FORBIDDEN}"}]}}\n\n`);
    case 'json-duplicate-tools':
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(`{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"${FORBIDDEN}"}],"tools":[{"name":"${ALLOWED}"}]}}`);
    case 'sse-nan':
      return sse(`data: {"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"${FORBIDDEN}"}]},"n":NaN}\n\n`);
    default:
      return void res.writeHead(500).end();
  }
}
