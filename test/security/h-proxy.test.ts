/**
 * SECURITY-CASES group H (upstream credentials and proxying, cases 34–42) against the real
 * gateway and a recording upstream. Raw-socket requests where fetch would fix the bytes; the
 * variants live in corpora/header-tricks.json, path-tricks.json and framing-tricks.json.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { TestGateway } from '../helpers/gateway.js';
import { startJwtStage, stopJwtStage } from '../helpers/jwt-gateway.js';
import { buildRequest, headerOf, openRaw, rawRequest, unescapeBytes, type RawResponse } from '../helpers/raw-http.js';
import { readCorpus } from './corpora/corpus.js';
import {
  expectRejection,
  gatewayYaml,
  jwtRoute,
  PUBLIC_URL,
  resourceOf,
  simplifyRaw,
  tokenSecrets,
  type RecordedRequest,
  type RecordingUpstream,
  type TestIssuer,
} from '../helpers/security-fixtures.js';

interface HeaderCase {
  name: string;
  headers: Array<[string, string]>;
  mustNotReach?: string[];
  credentialSurvives?: boolean;
  /** The case spells the credential header of this route: only meaningful there. */
  credentialHeaderOf?: string;
}
interface RouteVariant {
  target: string;
  same?: boolean;
}
interface TargetCase {
  name: string;
  requestLine: string;
  connect?: boolean;
  methodRefused?: boolean;
}
interface FramingCase {
  name: string;
  bytes: string;
  status: number[];
  bodyMayBeEmpty?: boolean;
}

const headerTricks = readCorpus<{ identity: HeaderCase[]; hopByHop: HeaderCase[] }>('header-tricks.json');
const pathTricks = readCorpus<{ route: RouteVariant[]; requestTargets: TargetCase[] }>('path-tricks.json');
const framing = readCorpus<{ cases: FramingCase[] }>('framing-tricks.json').cases;

const STATIC_SECRET = 'upstream-static-secret-value';
const API_KEY = 'upstream-api-key-value';
const APP_ORIGIN = 'https://app.example.test';
const TOOLS_LIST = '{"jsonrpc":"2.0","id":2,"method":"tools/list"}';
const INITIALIZE = '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}';

/** route path → what the upstream must receive as the credential */
const CREDENTIALS = {
  '/h/mcp': { header: 'authorization', value: `Bearer ${STATIC_SECRET}` },
  '/k/mcp': { header: 'x-api-key', value: API_KEY },
} as const;

let issuer: TestIssuer;
let up: RecordingUpstream;
let gw: TestGateway;
const tokens = new Map<string, string>();

/** A token for `path` (cached per path and principal). */
async function tokenFor(path: string, sub = 'alice', clientId = 'client-a'): Promise<string> {
  const key = `${path} ${sub} ${clientId}`;
  let token = tokens.get(key);
  if (!token) {
    token = await issuer.mint({ aud: resourceOf(path), sub, client_id: clientId, scope: 'mcp:read' });
    tokens.set(key, token);
  }
  return token;
}

const normalise = (name: string) => name.toLowerCase().replaceAll('_', '-');
const valuesOf = (r: RecordedRequest, name: string) => r.headers.filter(([n]) => normalise(n) === normalise(name)).map(([, v]) => v);

/** Runs `run` and returns what reached the upstream meanwhile. */
async function upstreamDuring<T>(run: () => Promise<T>): Promise<{ result: T; seen: RecordedRequest[] }> {
  const before = up.requests.length;
  const result = await run();
  await new Promise((r) => setTimeout(r, 20));
  return { result, seen: up.requests.slice(before) };
}

async function nothingUpstream<T>(run: () => Promise<T>): Promise<T> {
  const { result, seen } = await upstreamDuring(run);
  expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual([]);
  return result;
}

function raw(path: string, opts: { method?: string; token?: string; headers?: Array<[string, string]>; body?: string; target?: string } = {}): Promise<RawResponse> {
  const method = opts.method ?? 'POST';
  const headers: Array<[string, string]> = [...(opts.headers ?? [])];
  if (opts.token) headers.unshift(['Authorization', `Bearer ${opts.token}`]);
  return rawRequest(
    gw.port,
    buildRequest({ method, target: opts.target ?? path, host: `127.0.0.1:${gw.port}`, headers, body: opts.body ?? (method === 'POST' ? TOOLS_LIST : undefined) }),
  );
}

