/**
 * A stdio child that reaches for the machine's processes or memory (DESIGN.md §8.3;
 * SECURITY-CASES K63; issue 26): its forks past `resources.processes` fail, its memory past
 * `resources.memory_mib` ends its own session, and through both the gateway, /healthz and
 * other principals keep being served. On a host that delegates cgroup v2 controllers the
 * bounds are the cell's (pids.max, memory.max, cpu.max); on a cgroup v1 host its v1 cells'
 * (asserted in k-stdio-cgroup-v1.test.ts); elsewhere rlimits stand in
 * (src/proxy/stdio/resource-limits.ts): which one held is asserted, never assumed.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cellResources, cgroupsUsable, cgroupVersion, unboundedResourceRoutes } from '../../src/proxy/stdio/containment.js';
import { DEFAULT_STDIO_RESOURCES } from '../../src/config/schema.js';
import type { StdioUpstreamConfig } from '../../src/config/types.js';
import { startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';

const HOG = join(import.meta.dirname, 'fixtures', 'resource-hog-server.mjs');
const root = process.geteuid?.() === 0;
// Threads count too (pids.max and RLIMIT_NPROC alike): a node server holds about a dozen.
const PROCESSES = 64;
const MEMORY_MIB = 128;

const hog = (resources: Record<string, unknown>, more: Record<string, unknown> = {}) => ({
  upstream: { stdio: { command: process.execPath, args: [HOG], resources, ...more } },
  limits: { upstream_timeout: '20s' },
});

// RLIMIT_NPROC binds no root process: where no cell bounds processes, the forking route runs as nobody.
const ROUTES = {
  '/forks/mcp': hog({ processes: PROCESSES }, root ? { user: { uid: 'nobody' } } : {}),
  '/hog/mcp': hog({ memory_mib: MEMORY_MIB }),
  '/ok/mcp': hog({}),
};

// What a cell bounds here, probed as the gateway (in this process) does, before the tests are collected.
const unsandboxed: StdioUpstreamConfig = { command: process.execPath, args: [], env: {}, inheritEnv: [], maxProcesses: 1, maxProcessesPerPrincipal: 1, idleTimeoutMs: 1000, resources: DEFAULT_STDIO_RESOURCES };
const inCell = cellResources(unsandboxed);
const allInCell = inCell.size === 3 && cgroupVersion() === 'v2';
const memoryInCell = inCell.has('memory');
const whyNoCell =
  cgroupVersion() === 'v1'
    ? 'the cells are on cgroup v1 here: k-stdio-cgroup-v1.test.ts'
    : cgroupsUsable()
      ? `the gateway's cgroup v2 delegates only [${[...inCell].join(', ')}] of processes, memory, cpu`
      : 'no cgroup cell can be made here';
let stage: StdioStage;
beforeAll(async () => {
  stage = await startStdioStage(ROUTES);
}, 60_000);
afterAll(async () => {
  await stage?.close();
});

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
let callId = 10;

async function post(path: string, body: unknown, sessionId?: string, sub = 'alice'): Promise<Response> {
  return fetch(stage.url(path), {
    method: 'POST',
    headers: { authorization: `Bearer ${await stage.token(path, sub)}`, 'content-type': 'application/json', accept: 'application/json', ...(sessionId && { 'mcp-session-id': sessionId }) },
    body: JSON.stringify(body),
  });
}

async function open(path: string, sub = 'alice'): Promise<string> {
  const res = await post(path, INITIALIZE, undefined, sub);
  expect(res.status).toBe(200);
  return res.headers.get('mcp-session-id')!;
}

async function call(path: string, id: string, name: string, args: Record<string, unknown> = {}, sub = 'alice'): Promise<{ status: number; body: string; value?: unknown }> {
  const res = await post(path, { jsonrpc: '2.0', id: callId++, method: 'tools/call', params: { name, arguments: args } }, id, sub);
  const body = await res.text();
  try {
    const text = (JSON.parse(body) as { result?: { content?: { text: string }[] } }).result?.content?.[0]?.text;
    return { status: res.status, body, ...(text !== undefined && { value: JSON.parse(text) as unknown }) };
  } catch {
    return { status: res.status, body };
  }
}

async function del(path: string, id: string, sub = 'alice'): Promise<void> {
  await fetch(stage.url(path), { method: 'DELETE', headers: { authorization: `Bearer ${await stage.token(path, sub)}`, 'mcp-session-id': id } });
}

/** Bob on his own session, and /healthz: served whatever alice's child did. */
async function othersServed(path = '/ok/mcp'): Promise<void> {
  const id = await open(path, 'bob');
  const answer = await call(path, id, 'ping', {}, 'bob');
  expect(answer.status).toBe(200);
  expect(answer.value).toBe('pong');
  expect((await fetch(stage.url('/healthz'))).status).toBe(200);
  await del(path, id, 'bob');
}

