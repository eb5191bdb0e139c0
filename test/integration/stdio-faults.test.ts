/**
 * stdio upstreams under faults (DESIGN §7.2): a child killed mid-call, a server that never
 * answers initialize, one that floods stderr, one that exits at once, one that writes an
 * oversized message, max_processes and max_processes_per_principal, idle reaping, a client that
 * goes away mid-call. Each
 * route starts the fixture server (test/helpers/stdio-fixture-server.mjs) in one mode.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectClient, FIXTURE_SERVER, isAlive, resultText, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';

let stage: StdioStage;
/** Where held calls' release files go (the fixture's `hold` tool). */
let releases: string;

const fixture = (mode: string, more: Record<string, unknown> = {}, limits: Record<string, unknown> = {}) => ({
  upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER, mode], ...more } },
  limits: { upstream_timeout: '2s', ...limits },
});

beforeAll(async () => {
  releases = await mkdtemp(join(tmpdir(), 'mag-stdio-holds-'));
  stage = await startStdioStage({
    '/probe/mcp': fixture('probe'),
    '/silent/mcp': fixture('silent'),
    '/flood/mcp': fixture('flood'),
    '/exit/mcp': fixture('exit'),
    '/huge/mcp': fixture('huge', {}, { max_body_bytes: 65_536 }),
    // Calls sleep here to keep a process busy: longer than the others' timeout.
    '/two/mcp': fixture('probe', { max_processes: 2 }, { upstream_timeout: '10s' }),
    '/capped/mcp': fixture('probe', { max_processes: 3, max_processes_per_principal: 2 }),
    '/busy/mcp': fixture('probe', { max_processes: 3, max_processes_per_principal: 2 }, { upstream_timeout: '10s' }),
    '/idle/mcp': fixture('probe', { idle_timeout: '400ms' }),
  });
}, 60_000);

afterAll(async () => {
  await stage?.close();
  if (releases) await rm(releases, { recursive: true, force: true });
});

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

async function post(path: string, body: unknown, headers: Record<string, string> = {}, sub = 'alice', signal?: AbortSignal): Promise<Response> {
  return fetch(stage.url(path), {
    method: 'POST',
    signal,
    headers: { authorization: `Bearer ${await stage.token(path, sub)}`, 'content-type': 'application/json', accept: 'application/json', ...headers },
    body: JSON.stringify(body),
  });
}

async function pidOf(path: string, sessionId: string, sub = 'alice'): Promise<number> {
  const res = await post(path, { jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'report', arguments: {} } }, { 'mcp-session-id': sessionId }, sub);
  return (JSON.parse(((await res.json()) as { result: { content: { text: string }[] } }).result.content[0]!.text) as { pid: number }).pid;
}

const processes = async (path: string) => (await stage.gw.metrics.stdioProcesses.get()).values.find((v) => v.labels.route === path)?.value ?? 0;
const exits = async (path: string, reason: string) =>
  (await stage.gw.metrics.stdioExits.get()).values.find((v) => v.labels.route === path && v.labels.reason === reason)?.value ?? 0;

interface Held {
  /** The call's status once it answered. */
  status: Promise<number>;
  tag: string;
  /** Lets the fixture answer. */
  release(): Promise<void>;
}

let holds = 0;
/**
 * A call that keeps its session's process busy until released (30 s at most), rather than for a fixed
 * time that must outlast the test's checks on a loaded machine.
 */
function hold(path: string, sessionId: string, sub = 'alice', signal?: AbortSignal): Held {
  const tag = `h${++holds}`;
  const until = join(releases, tag);
  const status = post(path, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'hold', arguments: { tag, until, ms: 30_000 } } }, { 'mcp-session-id': sessionId }, sub, signal).then((r) => r.status);
  return { status, tag, release: () => writeFile(until, '') };
}

/** Until each held call has reached its process: the fixture says so on stderr, which the gateway logs. */
const reached = (...calls: Held[]) =>
  waitFor(() => calls.every(({ tag }) => stage.gw.logs.some((l) => l.includes('"stream":"stderr"') && l.includes(`"msg":"holding ${tag}"`))), 10_000, 'the held calls to reach their processes');