interface SseEvent {
  data: string;
  id?: string;
  /** ms since the request started */
  at: number;
}

/** Reads server-sent events as they arrive, up to `max` (then cancels the body). */
async function readEvents(res: Response, max: number, started: number): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  while (events.length < max) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end: number;
    while ((end = buffer.indexOf('\n\n')) !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
      const id = block.split('\n').find((l) => l.startsWith('id: '))?.slice(4);
      if (data) events.push({ data, id, at: Date.now() - started });
    }
  }
  await reader.cancel().catch(() => undefined);
  return events;
}

beforeAll(async () => {
  ({ issuer, up, gw } = await startJwtStage(
    (stage) => {
      const route = (path: string, upstreamPath: string, extra: Record<string, unknown> = {}) => jwtRoute(path, `${stage.up.origin}${upstreamPath}`, stage.issuer, extra);
      return {
        'gateway.yaml': gatewayYaml({ limits: { header_timeout: '1s', request_timeout: '2s' } }),
        'h.yaml': route('/h/mcp', '/mcp', { upstream_auth: { kind: 'static', value: { env: 'H_SECRET' } } }),
        'k.yaml': route('/k/mcp', '/mcp', { upstream_auth: { kind: 'static', header: 'X-Api-Key', value: { env: 'K_SECRET' } } }),
        'n.yaml': route('/n/mcp', '/mcp'),
        'sse.yaml': route('/sse/mcp', '/sse?events=5&gap=300'),
        'long.yaml': route('/long/mcp', '/sse?events=200&gap=100'),
        'idle.yaml': route('/idle/mcp', '/sse?events=2&gap=2600'),
        'challenge.yaml': route('/challenge/mcp', '/challenge', { upstream_auth: { kind: 'static', value: { env: 'H_SECRET' } } }),
        'forbidden.yaml': route('/forbidden/mcp', '/forbidden'),
        'hostile.yaml': route('/hostile/mcp', '/hostile-headers'),
        'cors.yaml': route('/cors/mcp', '/mcp', { cors: { allowed_origins: [APP_ORIGIN] } }),
      };
    },
    { H_SECRET: STATIC_SECRET, K_SECRET: API_KEY },
  ));
});

afterAll(() => stopJwtStage({ gw, issuer, up }));

describe('[H34] the client token never reaches the upstream', () => {
  it.each([
    ['/h/mcp', 'static Authorization'],
    ['/k/mcp', 'static X-Api-Key'],
    ['/n/mcp', 'none'],
  ])('%s (%s): POST, GET stream and DELETE carry only the configured credential', async (path) => {
    const token = await tokenFor(path);
    const { seen } = await upstreamDuring(async () => {
      const init = await raw(path, { token, body: INITIALIZE });
      expect(init.status).toBe(200);
      const session = headerOf(init, 'mcp-session-id')!;
      expect(session).toBeTruthy();
      expect((await raw(path, { token, headers: [['Mcp-Session-Id', session]] })).status).toBe(200);
      const started = Date.now();
      const abort = new AbortController();
      const stream = await fetch(`${gw.url}${path}`, {
        headers: { authorization: `Bearer ${token}`, 'mcp-session-id': session, accept: 'text/event-stream' },
        signal: abort.signal,
      });
      expect(stream.status).toBe(200);
      expect(await readEvents(stream, 1, started)).toHaveLength(1);
      abort.abort();
      expect((await raw(path, { method: 'DELETE', token, headers: [['Mcp-Session-Id', session]] })).status).toBe(200);
    });
    expect(seen.map((r) => r.method)).toEqual(['POST', 'POST', 'GET', 'DELETE']);
    const everything = seen.map((r) => `${r.url}\n${r.headers.map(([n, v]) => `${n}: ${v}`).join('\n')}\n${r.body.toString('latin1')}`).join('\n');
    for (const secret of tokenSecrets(token)) expect(everything.includes(secret)).toBe(false);
    const credential = CREDENTIALS[path as keyof typeof CREDENTIALS];
    for (const r of seen) {
      expect(r.url).toBe('/mcp');
      if (credential) expect(valuesOf(r, credential.header)).toEqual([credential.value]);
      if (credential?.header !== 'authorization') expect(valuesOf(r, 'authorization')).toEqual([]);
    }
  });
});

