/**
 * DESIGN.md §8.3, "No principal can take what all share" (issue 26: "a property over many
 * principals that one principal's traffic never changes another's answers beyond latency";
 * SECURITY-CASES K79, K80, K81). End to end, against a real gateway in front of real upstreams:
 * server-everything over Streamable HTTP (one route rate-limited per user, one open) and over the
 * legacy HTTP+SSE transport (a per-user session cap), and server-memory over stdio (a process per
 * session, with a per-user cap).
 *
 * fast-check draws what a flooder (mallory) does from a class of abusive actions — rate-limited
 * bursts, floods of DPoP requests with fresh proofs through two keys, many sessions through many
 * registered clients, many GET streams and `subscriptions/listen` POSTs held open, big batches,
 * many stdio processes and legacy SSE sessions — and runs it while three other users do their
 * ordinary work: alice (Bearer, on the open route and server-memory), bob (DPoP-bound token with a
 * proof per request) and carol (on the rate-limited route and the legacy SSE one). Each of them must get exactly the answers (status, and
 * every JSON-RPC response in the body) they got with no flooder, and `/healthz` answers 200
 * throughout. Once on the memory store (1,000 entries: every per-user share is small enough for
 * mallory to reach it) and once on a real redis-server.
 */
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dpopKey, proof, type DpopKey } from '../helpers/dpop.js';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { gatewayYaml, jwtRoute, PUBLIC_URL, resourceOf, startTestIssuer, type TestIssuer } from '../helpers/security-fixtures.js';
import { serverBin } from '../helpers/stdio-stage.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';
import { WIRE_2026 } from '../helpers/wire-2026.js';

const OPEN = '/open/mcp';
const LIMITED = '/limited/mcp';
const MEMORY = '/memory/mcp';
const LEGACY = '/legacy/mcp';
/** carol's few requests a run stay far under it; mallory's bursts do not. */
const RATE_LIMIT = 12;
const STREAMS_PER_USER = 3;
const PROCESSES = { max_processes: 6, max_processes_per_principal: 2 };
const LEGACY_SESSIONS = { max_sessions: 6, max_sessions_per_principal: 2 };
const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'k-property', version: '1' } } };
const INITIALIZED = { jsonrpc: '2.0', method: 'notifications/initialized' };
const echo = (id: number, message: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'echo', arguments: { message } } });

let issuer: TestIssuer;
let everything: UpstreamHandle;
/** server-everything over the legacy HTTP+SSE transport (2024-11-05). */
let everythingSse: UpstreamHandle;

beforeAll(async () => {
  [issuer, everything, everythingSse] = await Promise.all([startTestIssuer('ES256'), startEverythingServer('streamableHttp'), startEverythingServer('sse')]);
}, 60_000);

afterAll(async () => {
  await Promise.allSettled([issuer?.close(), everything?.close(), everythingSse?.close()]);
});

// --- one user's requests ----------------------------------------------------------------------

/** Who sends: a user through one client, with a DPoP key when the token is bound to it. */
interface Caller {
  sub: string;
  client: string;
  key?: DpopKey;
}

/** What a user sees of one answer: its status and the JSON-RPC responses (or the error body) it holds; notifications left out. */
interface Answer {
  status: number;
  messages: unknown[];
}

const tokens = new Map<string, Promise<string>>();
function tokenOf(path: string, who: Caller): Promise<string> {
  const cacheKey = JSON.stringify([path, who.sub, who.client, who.key?.jkt]);
  let token = tokens.get(cacheKey);
  if (!token) {
    token = issuer.mint({ sub: who.sub, client_id: who.client, aud: resourceOf(path), scope: 'mcp:read mcp:write', exp: Math.floor(Date.now() / 1000) + 3600, ...(who.key && { cnf: { jkt: who.key.jkt } }) });
    tokens.set(cacheKey, token);
  }
  return token;
}

