/**
 * Hostile stdio children (DESIGN.md §8.3; SECURITY-CASES K63, K64): a server that leaves
 * hostile trees in its ${PROCESS_DIR} (past PATH_MAX, 255-byte names, 5,000 files, symlink
 * loops, FIFOs, unreadable directories), floods, stops reading, answers huge, slow, malformed,
 * twice or for ids never asked, and double-forks a setsid daemon
 * (test/security/fixtures/hostile-stdio-server.mjs); and the unmodified server-filesystem under
 * bubblewrap as uid 65534 with the reported reproduction. Through every way a session ends
 * (DELETE, idle timeout, eviction, reload, shutdown) the gateway stays up, another principal's
 * calls keep getting 200, the directory goes and nothing the session started outlives it.
 */
import { readFileSync, existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config/load.js';
import { cgroupsUsable } from '../../src/proxy/stdio/containment.js';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { descendantsOf } from '../helpers/process-tree.js';
import { FIXTURE_SERVER, serverBin, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';

const HOSTILE = join(import.meta.dirname, 'fixtures', 'hostile-stdio-server.mjs');
const root = process.geteuid?.() === 0;
/** Whether this host lets the gateway (in this process) make a cgroup; where not, check warns instead (k-stdio-gateway.test.ts). */
const cgroups = cgroupsUsable();
const READABLE = [dirname(HOSTILE), dirname(process.execPath)];
const fsScript = serverBin('@modelcontextprotocol/server-filesystem');
const nodeModules = fsScript.slice(0, fsScript.lastIndexOf('/node_modules/') + '/node_modules'.length);

const hostile = (more: Record<string, unknown> = {}, limits: Record<string, unknown> = {}) => ({
  upstream: { stdio: { command: process.execPath, args: [HOSTILE], ...more } },
  limits: { upstream_timeout: '10s', max_body_bytes: 1_048_576, ...limits },
});

const ROUTES = {
  '/hostile/mcp': hostile(),
  '/idle/mcp': hostile({ idle_timeout: '1s' }),
  '/capped/mcp': hostile({ max_processes_per_principal: 1 }),
  '/sandboxed/mcp': hostile({ sandbox: { kind: 'bubblewrap', readable: READABLE } }),
  ...(root && { '/nobody/mcp': hostile({ user: { uid: 'nobody' } }) }),
  '/fs/mcp': {
    upstream: {
      stdio: {
        command: process.execPath,
        args: [fsScript, '${PROCESS_DIR}'],
        idle_timeout: '2s',
        sandbox: { kind: 'bubblewrap', readable: [nodeModules, dirname(process.execPath)] },
        ...(root && { user: { uid: 65534, gid: 65534 } }),
      },
    },
  },
  '/probe/mcp': { upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER, 'probe'] } } },
};

let stage: StdioStage;
beforeAll(async () => {
  stage = await startStdioStage(ROUTES);
}, 60_000);
afterAll(async () => {
  await stage?.close();
});

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

async function post(s: StdioStage, path: string, body: unknown, sessionId?: string, sub = 'alice'): Promise<Response> {
  return fetch(s.url(path), {
    method: 'POST',
    headers: { authorization: `Bearer ${await s.token(path, sub)}`, 'content-type': 'application/json', accept: 'application/json', ...(sessionId && { 'mcp-session-id': sessionId }) },
    body: JSON.stringify(body),
  });
}

async function open(s: StdioStage, path: string, sub = 'alice'): Promise<string> {
  const res = await post(s, path, INITIALIZE, undefined, sub);
  expect(res.status).toBe(200);
  return res.headers.get('mcp-session-id')!;
}

let callId = 10;
async function call(s: StdioStage, path: string, sessionId: string, name: string, args: Record<string, unknown> = {}, sub = 'alice'): Promise<{ status: number; text: string }> {
  const res = await post(s, path, { jsonrpc: '2.0', id: callId++, method: 'tools/call', params: { name, arguments: args } }, sessionId, sub);
  const body = await res.text();
  let text = body;
  try {
    text = (JSON.parse(body) as { result?: { content?: { text: string }[] } }).result?.content?.[0]?.text ?? body;
  } catch {
    // Not JSON: kept as it came.
  }
  return { status: res.status, text };
}

const report = async (s: StdioStage, path: string, id: string) => JSON.parse((await call(s, path, id, 'report')).text) as { pid: number; cwd: string };

async function del(s: StdioStage, path: string, sessionId: string, sub = 'alice'): Promise<number> {
  const res = await fetch(s.url(path), { method: 'DELETE', headers: { authorization: `Bearer ${await s.token(path, sub)}`, 'mcp-session-id': sessionId } });
  return res.status;
}

/** Bob's own session on another route: every call must keep getting 200 whatever alice's child does. */
async function bobServed(s: StdioStage = stage): Promise<void> {
  const id = await open(s, '/probe/mcp', 'bob');
  expect((await call(s, '/probe/mcp', id, 'report', {}, 'bob')).status).toBe(200);
  expect((await fetch(s.url('/healthz'))).status).toBe(200);
  expect(await del(s, '/probe/mcp', id, 'bob')).toBe(200);
}

