/**
 * Stdio processes on a cgroup v1 host (a hybrid or legacy host: pids, memory, cpu and freezer
 * each their own hierarchy, the unified one offering no controller), DESIGN.md §8.3, SECURITY-CASES
 * K63 and K64: each process gets a cell in every v1 hierarchy, under the gateway's own cgroup there
 * (src/proxy/stdio/cgroup-v1.ts). Real processes, as root without `user`, so no rlimit can stand in
 * for what is asserted: forks past pids.max are refused, memory past memory.limit_in_bytes is
 * OOM-killed and ends the session like any exit, a CPU hog is throttled to cpu.cfs_quota_us, a
 * double-forked setsid daemon dies with its session, a child that vandalises its cells cannot make
 * cleanup throw, and no cgroup directory is left once the gateway stops. Skipped where the gateway
 * makes no v1 cells (cgroup v2 hosts are k-stdio-resources.test.ts's and k-stdio-children.test.ts's).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ownV1Dirs } from '../../src/proxy/stdio/cgroup-paths.js';
import { cgroupVersion } from '../../src/proxy/stdio/containment.js';
import { startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';

const HOG = join(import.meta.dirname, 'fixtures', 'resource-hog-server.mjs');
const HOSTILE = join(import.meta.dirname, 'fixtures', 'hostile-stdio-server.mjs');
const VANDAL = join(import.meta.dirname, 'fixtures', 'cgroup-v1-vandal.mjs');
const root = process.geteuid?.() === 0;
const v1 = cgroupVersion() === 'v1' && root;
const PROCESSES = 64;
const MEMORY_MIB = 128;
const CPUS = 0.5;
/** The hog's: 2 ms per 100 ms period, which any hog that runs at all on a loaded machine reaches within a period. */
const HOG_CPUS = 0.02;

const stdio = (args: string[], resources: Record<string, unknown> = {}) => ({
  upstream: { stdio: { command: process.execPath, args, resources } },
  limits: { upstream_timeout: '20s' },
});
const ROUTES = {
  '/v1/mcp': stdio([HOG], { processes: PROCESSES, memory_mib: MEMORY_MIB, cpus: CPUS }),
  '/oom/mcp': stdio([HOG], { memory_mib: MEMORY_MIB }),
  '/cpu/mcp': stdio([HOG], { cpus: HOG_CPUS }),
  '/daemon/mcp': stdio([HOSTILE]),
  '/vandal/mcp': stdio([VANDAL]),
  '/ok/mcp': stdio([HOG]),
  '/nobody/mcp': { upstream: { stdio: { command: process.execPath, args: [HOG], user: { uid: 'nobody' } } } },
};

/** The gateway's (this process's) own cgroup in each v1 hierarchy it makes cells in. */
const own = v1 ? ownV1Dirs(['freezer', 'pids', 'memory', 'cpu']) : new Map<string, string>();
/** The gateway's bases of cells: `mag-<its pid>-*` in each hierarchy. */
const bases = () => [...own.values()].flatMap((dir) => readdirSync(dir).filter((name) => name.startsWith(`mag-${process.pid}-`)).map((name) => join(dir, name)));

let stage: StdioStage | undefined;
const escaped: number[] = [];
beforeAll(async () => {
  if (v1) stage = await startStdioStage(ROUTES);
}, 60_000);
afterAll(async () => {
  for (const pid of escaped) if (running(pid)) process.kill(pid, 'SIGKILL');
  await stage?.close();
});

/** Alive and not a zombie waiting for its reaper. */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
let callId = 10;

async function post(path: string, body: unknown, sessionId?: string, sub = 'alice'): Promise<Response> {
  return fetch(stage!.url(path), {
    method: 'POST',
    headers: { authorization: `Bearer ${await stage!.token(path, sub)}`, 'content-type': 'application/json', accept: 'application/json', ...(sessionId && { 'mcp-session-id': sessionId }) },
    body: JSON.stringify(body),
  });
}