async function authorization(path: string, who: Caller, method: string): Promise<Record<string, string>> {
  const token = await tokenOf(path, who);
  if (!who.key) return { authorization: `Bearer ${token}` };
  return { authorization: `DPoP ${token}`, dpop: await proof(who.key, { htm: method, htu: `${PUBLIC_URL}${path}`, token }) };
}

async function send(gw: TestGateway, path: string, who: Caller, init: { method?: string; body?: unknown; session?: string; headers?: Record<string, string>; signal?: AbortSignal }): Promise<Response> {
  const method = init.method ?? 'POST';
  return fetch(`${gw.url}${path}`, {
    method,
    headers: {
      ...(await authorization(path, who, method)),
      accept: method === 'GET' ? 'text/event-stream' : 'application/json, text/event-stream',
      ...(init.body !== undefined && { 'content-type': 'application/json' }),
      ...(init.session && { 'mcp-session-id': init.session }),
      ...init.headers,
    },
    ...(init.body !== undefined && { body: JSON.stringify(init.body) }),
    signal: init.signal,
  });
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null;

/** The answer as a user compares it: event-stream data and JSON bodies parsed, notifications and requests to the client dropped. */
async function answerOf(res: Response): Promise<Answer> {
  const text = await res.text();
  const type = res.headers.get('content-type') ?? '';
  let payloads: unknown[] = [];
  if (type.includes('text/event-stream')) {
    payloads = text
      .split(/\r?\n\r?\n/)
      .map((block) => block.split(/\r?\n/).filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n'))
      .filter((data) => data !== '')
      .map((data) => JSON.parse(data) as unknown);
  } else if (text !== '') payloads = [type.includes('json') ? (JSON.parse(text) as unknown) : text];
  const messages = payloads.flatMap((p) => (Array.isArray(p) ? p : [p])).filter((m) => !(isObject(m) && typeof m.method === 'string'));
  return { status: res.status, messages };
}

/** An MCP session of `who` on `path`: its initialize answer and the session id. */
async function openSession(gw: TestGateway, path: string, who: Caller, accept?: string): Promise<{ answer: Answer; session?: string }> {
  const res = await send(gw, path, who, { body: INITIALIZE, ...(accept && { headers: { accept } }) });
  const session = res.headers.get('mcp-session-id') ?? undefined;
  const answer = await answerOf(res);
  if (session) await (await send(gw, path, who, { body: INITIALIZED, session, ...(accept && { headers: { accept } }) })).arrayBuffer();
  return { answer, session };
}

/** Ordinary work on server-everything: a session, an echo, the tool list, a small batch, the end of the session. */
async function everythingWork(gw: TestGateway, path: string, who: Caller): Promise<Answer[]> {
  const { answer, session } = await openSession(gw, path, who);
  const transcript = [answer];
  const call = async (body: unknown) => transcript.push(await answerOf(await send(gw, path, who, { body, session })));
  await call(echo(2, `hello from ${who.client}`));
  await call({ jsonrpc: '2.0', id: 3, method: 'tools/list' });
  await call([echo(4, 'first'), { jsonrpc: '2.0', id: 5, method: 'ping' }, echo(6, 'last')]);
  transcript.push(await answerOf(await send(gw, path, who, { method: 'DELETE', session })));
  return transcript;
}

/** Ordinary work on server-everything over legacy SSE: a session, an echo, the tool list, the end of the session. */
async function legacyWork(gw: TestGateway, who: Caller): Promise<Answer[]> {
  const { answer, session } = await openSession(gw, LEGACY, who);
  const transcript = [answer];
  const call = async (body: unknown) => transcript.push(await answerOf(await send(gw, LEGACY, who, { body, session })));
  await call(echo(2, `hello from ${who.client}`));
  await call({ jsonrpc: '2.0', id: 3, method: 'tools/list' });
  transcript.push(await answerOf(await send(gw, LEGACY, who, { method: 'DELETE', session })));
  return transcript;
}

/** Ordinary work on server-memory (stdio): a session, an entity written and the graph read back, the end of the session. */
async function memoryWork(gw: TestGateway, who: Caller): Promise<Answer[]> {
  const accept = 'application/json';
  const { answer, session } = await openSession(gw, MEMORY, who, accept);
  const transcript = [answer];
  const call = async (body: unknown) => transcript.push(await answerOf(await send(gw, MEMORY, who, { body, session, headers: { accept } })));
  await call({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'create_entities', arguments: { entities: [{ name: 'note', entityType: 'memo', observations: ['kept'] }] } } });
  await call({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'read_graph', arguments: {} } });
  transcript.push(await answerOf(await send(gw, MEMORY, who, { method: 'DELETE', session })));
  return transcript;
}