/** Alive and not a zombie waiting for its reaper. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

const cleanupFailures = async (s: StdioStage) => (await s.gw.metrics.stdioCleanupFailures.get()).values.reduce((sum, v) => sum + v.value, 0);

describe('[K63] whatever a stdio child leaves in its directory, the gateway stays up and serves everyone', () => {
  it.each(['deep', 'long', 'wide', 'special', 'all'])('a %s tree, then DELETE: 200, the directory goes, bob is served, nothing failed', async (kind) => {
    const id = await open(stage, '/hostile/mcp');
    const { cwd } = await report(stage, '/hostile/mcp', id);
    expect((await call(stage, '/hostile/mcp', id, 'tree', { kind })).status).toBe(200);
    // Bob's calls while alice's tree is there, and while it is being removed.
    const during = bobServed();
    expect(await del(stage, '/hostile/mcp', id)).toBe(200);
    await during;
    await waitFor(() => !existsSync(cwd), 20_000, `the ${kind} tree to be removed`);
    await bobServed();
    expect(await cleanupFailures(stage)).toBe(0);
  }, 60_000);

  it('every other way a session ends: the idle sweep and eviction take the tree, the gateway stays up', async () => {
    const idle = await open(stage, '/idle/mcp');
    const idleDir = (await report(stage, '/idle/mcp', idle)).cwd;
    expect((await call(stage, '/idle/mcp', idle, 'tree', { kind: 'all' })).status).toBe(200);
    const capped = await open(stage, '/capped/mcp');
    const cappedDir = (await report(stage, '/capped/mcp', capped)).cwd;
    expect((await call(stage, '/capped/mcp', capped, 'tree', { kind: 'all' })).status).toBe(200);
    // At her cap of 1: her own idle session makes room for her new one.
    await open(stage, '/capped/mcp');
    await waitFor(() => !existsSync(idleDir) && !existsSync(cappedDir), 20_000, 'both trees to be removed');
    await bobServed();
    expect(await cleanupFailures(stage)).toBe(0);
  }, 60_000);

  it('a reload that drops the route, and shutdown: the trees go with their processes', async () => {
    const own = await startStdioStage({ '/dropped/mcp': hostile(), '/kept/mcp': hostile(), '/probe/mcp': ROUTES['/probe/mcp'] });
    try {
      const dropped = await open(own, '/dropped/mcp');
      const droppedDir = (await report(own, '/dropped/mcp', dropped)).cwd;
      await call(own, '/dropped/mcp', dropped, 'tree', { kind: 'all' });
      const kept = await open(own, '/kept/mcp');
      const keptDir = (await report(own, '/kept/mcp', kept)).cwd;
      await call(own, '/kept/mcp', kept, 'tree', { kind: 'all' });
      await own.gw.writeConfig({ 'gateway.yaml': gatewayYaml({ log_level: 'info', shutdown_grace: '500ms' }) });
      await rm(join(own.gw.dir, 'route-0.yaml'));
      await own.gw.reload(await loadConfig(own.gw.dir, {}));
      await waitFor(() => !existsSync(droppedDir), 20_000, "the dropped route's tree to be removed");
      await bobServed(own);
      expect(existsSync(keptDir)).toBe(true);
      await own.close();
      // The drain waits for its processes' cleanup.
      expect(existsSync(keptDir)).toBe(false);
    } finally {
      await own.close().catch(() => undefined);
    }
  }, 90_000);

  it('the reported reproduction: server-filesystem in bubblewrap as uid 65534, a 3.6 KB chain, a 1.6 KB chain moved into it, DELETE; then the same left to the idle sweep', async () => {
    for (const end of ['delete', 'idle'] as const) {
      const id = await open(stage, '/fs/mcp');
      const allowed = (await call(stage, '/fs/mcp', id, 'list_allowed_directories')).text.split('\n').find((l) => l.includes('mag-stdio-'))!.trim();
      const seg = 'x'.repeat(200);
      const first = join(allowed, Array.from({ length: 18 }, () => seg).join('/'));
      const second = join(allowed, 'b', Array.from({ length: 8 }, () => seg).join('/'));
      expect((await call(stage, '/fs/mcp', id, 'create_directory', { path: first })).status).toBe(200);
      expect((await call(stage, '/fs/mcp', id, 'create_directory', { path: second })).status).toBe(200);
      expect((await call(stage, '/fs/mcp', id, 'move_file', { source: join(allowed, 'b'), destination: join(first, 'b') })).status).toBe(200);
      expect(existsSync(allowed)).toBe(true);
      if (end === 'delete') expect(await del(stage, '/fs/mcp', id)).toBe(200);
      await waitFor(() => !existsSync(allowed), 20_000, `the directory to go (${end})`);
      await bobServed();
    }
    expect(await cleanupFailures(stage)).toBe(0);
  }, 90_000);
});

describe('[K63] a hostile child that floods, stops reading or answers badly never stops the gateway', () => {
  it.each([
    ['floods stdout with garbage, answers and notifications for ids never asked', 'flood', { stream: 'stdout', mb: 8 }],
    ['floods stderr', 'flood', { stream: 'stderr', mb: 8 }],
    ['answers 4 MB on one line', 'huge', {}],
    ['trickles its answer a byte at a time', 'slow', {}],
    ['writes half a JSON line and a line that is not JSON', 'malformed', {}],
    ['answers twice, and answers 100 ids it never got', 'duplicate', {}],
  ])('one that %s: alice gets one answer or a JSON error, bob keeps getting 200', async (_what, tool, args) => {
    const id = await open(stage, '/hostile/mcp');
    const [answer] = await Promise.all([call(stage, '/hostile/mcp', id, tool, args), bobServed()]);
    expect([200, 502, 504]).toContain(answer.status);
    if (answer.status !== 200) expect(JSON.parse(answer.text)).toHaveProperty('error');
    // Nothing of what it sent for ids never asked reached anyone: the session answers its next call as its own.
    const next = await call(stage, '/hostile/mcp', id, 'report');
    if (next.status === 200) expect(JSON.parse(next.text)).toHaveProperty('pid');
    await bobServed();
    await del(stage, '/hostile/mcp', id);
  }, 60_000);

  it('one that stops reading its stdin: it is stopped once it leaves more than its share unread, not buffered for', async () => {
    const id = await open(stage, '/hostile/mcp');
    const { pid } = await report(stage, '/hostile/mcp', id);
    expect((await call(stage, '/hostile/mcp', id, 'deaf')).status).toBe(200);
    const big = { jsonrpc: '2.0', method: 'notifications/message', params: { data: 'y'.repeat(900_000) } };
    const stopping = () => stage.gw.logs.some((l) => l.includes('does not read its stdin'));
    // Notifications get 202 at once: the gateway holds them for the process, up to its bound.
    for (let i = 0; i < 8 && !stopping(); i++) await post(stage, '/hostile/mcp', big, id);
    expect(stopping()).toBe(true);
    // The session ended when the gateway decided to stop the process, not when its exit is seen: the
    // next request is 404 (the client starts a new session) whether or not the process is gone yet.
    const listTools = { jsonrpc: '2.0', id: 5, method: 'tools/list' };
    expect((await post(stage, '/hostile/mcp', listTools, id)).status).toBe(404);
    await waitFor(() => !running(pid), 10_000, 'the deaf process to be stopped');
    expect((await post(stage, '/hostile/mcp', listTools, id)).status).toBe(404);
    await bobServed();
  }, 60_000);
});

describe('[K64] no process outlives its session, descendants included (double fork + setsid)', () => {
  const daemonOf = async (path: string, id: string) => JSON.parse((await call(stage, path, id, 'daemon')).text) as { pid: number; daemon: number };

  it.skipIf(!cgroups).each(['/hostile/mcp', ...(root ? ['/nobody/mcp'] : [])])('%s (no sandbox: a cgroup of its own): DELETE ends the daemon it left behind', async (path) => {
    const id = await open(stage, path);
    const { daemon } = await daemonOf(path, id);
    expect(running(daemon)).toBe(true);
    // It left the process group: only its containment can reach it.
    expect(readFileSync(`/proc/${daemon}/stat`, 'utf8')).toBeTruthy();
    expect(await del(stage, path, id)).toBe(200);
    await waitFor(() => !running(daemon), 10_000, 'the daemon to be gone');
    await bobServed();
  }, 30_000);

  it.skipIf(!cgroups)('the idle sweep and eviction end the daemons too', async () => {
    const idle = await open(stage, '/idle/mcp');
    const a = (await daemonOf('/idle/mcp', idle)).daemon;
    const capped = await open(stage, '/capped/mcp');
    const b = (await daemonOf('/capped/mcp', capped)).daemon;
    await open(stage, '/capped/mcp');
    await waitFor(() => !running(a) && !running(b), 15_000, 'both daemons to be gone');
  }, 30_000);

  it('sandboxed (bubblewrap, its own PID namespace): DELETE ends every process of the sandbox, the daemon included', async () => {
    const before = new Set(descendantsOf(process.pid));
    const id = await open(stage, '/sandboxed/mcp');
    await daemonOf('/sandboxed/mcp', id);
    const tree = descendantsOf(process.pid).filter((pid) => !before.has(pid));
    // bwrap, its init, the server and the daemon (reparented to the sandbox's init).
    expect(tree.length).toBeGreaterThanOrEqual(4);
    expect(await del(stage, '/sandboxed/mcp', id)).toBe(200);
    await waitFor(() => tree.every((pid) => !running(pid)), 10_000, 'every process of the sandbox to be gone');
  }, 30_000);
});