async function open(path: string, sub = 'alice'): Promise<string> {
  const res = await post(path, INITIALIZE, undefined, sub);
  expect(res.status).toBe(200);
  return res.headers.get('mcp-session-id')!;
}

async function call<T = unknown>(path: string, id: string, name: string, args: Record<string, unknown> = {}, sub = 'alice'): Promise<{ status: number; body: string; value?: T }> {
  const res = await post(path, { jsonrpc: '2.0', id: callId++, method: 'tools/call', params: { name, arguments: args } }, id, sub);
  const body = await res.text();
  try {
    const text = (JSON.parse(body) as { result?: { content?: { text: string }[] } }).result?.content?.[0]?.text;
    return { status: res.status, body, ...(text !== undefined && { value: JSON.parse(text) as T }) };
  } catch {
    return { status: res.status, body };
  }
}

async function del(path: string, id: string, sub = 'alice'): Promise<number> {
  return (await fetch(stage!.url(path), { method: 'DELETE', headers: { authorization: `Bearer ${await stage!.token(path, sub)}`, 'mcp-session-id': id } })).status;
}

/** Bob on his own session, and /healthz: served whatever alice's child did. */
async function othersServed(): Promise<void> {
  const id = await open('/ok/mcp', 'bob');
  expect((await call('/ok/mcp', id, 'ping', {}, 'bob')).value).toBe('pong');
  expect((await fetch(stage!.url('/healthz'))).status).toBe(200);
  expect(await del('/ok/mcp', id, 'bob')).toBe(200);
}

const cleanupFailures = async () => (await stage!.gw.metrics.stdioCleanupFailures.get()).values.reduce((sum, v) => sum + v.value, 0);
/** The gateway's log lines about one session, parsed. */
const logsOf = (session: string) => stage!.gw.logs.flatMap((line) => (line.includes(session) ? [JSON.parse(line) as Record<string, unknown>] : []));

interface Limits {
  v1: Record<string, string>;
  v1Dirs: Record<string, string>;
}