/** Everything the three ordinary users do in one run, each as a new user (`tag`), and what they got. */
async function ordinaryWork(gw: TestGateway, tag: string, bobKey: DpopKey): Promise<Record<string, Answer[]>> {
  const alice = { sub: `alice-${tag}`, client: 'alice-app' };
  const bob = { sub: `bob-${tag}`, client: 'bob-app', key: bobKey };
  const carol = { sub: `carol-${tag}`, client: 'carol-app' };
  const [aliceOpen, aliceMemory, bobOpen, carolLimited, carolLegacy] = await Promise.all([everythingWork(gw, OPEN, alice), memoryWork(gw, alice), everythingWork(gw, OPEN, bob), everythingWork(gw, LIMITED, carol), legacyWork(gw, carol)]);
  return { aliceOpen, aliceMemory, bobOpen, carolLimited, carolLegacy };
}

// --- the flooder --------------------------------------------------------------------------------

type Flood =
  | { kind: 'burst'; path: string; n: number }
  | { kind: 'dpop'; n: number }
  | { kind: 'sessions'; n: number; clients: number }
  | { kind: 'streams'; n: number; clients: number }
  | { kind: 'listens'; n: number }
  | { kind: 'batch'; n: number; calls: number }
  | { kind: 'stdio'; n: number; clients: number }
  | { kind: 'legacy'; n: number; clients: number };

const floodArb: fc.Arbitrary<Flood> = fc.oneof(
  fc.record({ kind: fc.constant('burst' as const), path: fc.constantFrom(OPEN, LIMITED), n: fc.integer({ min: 10, max: 60 }) }),
  fc.record({ kind: fc.constant('dpop' as const), n: fc.integer({ min: 60, max: 150 }) }),
  fc.record({ kind: fc.constant('sessions' as const), n: fc.integer({ min: 10, max: 40 }), clients: fc.integer({ min: 2, max: 20 }) }),
  fc.record({ kind: fc.constant('streams' as const), n: fc.integer({ min: 4, max: 10 }), clients: fc.integer({ min: 2, max: 10 }) }),
  fc.record({ kind: fc.constant('listens' as const), n: fc.integer({ min: 4, max: 12 }) }),
  fc.record({ kind: fc.constant('batch' as const), n: fc.integer({ min: 1, max: 100 }), calls: fc.integer({ min: 0, max: 100 }) }),
  fc.record({ kind: fc.constant('stdio' as const), n: fc.integer({ min: 3, max: 8 }), clients: fc.integer({ min: 2, max: 8 }) }),
  fc.record({ kind: fc.constant('legacy' as const), n: fc.integer({ min: 3, max: 8 }), clients: fc.integer({ min: 2, max: 8 }) }),
);

const MALLORY = 'mallory';
const malloryVia = (i: number, key?: DpopKey): Caller => ({ sub: MALLORY, client: `mallory-app-${i}`, ...(key && { key }) });

/** At most `width` of `tasks` at once; failures (a socket mallory's flood got reset) are hers alone and ignored. */
async function inParallel(count: number, width: number, task: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, count) }, async () => {
      while (next < count) await task(next++).catch(() => undefined);
    }),
  );
}