describe('[H35] identity and credential headers are dropped and cannot override the credential (corpora "identity")', () => {
  const cases = headerTricks.identity.flatMap((c) =>
    (['/h/mcp', '/k/mcp'] as const).filter((path) => !c.credentialHeaderOf || c.credentialHeaderOf === path).map((path) => [c.name, path, c] as const),
  );

  it.each(cases)('%s at %s', async (_name, path, c) => {
    const token = await tokenFor(path);
    const { result, seen } = await upstreamDuring(() => raw(path, { token, headers: c.headers }));
    expect(result.status, result.body).toBe(200);
    expect(seen).toHaveLength(1);
    const forwarded = seen[0]!;
    const credential = CREDENTIALS[path];
    for (const [name] of c.headers) {
      if (normalise(name) === credential.header) continue;
      expect(valuesOf(forwarded, name), `${name} reached the upstream`).toEqual([]);
    }
    expect(valuesOf(forwarded, credential.header)).toEqual([credential.value]);
    if (credential.header !== 'authorization') expect(valuesOf(forwarded, 'authorization')).toEqual([]);
    const forwardedHeaders = forwarded.headers.map(([n, v]) => `${n}: ${v}`).join('\n');
    for (const [, value] of c.headers) expect(forwardedHeaders).not.toContain(value);
  });
});

describe("[H36] an upstream's own challenge is not relayed", () => {
  it('turns an upstream 401 naming its AS into a 502 without its challenge', async () => {
    const token = await tokenFor('/challenge/mcp');
    const res = await raw('/challenge/mcp', { token });
    expectRejection(simplifyRaw(res), { status: 502, error: 'bad_gateway', challenge: 'none' }, tokenSecrets(token));
    expect(res.raw.toString('latin1')).not.toContain('evil-as.example');
    expect(up.requests.at(-1)!.url).toBe('/challenge');
  });

  it("drops an upstream 403's WWW-Authenticate", async () => {
    const token = await tokenFor('/forbidden/mcp');
    const res = await raw('/forbidden/mcp', { token });
    expect(res.status).toBe(403);
    expect(headerOf(res, 'www-authenticate')).toBeUndefined();
    expect(res.headers.map(([n, v]) => `${n}: ${v}`).join('\n')).not.toContain('evil-as.example');
  });
});

describe('[H37] path variants and request targets (corpora/path-tricks.json)', () => {
  const ROUTE = '/h/mcp';
  const placeholders: Array<[string, string]> = [
    ['$routeSlashEncoded', '/h%2fmcp'],
    ['$routeDoubleSlash', '/h//mcp'],
    ['$routeUpper', '/H/MCP'],
    ['$routeLastUpper', '/h/MCP'],
    ['$routeRawNul', '/h/mcp\0'],
    ['$routeBackslash', '/h\\mcp'],
    ['$routeEncodedLetter', '/h/%6dcp'],
    ['$route', ROUTE],
  ];
  const fill = (s: string) => {
    let out = s;
    for (const [k, v] of placeholders) out = out.replaceAll(k, v);
    return out.replaceAll('$gateway', `127.0.0.1:${gw.port}`).replaceAll('$upstream', new URL(up.origin).host);
  };

  it.each(pathTricks.route.map((v) => [v.target, v] as const))('%s', async (_t, variant) => {
    const token = await tokenFor(ROUTE);
    const target = fill(variant.target);
    const { result, seen } = await upstreamDuring(() => raw(ROUTE, { token, target }));
    if (variant.same) {
      expect(result.status).toBe(200);
      // the upstream gets exactly its configured URL: no client path or query
      expect(seen.map((r) => r.url)).toEqual(['/mcp']);
      return;
    }
    expect(seen.map((r) => `${r.method} ${r.url}`)).toEqual([]);
    expect([400, 404]).toContain(result.status);
    expect(Object.keys(JSON.parse(result.body) as object).sort()).toEqual(['error', 'error_description']);
    expect(result.raw.toString('latin1')).not.toContain(token);
  });

  it.each(pathTricks.requestTargets.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const token = await tokenFor(ROUTE);
    const res = await nothingUpstream(() =>
      rawRequest(gw.port, Buffer.from(`${fill(c.requestLine)}\r\nHost: 127.0.0.1:${gw.port}\r\nAuthorization: Bearer ${token}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`)),
    );
    expect(c.connect || c.methodRefused ? [405] : [400]).toContain(res.status);
    expect(JSON.parse(res.body)).toMatchObject({ error: res.status === 405 ? 'method_not_allowed' : 'invalid_request' });
    expect(res.raw.toString('latin1')).not.toContain(token);
  });
});