describe('a process that ends ends its session', () => {
  it('child killed mid-call: the pending call gets an error, the session is then unknown (404), a new session works', async () => {
    const init = await post('/probe/mcp', INITIALIZE);
    const sessionId = init.headers.get('mcp-session-id')!;
    const pid = await pidOf('/probe/mcp', sessionId);
    const pending = post('/probe/mcp', { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'hold', arguments: { tag: 'killed' } } }, { 'mcp-session-id': sessionId });
    await waitFor(() => stage.gw.logs.some((l) => l.includes('"msg":"holding killed"')), 10_000, 'the call to reach the process');
    process.kill(pid, 'SIGKILL');
    const res = await pending;
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ error: 'bad_gateway' });
    expect((await post('/probe/mcp', { jsonrpc: '2.0', id: 3, method: 'tools/list' }, { 'mcp-session-id': sessionId })).status).toBe(404);
    const { client } = await connectClient(stage.url('/probe/mcp'), await stage.token('/probe/mcp'));
    try {
      expect(resultText(await client.callTool({ name: 'sleep', arguments: { ms: 1 } }))).toBe('slept 1');
    } finally {
      await client.close();
    }
  });

  it('a call that makes the server exit, on an event stream: a JSON-RPC error for the request, then the stream ends', async () => {
    const sessionId = (await post('/probe/mcp', INITIALIZE)).headers.get('mcp-session-id')!;
    // The fixture's `ask` opens the event stream (a sampling request) before anything fails.
    const res = await post('/probe/mcp', [{ jsonrpc: '2.0', id: 'a', method: 'tools/call', params: { name: 'ask', arguments: {} } }, { jsonrpc: '2.0', id: 'c', method: 'tools/call', params: { name: 'crash', arguments: {} } }], {
      'mcp-session-id': sessionId,
      accept: 'application/json, text/event-stream',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const text = await res.text();
    expect(text).toContain('sampling/createMessage');
    expect(text).toMatch(/"id":"a","error":\{"code":-32603/);
    expect(text).toMatch(/"id":"c","error":\{"code":-32603/);
  });

  it('a server that exits at once: 502, and nothing is left running', async () => {
    const res = await post('/exit/mcp', INITIALIZE);
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ error: 'bad_gateway' });
    await waitFor(async () => (await processes('/exit/mcp')) === 0, 5_000, 'the process count to drop');
  });

  it('a command that cannot start: 502 (spawn_failed counted)', async () => {
    const broken = await startStdioStage({ '/nothing/mcp': { upstream: { stdio: { command: '/nonexistent/mcp-server' } } } });
    try {
      const res = await fetch(broken.url('/nothing/mcp'), {
        method: 'POST',
        headers: { authorization: `Bearer ${await broken.token('/nothing/mcp')}`, 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify(INITIALIZE),
      });
      expect(res.status).toBe(502);
      const failed = (await broken.gw.metrics.stdioExits.get()).values.find((v) => v.labels.reason === 'spawn_failed');
      expect(failed?.value).toBe(1);
    } finally {
      await broken.close();
    }
  });
});

describe('bounded', () => {
  it('a server that never answers initialize: 504 within upstream_timeout, and its process is stopped', async () => {
    const started = Date.now();
    const res = await post('/silent/mcp', INITIALIZE);
    expect(res.status).toBe(504);
    expect(await res.json()).toMatchObject({ error: 'gateway_timeout' });
    expect(Date.now() - started).toBeLessThan(4_000);
    await waitFor(async () => (await processes('/silent/mcp')) === 0, 5_000, 'the silent process to stop');
    expect(await exits('/silent/mcp', 'timeout')).toBe(1);
  });

  it('the same for a 2026-07-28 client, whose process the gateway initializes itself', async () => {
    const res = await post('/silent/mcp', { jsonrpc: '2.0', id: 5, method: 'tools/list' }, { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' });
    expect(res.status).toBe(504);
    await waitFor(async () => (await processes('/silent/mcp')) === 0, 5_000, 'the silent process to stop');
  });

  it('a stderr flood is logged rate-limited and tagged, and the server still answers', async () => {
    const before = stage.gw.logs.length;
    const { client } = await connectClient(stage.url('/flood/mcp'), await stage.token('/flood/mcp'));
    try {
      // Until the rate limit has dropped lines (the flood is under way), rather than a fixed 1.5 s.
      await waitFor(() => stage.gw.logs.slice(before).some((l) => l.includes('"dropped_lines"')), 10_000, 'dropped stderr lines');
      expect(resultText(await client.callTool({ name: 'sleep', arguments: { ms: 1 } }))).toBe('slept 1');
    } finally {
      await client.close();
    }
    const stderrLines = stage.gw.logs.slice(before).filter((l) => l.includes('"stream":"stderr"'));
    // The fixture writes ~100 000 lines; a burst of 50 and 10 a second pass.
    expect(stderrLines.length).toBeGreaterThan(10);
    expect(stderrLines.length).toBeLessThan(200);
    expect(stderrLines[0]).toContain('"route":"/flood/mcp"');
    expect(stderrLines[0]).toMatch(/"session":"[0-9a-f-]{36}"/);
    expect(stderrLines.some((l) => l.includes('"dropped_lines"'))).toBe(true);
  });

  it('stdout that is not JSON-RPC is logged, never forwarded', async () => {
    const res = await post('/probe/mcp', INITIALIZE);
    expect(await res.text()).not.toContain('not JSON');
    await waitFor(() => stage.gw.logs.some((l) => l.includes('"stream":"stdout"') && l.includes('fixture server starting (not JSON)')), 5_000, 'the banner in the log');
  });

  it('a message over max_body_bytes on stdout: the process is stopped and the client gets an error, not the message', async () => {
    const sessionId = (await post('/huge/mcp', INITIALIZE)).headers.get('mcp-session-id')!;
    const res = await post('/huge/mcp', { jsonrpc: '2.0', id: 2, method: 'tools/list' }, { 'mcp-session-id': sessionId });
    expect(res.status).toBe(502);
    expect(await res.text()).not.toContain('xxxx');
    await waitFor(async () => (await processes('/huge/mcp')) === 0, 5_000, 'the process to stop');
  });

  const initialize = async (path: string, sub: string) => (await post(path, INITIALIZE, {}, sub)).headers.get('mcp-session-id')!;

  it('max_processes with every process busy: the next session is refused with 503, Retry-After and a JSON body; once one ends, a new one starts', async () => {
    const a = await initialize('/two/mcp', 'alice');
    const b = await initialize('/two/mcp', 'bob');
    const calls = [hold('/two/mcp', a), hold('/two/mcp', b, 'bob')];
    await reached(...calls);
    const third = await post('/two/mcp', INITIALIZE, {}, 'carol');
    expect(third.status).toBe(503);
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await third.json()).toMatchObject({ error: 'temporarily_unavailable' });
    expect(stage.gw.logs.some((l) => l.includes('max_processes reached and none of this caller idle'))).toBe(true);
    const ended = await fetch(stage.url('/two/mcp'), { method: 'DELETE', headers: { authorization: `Bearer ${await stage.token('/two/mcp')}`, 'mcp-session-id': a } });
    expect(ended.status).toBe(200);
    await waitFor(async () => (await processes('/two/mcp')) === 1, 5_000, 'one process to remain');
    const carol = await initialize('/two/mcp', 'carol');
    expect(carol).toBeTruthy();
    await calls[1]!.release();
    expect(await Promise.all(calls.map((c) => c.status))).toEqual([502, 200]);
    await fetch(stage.url('/two/mcp'), { method: 'DELETE', headers: { authorization: `Bearer ${await stage.token('/two/mcp', 'carol')}`, 'mcp-session-id': carol } });
    await fetch(stage.url('/two/mcp'), { method: 'DELETE', headers: { authorization: `Bearer ${await stage.token('/two/mcp', 'bob')}`, 'mcp-session-id': b } });
  });

  it("max_processes with an idle process: the route makes room by stopping the caller's own least recently used idle one (404 after), not a busy one", async () => {
    await waitFor(async () => (await processes('/two/mcp')) === 0, 5_000, 'the route to be empty');
    const idle = await initialize('/two/mcp', 'alice');
    const busy = await initialize('/two/mcp', 'bob');
    const call = hold('/two/mcp', busy, 'bob');
    await reached(call);
    const pid = await pidOf('/two/mcp', idle).catch(() => 0);
    expect(pid).toBeGreaterThan(0);
    const again = await post('/two/mcp', INITIALIZE, {}, 'alice');
    expect(again.status).toBe(200);
    await waitFor(() => !isAlive(pid), 5_000, "alice's idle process to stop");
    expect((await post('/two/mcp', { jsonrpc: '2.0', id: 3, method: 'tools/list' }, { 'mcp-session-id': idle })).status).toBe(404);
    await call.release();
    expect(await call.status).toBe(200);
    expect(await exits('/two/mcp', 'evicted')).toBeGreaterThanOrEqual(1);
    await fetch(stage.url('/two/mcp'), { method: 'DELETE', headers: { authorization: `Bearer ${await stage.token('/two/mcp')}`, 'mcp-session-id': again.headers.get('mcp-session-id')! } });
  });

  it('max_processes_per_principal: alice at her cap gets her least recently used idle session ended (404, its process stopped), bob still gets a process', async () => {
    const first = await initialize('/capped/mcp', 'alice');
    const firstPid = await pidOf('/capped/mcp', first);
    const second = await initialize('/capped/mcp', 'alice');
    await pidOf('/capped/mcp', second);
    const third = await post('/capped/mcp', INITIALIZE, {}, 'alice');
    expect(third.status).toBe(200);
    await waitFor(() => !isAlive(firstPid), 5_000, "alice's oldest process to stop");
    expect((await post('/capped/mcp', { jsonrpc: '2.0', id: 3, method: 'tools/list' }, { 'mcp-session-id': first })).status).toBe(404);
    expect(await pidOf('/capped/mcp', second)).toBeGreaterThan(0);
    // alice holds 2 of 3: bob's session starts without touching hers.
    const bob = await initialize('/capped/mcp', 'bob');
    expect(await pidOf('/capped/mcp', bob, 'bob')).toBeGreaterThan(0);
    expect(await pidOf('/capped/mcp', second)).toBeGreaterThan(0);
    expect(await exits('/capped/mcp', 'evicted')).toBe(1);
    expect(await processes('/capped/mcp')).toBe(3);
  });

  it('max_processes_per_principal with all her sessions busy: alice gets 503 with Retry-After; bob still gets a process', async () => {
    const sessions = [await initialize('/busy/mcp', 'alice'), await initialize('/busy/mcp', 'alice')];
    const calls = sessions.map((id) => hold('/busy/mcp', id));
    await reached(...calls);
    const refused = await post('/busy/mcp', INITIALIZE, {}, 'alice');
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await refused.json()).toMatchObject({ error: 'temporarily_unavailable' });
    expect(stage.gw.logs.some((l) => l.includes('max_processes_per_principal reached and every session busy'))).toBe(true);
    expect((await post('/busy/mcp', INITIALIZE, {}, 'bob')).status).toBe(200);
    await Promise.all(calls.map((c) => c.release()));
    expect(await Promise.all(calls.map((c) => c.status))).toEqual([200, 200]);
    expect(await exits('/busy/mcp', 'evicted')).toBe(0);
  });

  it('idle processes are stopped after idle_timeout; their session is then unknown', async () => {
    const sessionId = (await post('/idle/mcp', INITIALIZE)).headers.get('mcp-session-id')!;
    const pid = await pidOf('/idle/mcp', sessionId);
    await waitFor(() => !isAlive(pid), 5_000, 'the idle process to stop');
    expect(await exits('/idle/mcp', 'idle')).toBeGreaterThanOrEqual(1);
    expect((await post('/idle/mcp', { jsonrpc: '2.0', id: 3, method: 'tools/list' }, { 'mcp-session-id': sessionId })).status).toBe(404);
  });

  it('a client that goes away mid-call: the server is told (notifications/cancelled) and the session goes on', async () => {
    const sessionId = (await post('/probe/mcp', INITIALIZE)).headers.get('mcp-session-id')!;
    const abort = new AbortController();
    const call = hold('/probe/mcp', sessionId, 'alice', abort.signal);
    await reached(call);
    abort.abort();
    await expect(call.status).rejects.toThrow();
    await call.release();
    await waitFor(() => stage.gw.logs.some((l) => l.includes(sessionId) && l.includes('cancelled request')), 5_000, 'the cancellation at the server');
    expect(await pidOf('/probe/mcp', sessionId)).toBeGreaterThan(0);
  });
});