/** What mallory was answered, by status: the flood must have met the bounds for the property to mean anything. */
const malloryStatuses = new Map<number, number>();
const seen = (res: Response) => void malloryStatuses.set(res.status, (malloryStatuses.get(res.status) ?? 0) + 1);
const drain = async (res: Response) => {
  seen(res);
  await res.arrayBuffer().catch(() => undefined);
};

/** Runs one of mallory's actions; streams she holds open are aborted by `held` at the end of the run. */
async function flood(gw: TestGateway, action: Flood, keys: DpopKey[], held: AbortController): Promise<void> {
  const signal = held.signal;
  switch (action.kind) {
    case 'burst':
      return inParallel(action.n, 20, async (i) => drain(await send(gw, action.path, malloryVia(i % 3), { body: echo(i, 'burst') })));
    case 'dpop':
      return inParallel(action.n, 10, async (i) => drain(await send(gw, OPEN, malloryVia(i % 2, keys[i % 2]), { body: { jsonrpc: '2.0', id: i, method: 'ping' } })));
    case 'sessions':
      return inParallel(action.n, 10, async (i) => {
        const { answer } = await openSession(gw, OPEN, malloryVia(i % action.clients));
        malloryStatuses.set(answer.status, (malloryStatuses.get(answer.status) ?? 0) + 1);
      });
    case 'streams':
      return inParallel(action.n, 5, async (i) => {
        const who = malloryVia(i % action.clients);
        const { session } = await openSession(gw, OPEN, who);
        // Held open, unread, until the run ends.
        seen(await send(gw, OPEN, who, { method: 'GET', session, signal }));
      });
    case 'listens':
      return inParallel(action.n, 6, async (i) => {
        const body = { jsonrpc: '2.0', id: i, method: 'subscriptions/listen', params: { notifications: { toolsListChanged: true }, _meta: { 'io.modelcontextprotocol/protocolVersion': WIRE_2026, 'io.modelcontextprotocol/clientCapabilities': {} } } };
        seen(await send(gw, OPEN, malloryVia(i % 4), { body, signal, headers: { 'mcp-protocol-version': WIRE_2026, 'mcp-method': 'subscriptions/listen' } }));
      });
    case 'batch': {
      const who = malloryVia(0);
      const { session } = await openSession(gw, OPEN, who);
      const calls = Math.min(action.calls, action.n);
      const batch = Array.from({ length: action.n }, (_, i) => (i < calls ? echo(i + 10, 'x'.repeat(64)) : { jsonrpc: '2.0', id: i + 10, method: 'ping' }));
      await drain(await send(gw, OPEN, who, { body: batch, session }));
      return;
    }
    case 'legacy':
      return inParallel(action.n, 4, async (i) => {
        const { answer } = await openSession(gw, LEGACY, malloryVia(i % action.clients));
        malloryStatuses.set(answer.status, (malloryStatuses.get(answer.status) ?? 0) + 1);
      });
    case 'stdio':
      return inParallel(action.n, 4, async (i) => {
        const { answer } = await openSession(gw, MEMORY, malloryVia(i % action.clients), 'application/json');
        malloryStatuses.set(answer.status, (malloryStatuses.get(answer.status) ?? 0) + 1);
      });
  }
}

/** /healthz every 100 ms until `done`; every status seen. */
async function watchHealth(gw: TestGateway, done: { value: boolean }): Promise<number[]> {
  const statuses: number[] = [];
  while (!done.value) {
    const res = await fetch(`${gw.url}/healthz`).catch(() => undefined);
    statuses.push(res?.status ?? 0);
    await res?.arrayBuffer();
    await new Promise((r) => setTimeout(r, 100));
  }
  return statuses;
}

// --- the property, on each store ---------------------------------------------------------------