describe('[H38] hop-by-hop headers (corpora "hopByHop")', () => {
  const cases = headerTricks.hopByHop.flatMap((c) => (['/h/mcp', '/k/mcp'] as const).map((path) => [c.name, path, c] as const));

  it.each(cases)('%s at %s', async (_name, path, c) => {
    const token = await tokenFor(path);
    const { result, seen } = await upstreamDuring(() => raw(path, { token, headers: c.headers }));
    expect(result.status, result.body).toBe(200);
    expect(seen).toHaveLength(1);
    for (const name of c.mustNotReach ?? []) {
      // the gateway's own hop to the upstream has its own Connection header; none of the client's tokens
      if (name === 'connection') expect(valuesOf(seen[0]!, name).every((v) => /^(keep-alive|close)$/i.test(v))).toBe(true);
      else expect(valuesOf(seen[0]!, name), `${name} reached the upstream`).toEqual([]);
    }
    const credential = CREDENTIALS[path];
    expect(valuesOf(seen[0]!, credential.header)).toEqual([credential.value]);
    expect(valuesOf(seen[0]!, 'host')).toEqual([new URL(up.origin).host]);
    // the body still arrives whole with its own length, whatever Connection named
    expect(seen[0]!.body.toString()).toBe(TOOLS_LIST);
  });

  it('never forwards an Upgrade (websocket, h2c)', async () => {
    const token = await tokenFor('/n/mcp');
    for (const upgrade of ['websocket', 'h2c']) {
      const { result, seen } = await upstreamDuring(() =>
        raw('/n/mcp', { token, headers: [['Connection', 'Upgrade, HTTP2-Settings'], ['Upgrade', upgrade], ['HTTP2-Settings', 'AAMAAABkAAQAAP__'], ['Sec-WebSocket-Key', 'dGhlIHNhbXBsZSBub25jZQ=='], ['Sec-WebSocket-Version', '13']] }),
      );
      expect(result.status).not.toBe(101);
      for (const r of seen) {
        expect(valuesOf(r, 'upgrade')).toEqual([]);
        expect(valuesOf(r, 'http2-settings')).toEqual([]);
        expect(valuesOf(r, 'connection').every((v) => /^(keep-alive|close)$/i.test(v))).toBe(true);
      }
    }
  });

  it('drops hop-by-hop, cookie, challenge and CORS headers from the upstream response', async () => {
    const token = await tokenFor('/hostile/mcp');
    const res = await raw('/hostile/mcp', { token });
    expect(res.status).toBe(200);
    const names = res.headers.map(([n]) => n.toLowerCase());
    for (const dropped of ['x-upstream-private', 'keep-alive', 'set-cookie', 'proxy-authenticate', 'www-authenticate', 'access-control-allow-origin', 'access-control-allow-credentials']) {
      expect(names, dropped).not.toContain(dropped);
    }
    expect(headerOf(res, 'x-upstream-ok')).toBe('kept');
    expect(headerOf(res, 'connection') ?? 'close').toMatch(/^(close|keep-alive)$/i);
  });
});