describe.skipIf(!v1)(`[K63] on cgroup v1, a stdio process's cells bound its processes, memory and CPU${v1 ? '' : ' (skipped here: the gateway makes no cgroup v1 cells, or is not root)'}`, () => {
  it("its cell is in every v1 hierarchy, under the gateway's own cgroup there, with the route's bounds", async () => {
    const id = await open('/v1/mcp');
    const { value } = await call<Limits>('/v1/mcp', id, 'limits');
    for (const controller of ['freezer', 'pids', 'memory', 'cpu']) expect(value!.v1Dirs[controller]!.startsWith(`${own.get(controller)}/mag-${process.pid}-`)).toBe(true);
    expect(value!.v1['pids.max']).toBe(String(PROCESSES));
    expect(value!.v1['memory.limit_in_bytes']).toBe(String(MEMORY_MIB * 1024 * 1024));
    // Swap cannot hold what memory.limit_in_bytes refuses (where swap is accounted at all).
    expect(value!.v1['memory.memsw.limit_in_bytes']).toMatch(new RegExp(`^(${MEMORY_MIB * 1024 * 1024}|absent)$`));
    expect([value!.v1['cpu.cfs_quota_us'], value!.v1['cpu.cfs_period_us']]).toEqual([String(CPUS * 100_000), '100000']);
    expect(value!.v1['freezer.state']).toBe('THAWED');
    expect(await del('/v1/mcp', id)).toBe(200);
    await waitFor(() => Object.values(value!.v1Dirs).every((dir) => !existsSync(dir)), 10_000, 'its cells to be removed');
  }, 30_000);

  it('forking past pids.max: the forks are refused (root without user: no RLIMIT_NPROC could), its session and others go on', async () => {
    const id = await open('/v1/mcp');
    const count = PROCESSES * 2;
    const { value } = await call<{ started: number; refused: number }>('/v1/mcp', id, 'fork', { count });
    expect(value!.started + value!.refused).toBe(count);
    expect(value!.started).toBeLessThan(PROCESSES);
    expect(value!.refused).toBeGreaterThan(count - PROCESSES);
    expect((await call('/v1/mcp', id, 'ping')).value).toBe('pong');
    expect(await del('/v1/mcp', id)).toBe(200);
    await othersServed();
  }, 30_000);

  it('holding more than memory.limit_in_bytes: the OOM killer ends it (SIGKILL, not the gateway), the call gets an error, the session is then unknown (404), others are served', async () => {
    const id = await open('/oom/mcp');
    const answer = await call('/oom/mcp', id, 'alloc', { mib: MEMORY_MIB * 4 });
    expect(answer.value).toBeUndefined();
    expect(answer.body).toMatch(/error/i);
    await waitFor(() => logsOf(id).some((l) => l.msg === 'stdio server process ended'), 10_000, 'its end to be logged');
    // Killed by the kernel (RLIMIT_DATA would have let node throw and exit by itself), and no stop of the gateway's.
    expect(logsOf(id).find((l) => l.msg === 'stdio server process ended')).toMatchObject({ signal: 'SIGKILL', reason: 'exited' });
    expect((await post('/oom/mcp', { jsonrpc: '2.0', id: 3, method: 'tools/list' }, id)).status).toBe(404);
    await othersServed();
    // Under the bound a new session is served.
    const next = await open('/oom/mcp');
    expect((await call('/oom/mcp', next, 'alloc', { mib: MEMORY_MIB / 4 })).value).toEqual({ heldMiB: MEMORY_MIB / 4 });
    expect(await del('/oom/mcp', next)).toBe(200);
  }, 30_000);

  it('a CPU hog is throttled to cpu.cfs_quota_us: throttled periods, and CPU time over wall time far under what it would take', async () => {
    const id = await open('/cpu/mcp');
    const { value } = await call<{ cpuMs: number; wallMs: number; throttled: number }>('/cpu/mcp', id, 'spin', { ms: 2_000 });
    // Load on the machine can only lower the share it gets: the bound (with the kernel's slack, 5×) is an upper limit that holds under any load.
    expect(value!.throttled).toBeGreaterThan(0);
    expect(value!.cpuMs / value!.wallMs).toBeLessThan(HOG_CPUS * 5);
    expect(await del('/cpu/mcp', id)).toBe(200);
  }, 30_000);
});