const STORES = [
  { name: 'the memory store (1,000 entries)', runs: 6, store: async () => ({ config: { kind: 'memory', max_entries: 1000 }, stop: async () => undefined }) },
  {
    name: 'a real redis-server',
    runs: 4,
    store: async () => {
      const redis: RedisServer = await startRedisServer();
      return { config: { kind: 'redis', url: redis.url, key_prefix: `k-prop-${randomUUID()}:` }, stop: () => redis.stop() };
    },
  },
];

describe.each(STORES)('[K79][K80][K81] one principal\'s traffic never changes another\'s answers, on $name', ({ runs, store }) => {
  let gw: TestGateway;
  let stopStore: () => Promise<void>;
  let bobKey: DpopKey;
  let malloryKeys: DpopKey[];
  let baseline: Record<string, Answer[]>;

  beforeAll(async () => {
    const opened = await store();
    stopStore = opened.stop;
    const upstream = everything.url;
    gw = await startTestGateway({
      'gateway.yaml': gatewayYaml({ log_level: 'warn', store: opened.config }),
      'open.yaml': jwtRoute(OPEN, upstream, issuer, { limits: { max_get_streams_per_user: STREAMS_PER_USER, upstream_timeout: '20s' } }),
      'limited.yaml': jwtRoute(LIMITED, upstream, issuer, { rate_limits: [{ per: 'subject', requests: RATE_LIMIT, window: '1m' }], limits: { upstream_timeout: '20s' } }),
      'legacy.yaml': jwtRoute(LEGACY, '', issuer, { upstream: { sse: { url: everythingSse.url, ...LEGACY_SESSIONS } }, limits: { upstream_timeout: '20s' } }),
      'memory.yaml': jwtRoute(MEMORY, '', issuer, {
        upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' }, ...PROCESSES } },
        limits: { max_get_streams_per_user: STREAMS_PER_USER, upstream_timeout: '20s' },
      }),
    });
    [bobKey, ...malloryKeys] = await Promise.all([dpopKey(), dpopKey(), dpopKey()]);
    // What each of them gets from a quiet gateway.
    baseline = await ordinaryWork(gw, 'baseline', bobKey);
  }, 120_000);

  afterAll(async () => {
    await gw?.stop();
    await stopStore?.();
  });

  it('control: the ordinary work succeeds, and the same work again on a quiet gateway gets the same answers', async () => {
    for (const [who, transcript] of Object.entries(baseline)) {
      for (const answer of transcript.slice(0, -1)) expect(answer.status, who).toBe(200);
      for (const answer of transcript) for (const m of answer.messages) expect(isObject(m) && 'error' in m, `${who}: ${JSON.stringify(m)}`).toBe(false);
    }
    expect(await ordinaryWork(gw, 'control', bobKey)).toEqual(baseline);
  }, 60_000);

  it('whatever mallory does (bursts, DPoP floods, sessions through many clients, streams, listens, batches, processes, legacy SSE sessions), alice, bob and carol get exactly their quiet answers and /healthz stays 200 (property)', async () => {
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(floodArb, { minLength: 1, maxLength: 4 }), async (actions) => {
        const tag = `run${run++}`;
        const held = new AbortController();
        const done = { value: false };
        const health = watchHealth(gw, done);
        const floodAll = async () => {
          for (const action of actions) await flood(gw, action, malloryKeys, held);
        };
        try {
          // Once to spend her shares and fill her caps (her streams stay open), then again while the others work.
          await floodAll();
          const [answers] = await Promise.all([ordinaryWork(gw, tag, bobKey), floodAll()]);
          expect(answers).toEqual(baseline);
        } finally {
          held.abort();
          done.value = true;
        }
        expect(new Set(await health)).toEqual(new Set([200]));
        expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
      }),
      { numRuns: runs },
    );
    // The flood met the bounds: rate limits, DPoP shares or stream shares refused her (429).
    expect(malloryStatuses.get(429) ?? 0).toBeGreaterThan(0);
  }, 600_000);
});