describe('[H39] framing, body size and slow clients', () => {
  it.each(framing.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const token = await tokenFor('/h/mcp');
    const bytes = unescapeBytes(c.bytes.replaceAll('$token', token).replaceAll('$route', '/h/mcp'));
    const res = await nothingUpstream(() => rawRequest(gw.port, bytes));
    expect(c.status).toContain(res.status);
    if (!(c.bodyMayBeEmpty && res.body === '')) expect(Object.keys(JSON.parse(res.body) as object).sort()).toEqual(['error', 'error_description']);
    expect(res.raw.toString('latin1')).not.toContain(token);
  });

  it('refuses a declared 10 MB body with 413 before reading it', async () => {
    const token = await tokenFor('/h/mcp');
    const res = await nothingUpstream(() =>
      rawRequest(gw.port, buildRequest({ method: 'POST', target: '/h/mcp', host: 'gw', headers: [['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json'], ['Content-Length', String(10 * 1024 * 1024)]] })),
    );
    expectRejection(simplifyRaw(res), { status: 413, error: 'payload_too_large' }, tokenSecrets(token));
  });

  it('cuts a streamed (chunked) 10 MB body at the limit with 413', async () => {
    const token = await tokenFor('/h/mcp');
    const res = await nothingUpstream(async () => {
      const conn = await openRaw(gw.port);
      await conn.write(buildRequest({ method: 'POST', target: '/h/mcp', host: 'gw', headers: [['Authorization', `Bearer ${token}`], ['Content-Type', 'application/json'], ['Transfer-Encoding', 'chunked']] }));
      const chunk = Buffer.concat([Buffer.from(`${(64 * 1024).toString(16)}\r\n`), Buffer.alloc(64 * 1024, 0x20), Buffer.from('\r\n')]);
      let answered = false;
      void conn.response.then(() => (answered = true), () => (answered = true));
      for (let sent = 0; sent < 10 * 1024 * 1024 && !answered; sent += 64 * 1024) {
        await conn.write(chunk).catch(() => (answered = true));
      }
      try {
        return await conn.response;
      } finally {
        conn.destroy();
      }
    });
    expectRejection(simplifyRaw(res), { status: 413, error: 'payload_too_large' }, tokenSecrets(token));
  });

  it('closes slow-drip headers, slow-drip bodies and silent connections by the server timeouts, while normal requests keep their latency', async () => {
    const token = await tokenFor('/h/mcp');
    const timeNormal = async () => {
      const started = performance.now();
      const res = await raw('/h/mcp', { token });
      expect(res.status).toBe(200);
      return performance.now() - started;
    };
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const baseline: number[] = [];
    for (let i = 0; i < 5; i++) baseline.push(await timeNormal());

    const before = up.requests.length;
    const started = Date.now();
    const drips = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        const conn = await openRaw(gw.port);
        const kind = i % 3 === 0 ? 'headers' : i % 3 === 1 ? 'body' : 'silent';
        if (kind === 'headers') await conn.write('POST /h/mcp HTTP/1.1\r\nHost: gw\r\n');
        if (kind === 'body') await conn.write(`POST /h/mcp HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`);
        const timer =
          kind === 'silent' ? undefined : setInterval(() => void conn.write(kind === 'headers' ? 'X-Drip: a\r\n' : ' ').catch(() => clearInterval(timer)), 150);
        const closedAt = await Promise.race([conn.closed, new Promise<number>((r) => setTimeout(() => r(-1), 10_000))]);
        clearInterval(timer);
        conn.destroy();
        return { kind, after: closedAt === -1 ? Infinity : closedAt - started, status: conn.received().toString('latin1').slice(9, 12) };
      }).concat(
        // normal requests in parallel with the drips
        (async () => {
          await new Promise((r) => setTimeout(r, 300));
          const during: number[] = [];
          for (let i = 0; i < 10; i++) during.push(await timeNormal());
          return { kind: 'normal', after: median(during), status: '' };
        })(),
      ),
    );
    const normal = drips.find((d) => d.kind === 'normal')!;
    // the median, so one scheduling hiccup of a busy CI machine does not decide
    expect(normal.after).toBeLessThan(Math.max(100, 5 * median(baseline)));
    for (const d of drips.filter((x) => x.kind !== 'normal')) {
      // header_timeout 1s, request_timeout 2s, plus the sweep interval and slack for a loaded
      // machine; Node's default 30 s sweep would hold them all far longer
      expect(d.after, `${d.kind} drip`).toBeLessThan(d.kind === 'headers' || d.kind === 'silent' ? 4_000 : 5_000);
      if (d.status) expect(['408', '400', '']).toContain(d.status);
    }
    // only the normal requests reached the upstream
    expect(up.requests.slice(before).every((r) => r.body.toString() === TOOLS_LIST)).toBe(true);
  });
});

describe('[H40] streaming', () => {
  it('forwards SSE event by event', async () => {
    const token = await tokenFor('/sse/mcp');
    const started = Date.now();
    const res = await fetch(`${gw.url}/sse/mcp`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'text/event-stream' }, body: TOOLS_LIST });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('x-accel-buffering')).toBe('no');
    const events = await readEvents(res, 5, started);
    expect(events).toHaveLength(5);
    // the upstream sends one every 300 ms: the first arrives long before the last is sent
    expect(events.at(-1)!.at - events[0]!.at).toBeGreaterThan(900);
    for (const e of events) {
      const sentAt = (JSON.parse(e.data) as { at: number }).at - started;
      expect(e.at - sentAt).toBeLessThan(250);
    }
  });

  it('cancels the upstream request when the client goes away', async () => {
    const token = await tokenFor('/long/mcp');
    const abort = new AbortController();
    const started = Date.now();
    const res = await fetch(`${gw.url}/long/mcp`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: TOOLS_LIST, signal: abort.signal });
    expect(await readEvents(res, 2, started)).toHaveLength(2);
    abort.abort();
    await vi.waitFor(() => expect(up.cutShort).toContain('/sse?events=200&gap=100'), { timeout: 3_000, interval: 50 });
  });

  it('keeps an idle stream open past the request and header timeouts', async () => {
    const token = await tokenFor('/idle/mcp');
    const started = Date.now();
    const res = await fetch(`${gw.url}/idle/mcp`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: TOOLS_LIST });
    const events = await readEvents(res, 2, started);
    expect(events).toHaveLength(2);
    expect(events[1]!.at).toBeGreaterThan(4_000);
  });
});