describe.skipIf(!v1)(`[K64] on cgroup v1, nothing a stdio process starts outlives its session${v1 ? '' : ' (skipped here: the gateway makes no cgroup v1 cells, or is not root)'}`, () => {
  it("the start's log: every bound held by the cells (no resources warning); only the routes run as the gateway's own user (root) named as able to leave their cell", () => {
    const warnings = stage!.gw.logs.map((line) => String((JSON.parse(line) as { msg?: string }).msg)).filter((msg) => msg.includes(': upstream.stdio'));
    expect(warnings.filter((w) => w.includes('upstream.stdio.resources'))).toEqual([]);
    const uncontained = warnings.filter((w) => w.includes('can outlive their session'));
    expect(uncontained.map((w) => w.slice(0, w.indexOf(':'))).sort()).toEqual(Object.keys(ROUTES).filter((path) => path !== '/nobody/mcp').sort());
    for (const w of uncontained) expect(w).toMatch(/gateway's own user, who may move a process out of its cgroup/);
  });

  it('a double-forked setsid daemon is in its freezer cell, and DELETE ends it', async () => {
    const id = await open('/daemon/mcp');
    const { value } = await call<{ daemon: number }>('/daemon/mcp', id, 'daemon');
    const daemon = value!.daemon;
    escaped.push(daemon);
    expect(running(daemon)).toBe(true);
    expect(readFileSync(`/proc/${daemon}/cgroup`, 'utf8')).toMatch(new RegExp(`:freezer:.*/mag-${process.pid}-[0-9a-f]+/s-[0-9a-f]+$`, 'm'));
    expect(await del('/daemon/mcp', id)).toBe(200);
    await waitFor(() => !running(daemon), 10_000, 'the daemon to be gone');
    await othersServed();
  }, 30_000);

  /** Alice's vandal does `tool` to its cells, then DELETE: the gateway stays up, serves bob, never fails in cleanup; what it reports. */
  async function vandalise(tool: string): Promise<{ pid: number; daemon?: number; cells: string[]; left: string[] }> {
    const id = await open('/vandal/mcp');
    const { value } = await call<{ pid: number; daemon?: number; cells: string[]; left: string[] }>('/vandal/mcp', id, tool);
    if (value!.daemon !== undefined) escaped.push(value!.daemon);
    expect(value!.cells).toHaveLength(4);
    expect(await del('/vandal/mcp', id)).toBe(200);
    await waitFor(() => !running(value!.pid), 10_000, 'the vandal to be gone');
    await othersServed();
    expect(stage!.gw.logs.filter((l) => /exit handling failed|could not be handled/.test(l))).toEqual([]);
    return value!;
  }

  it('one that nests sub-cgroups, moves its daemon into the deepest and freezes them itself: the daemon dies, every cell and sub-cgroup goes, nothing failed', async () => {
    const { daemon, cells } = await vandalise('nest');
    await waitFor(() => !running(daemon!), 10_000, 'the nested frozen daemon to be gone');
    await waitFor(() => cells.every((dir) => !existsSync(dir)), 15_000, 'its cells to be removed');
    expect(await cleanupFailures()).toBe(0);
  }, 60_000);

  it('one that fills its cells with 300 sub-cgroups each, writes garbage into their files and raises its own bounds: every cell goes, nothing failed', async () => {
    const { cells } = await vandalise('fill');
    await waitFor(() => cells.every((dir) => !existsSync(dir)), 20_000, 'its cells to be removed');
    expect(await cleanupFailures()).toBe(0);
  }, 60_000);

  it('one whose daemon leaves its freezer cell only: it is found in its other cells and killed all the same', async () => {
    const { daemon, cells } = await vandalise('leave');
    await waitFor(() => !running(daemon!), 10_000, 'the daemon that left the freezer cell to be gone');
    await waitFor(() => cells.every((dir) => !existsSync(dir)), 15_000, 'its cells to be removed');
    expect(await cleanupFailures()).toBe(0);
  }, 60_000);

  it("one that leaves every cell and removes them (root may: the documented same-uid caveat): the gateway finds them gone and goes on, the cleanup never throws", async () => {
    const before = await cleanupFailures();
    const { cells, left } = await vandalise('remove');
    expect(left).toEqual([]);
    expect(cells.every((dir) => !existsSync(dir))).toBe(true);
    // A removed cell is not a failure (ENOENT is what removal wanted).
    expect(await cleanupFailures()).toBe(before);
    // Cells are made again after a process removed the base itself.
    const id = await open('/v1/mcp');
    const { value } = await call<Limits>('/v1/mcp', id, 'limits');
    expect(value!.v1['pids.max']).toBe(String(PROCESSES));
    expect(await del('/v1/mcp', id)).toBe(200);
  }, 60_000);

  it('once the gateway has stopped (sessions open, a daemon running), no cgroup directory of it is left in any hierarchy', async () => {
    const sessions = [await open('/daemon/mcp'), await open('/v1/mcp'), await open('/vandal/mcp')];
    const { value } = await call<{ daemon: number }>('/daemon/mcp', sessions[0]!, 'daemon');
    escaped.push(value!.daemon);
    await call('/vandal/mcp', sessions[2]!, 'nest');
    expect(bases().length).toBe(own.size);
    const stopping = stage!;
    stage = undefined;
    await stopping.close();
    await waitFor(() => bases().length === 0, 15_000, "the gateway's cgroups to be removed");
    expect(running(value!.daemon)).toBe(false);
  }, 60_000);
});