describe('[K63] a stdio child is bounded in processes and memory; past a bound only its own session suffers', () => {
  const limitsSeen = async () => {
    const id = await open('/hog/mcp');
    const { value } = await call('/hog/mcp', id, 'limits');
    await del('/hog/mcp', id);
    return value as { 'pids.max': string; 'memory.max': string; 'cpu.max': string; rlimits: string[] };
  };

  it.skipIf(!allInCell)(`in its cell: memory.max, pids.max and cpu.max as configured${allInCell ? '' : ` (skipped here: ${whyNoCell})`}`, async () => {
    const seen = await limitsSeen();
    expect(seen['memory.max']).toBe(String(MEMORY_MIB * 1024 * 1024));
    expect(seen['pids.max']).toBe('256');
    expect(seen['cpu.max']).toBe('100000 100000');
  });

  it.skipIf(memoryInCell)(`without a cell's memory controller: RLIMIT_DATA, soft and hard${memoryInCell ? ` (skipped here: the cell bounds memory, tested ${cgroupVersion() === 'v1' ? 'in k-stdio-cgroup-v1.test.ts' : 'above'})` : ''}`, async () => {
    const seen = await limitsSeen();
    const bytes = MEMORY_MIB * 1024 * 1024;
    expect(seen.rlimits.find((l) => l.startsWith('Max data size'))).toMatch(new RegExp(`\\s${bytes}\\s+${bytes}\\s`));
  });

  it.each([PROCESSES * 2, PROCESSES * 4])('forking %i sleepers: those past the bound are refused, then others are served', async (count) => {
    const id = await open('/forks/mcp');
    const answer = await call('/forks/mcp', id, 'fork', { count });
    expect(answer.status).toBe(200);
    const { started, refused } = answer.value as { started: number; refused: number };
    expect(started + refused).toBe(count);
    // The server itself (node, its threads under pids.max) takes part of the bound.
    expect(started).toBeLessThan(PROCESSES);
    expect(refused).toBeGreaterThan(count - PROCESSES);
    // Its own session lives on (it only lost its forks); bob is served on the same route.
    expect((await call('/forks/mcp', id, 'ping')).value).toBe('pong');
    // Under RLIMIT_NPROC (no cell) the bound is the uid's, all its sessions together: alice's goes first.
    await del('/forks/mcp', id);
    await othersServed('/forks/mcp');
  });

  it.each([MEMORY_MIB * 2, MEMORY_MIB * 8])('holding %i MiB ends its own session with an error, then others are served', async (mib) => {
    const id = await open('/hog/mcp');
    const bobId = await open('/hog/mcp', 'bob');
    const answer = await call('/hog/mcp', id, 'alloc', { mib });
    expect(answer.value).toBeUndefined();
    expect(answer.body).toMatch(/error/i);
    expect((await call('/hog/mcp', bobId, 'ping', {}, 'bob')).value).toBe('pong');
    await del('/hog/mcp', bobId, 'bob');
    await othersServed();
  });

  it('under its bound, memory is served', async () => {
    const id = await open('/hog/mcp');
    expect((await call('/hog/mcp', id, 'alloc', { mib: MEMORY_MIB / 4 })).value).toEqual({ heldMiB: MEMORY_MIB / 4 });
  });
});

describe('[K63] what no cgroup bounds here is said once, in check and the log', () => {
  it('a route whose bounds no cell holds is named with what stands in; one warning per route', () => {
    const routes = stage.gw.config.routes;
    const warnings = unboundedResourceRoutes(routes);
    const all = new Set(['processes', 'memory', 'cpu']);
    const bounded = routes.every((r) => [...all].every((x) => cellResources(r.stdio!).has(x as 'processes')));
    expect(warnings).toHaveLength(bounded ? 0 : routes.length);
    for (const w of warnings) expect(w).toMatch(/CPU not at all|RLIMIT/);
  });
});