describe('[H41] Origin and CORS', () => {
  const PATH = '/cors/mcp';

  it.each([
    ['another site', 'https://evil.example'],
    ['null', 'null'],
    ['a host-suffix of the allowed origin', 'https://app.example.test.evil.example'],
    ['the allowed host over http', 'http://app.example.test'],
    ['the allowed host on another port', 'https://app.example.test:8443'],
    ['an origin with a path', 'https://app.example.test/x'],
    ['garbage', 'not an origin'],
  ])('refuses Origin %s with 403 and forwards nothing (token or not)', async (_name, origin) => {
    const token = await tokenFor(PATH);
    for (const withToken of [true, false]) {
      const res = await nothingUpstream(() => raw(PATH, { token: withToken ? token : undefined, headers: [['Origin', origin]] }));
      expectRejection(simplifyRaw(res), { status: 403, error: 'forbidden_origin', challenge: 'none' }, tokenSecrets(token));
      expect(headerOf(res, 'access-control-allow-origin')).toBeUndefined();
    }
  });

  it('refuses an origin that another route allows', async () => {
    const token = await tokenFor('/n/mcp');
    const res = await nothingUpstream(() => raw('/n/mcp', { token, headers: [['Origin', APP_ORIGIN]] }));
    expect(res.status).toBe(403);
  });

  it('serves the allowed origin and the gateway origin, with CORS headers only for the former', async () => {
    const token = await tokenFor(PATH);
    const allowed = await raw(PATH, { token, headers: [['Origin', APP_ORIGIN]] });
    expect(allowed.status).toBe(200);
    expect(headerOf(allowed, 'access-control-allow-origin')).toBe(APP_ORIGIN);
    const same = await raw(PATH, { token, headers: [['Origin', PUBLIC_URL]] });
    expect(same.status).toBe(200);
  });

  it('answers a preflight without a token and forwards nothing', async () => {
    const res = await nothingUpstream(() =>
      raw(PATH, { method: 'OPTIONS', headers: [['Origin', APP_ORIGIN], ['Access-Control-Request-Method', 'POST'], ['Access-Control-Request-Headers', 'authorization, content-type, mcp-session-id']] }),
    );
    expect(res.status).toBe(204);
    expect(headerOf(res, 'access-control-allow-origin')).toBe(APP_ORIGIN);
    expect(headerOf(res, 'access-control-allow-headers')).toMatch(/authorization/i);
    expect(headerOf(res, 'access-control-allow-headers')).toMatch(/mcp-session-id/i);
    expect(headerOf(res, 'access-control-allow-methods')).toMatch(/POST/);
    expect(headerOf(res, 'www-authenticate')).toBeUndefined();

    const noOrigin = await nothingUpstream(() => raw(PATH, { method: 'OPTIONS' }));
    expect(noOrigin.status).toBe(204);
    const evil = await nothingUpstream(() => raw(PATH, { method: 'OPTIONS', headers: [['Origin', 'https://evil.example'], ['Access-Control-Request-Method', 'POST']] }));
    expect(evil.status).toBe(403);
    expect(headerOf(evil, 'access-control-allow-origin')).toBeUndefined();
  });

  it('refuses a duplicate Host with 400, token or not', async () => {
    const token = await tokenFor('/h/mcp');
    for (const auth of [[['Authorization', `Bearer ${token}`]] as Array<[string, string]>, []]) {
      const res = await nothingUpstream(() =>
        rawRequest(gw.port, buildRequest({ method: 'POST', target: '/h/mcp', host: 'gw', headers: [['Host', 'evil.example'], ...auth], body: TOOLS_LIST })),
      );
      expect(res.status).toBe(400);
      expect(JSON.parse(res.body)).toMatchObject({ error: 'invalid_request' });
    }
  });
});

describe('[H42] sessions are bound to the principal that created them', () => {
  const PATH = '/n/mcp';
  let session: string;

  beforeAll(async () => {
    const init = await raw(PATH, { token: await tokenFor(PATH, 'alice', 'client-a'), body: INITIALIZE });
    expect(init.status).toBe(200);
    session = headerOf(init, 'mcp-session-id')!;
    expect(session).toMatch(/^[0-9a-f-]{36}$/);
  });

  const others: Array<[string, string, string]> = [
    ['another user, same client', 'bob', 'client-a'],
    ['the same user through another client', 'alice', 'client-b'],
  ];
  it.each(others)('refuses %s: POST, GET, DELETE → 404 (a GET with a Last-Event-ID not passed on to it: 400, K68)', async (_name, sub, clientId) => {
    const token = await tokenFor(PATH, sub, clientId);
    const sessionHeader: [string, string] = ['Mcp-Session-Id', session];
    const attempts = [
      raw(PATH, { token, headers: [sessionHeader] }),
      raw(PATH, { method: 'GET', token, headers: [sessionHeader, ['Accept', 'text/event-stream']] }),
      raw(PATH, { method: 'DELETE', token, headers: [sessionHeader] }),
    ];
    for (const attempt of attempts) {
      const res = await nothingUpstream(() => attempt);
      expectRejection(simplifyRaw(res), { status: 404, error: 'not_found' }, tokenSecrets(token));
    }
    const resumed = await nothingUpstream(() => raw(PATH, { method: 'GET', token, headers: [sessionHeader, ['Last-Event-ID', '5'], ['Accept', 'text/event-stream']] }));
    expectRejection(simplifyRaw(resumed), { status: 400, error: 'invalid_request' }, tokenSecrets(token));
  });

  it('serves the creating principal (with a fresh token too) and passes Last-Event-ID through', async () => {
    const fresh = await issuer.mint({ aud: resourceOf(PATH), sub: 'alice', client_id: 'client-a', scope: 'mcp:read' });
    const { result, seen } = await upstreamDuring(() => raw(PATH, { token: fresh, headers: [['Mcp-Session-Id', session]] }));
    expect(result.status).toBe(200);
    expect(valuesOf(seen[0]!, 'mcp-session-id')).toEqual([session]);

    // Her GET stream's first event carries `id: 1`; resuming after it reaches the upstream as sent.
    const headers = { authorization: `Bearer ${fresh}`, 'mcp-session-id': session, accept: 'text/event-stream' };
    const opened = await fetch(`${gw.url}${PATH}`, { headers });
    expect(opened.status).toBe(200);
    expect(JSON.parse((await readEvents(opened, 1, Date.now()))[0]!.data)).toMatchObject({ params: { lastEventId: null } });
    const started = Date.now();
    const stream = await fetch(`${gw.url}${PATH}`, { headers: { ...headers, 'last-event-id': '1' } });
    expect(stream.status).toBe(200);
    const [event] = await readEvents(stream, 1, started);
    expect(JSON.parse(event!.data)).toMatchObject({ params: { lastEventId: '1' } });
  });

  it('refuses the session on another route, an unknown id, and a malformed id', async () => {
    const hToken = await tokenFor('/h/mcp');
    expect((await nothingUpstream(() => raw('/h/mcp', { token: hToken, headers: [['Mcp-Session-Id', session]] }))).status).toBe(404);
    const aToken = await tokenFor(PATH);
    expect((await nothingUpstream(() => raw(PATH, { token: aToken, headers: [['Mcp-Session-Id', '00000000-0000-4000-8000-000000000000']] }))).status).toBe(404);
    expect((await nothingUpstream(() => raw(PATH, { token: aToken, headers: [['Mcp-Session-Id', 'x'.repeat(300)]] }))).status).toBe(400);
  });

  it('forgets the binding after a DELETE: the id is refused even to its creator', async () => {
    const token = await tokenFor(PATH);
    expect((await raw(PATH, { method: 'DELETE', token, headers: [['Mcp-Session-Id', session]] })).status).toBe(200);
    const res = await nothingUpstream(() => raw(PATH, { token, headers: [['Mcp-Session-Id', session]] }));
    expect(res.status).toBe(404);
  });
});
