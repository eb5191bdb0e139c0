// upstream.stdio.resources (issue 26): defaults, values checked at load with their file:line, and
// what is written to a cell or set as rlimits for any bounds (fast-check), per host and user.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/config-error.js';
import { DEFAULT_STDIO_RESOURCES } from '../../src/config/schema.js';
import type { StdioResources, StdioUpstreamConfig } from '../../src/config/types.js';
import { cgroupLimitWrites, cgroupV1LimitWrites, resourceGaps, rlimitCommands, type Resource } from '../../src/proxy/stdio/resource-limits.js';

const GATEWAY = 'listen: { host: 127.0.0.1, port: 9000 }\npublic_url: http://127.0.0.1:9000\nauthorization_server:\n  enabled: true\n';
let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-config-resources-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(resources: string) {
  await writeFile(join(dir, 'gateway.yaml'), GATEWAY);
  await writeFile(join(dir, 'a.yaml'), `path: /a/mcp\nupstream:\n  stdio:\n    command: node\n${resources}`);
  return loadConfig(dir, {});
}

describe('upstream.stdio.resources at load', () => {
  it('defaults to 256 processes, 1 GiB, 1 CPU', async () => {
    expect((await load('')).routes[0]!.stdio!.resources).toEqual({ processes: 256, memoryBytes: 1024 ** 3, cpus: 1 });
  });

  it.each([
    ['    resources: { processes: 32, memory_mib: 200, cpus: 0.5 }\n', { processes: 32, memoryBytes: 200 * 1024 ** 2, cpus: 0.5 }],
    ['    resources: { memory_mib: 64 }\n', { processes: 256, memoryBytes: 64 * 1024 ** 2, cpus: 1 }],
  ])('%j loads as given, the rest defaults', async (yaml, want) => {
    expect((await load(yaml)).routes[0]!.stdio!.resources).toEqual(want);
  });

  it.each([
    ['    resources: { processes: 0 }\n', 'processes'],
    ['    resources: { processes: 100000 }\n', 'processes'],
    ['    resources: { memory_mib: 1 }\n', 'memory_mib'],
    ['    resources: { cpus: 0 }\n', 'cpus'],
    ['    resources: { memory: 1g }\n', 'memory'],
    ['    resources: { processes: 2.5 }\n', 'processes'],
  ])('%j is refused at its file:line, naming the key', async (yaml, key) => {
    const err = await load(yaml).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).message).toMatch(/a\.yaml:5/);
    expect((err as ConfigError).message).toContain(key);
  });
});

const config = (resources: StdioResources = DEFAULT_STDIO_RESOURCES, user?: { uid: number; gid: number }): StdioUpstreamConfig => ({
  command: 'node',
  args: [],
  env: {},
  inheritEnv: [],
  maxProcesses: 1,
  maxProcessesPerPrincipal: 1,
  idleTimeoutMs: 1000,
  resources: { ...resources },
  ...(user && { user }),
});
const arbResources = fc.record({ processes: fc.integer({ min: 8, max: 32_768 }), memoryBytes: fc.integer({ min: 64, max: 1_048_576 }).map((m) => m * 1024 * 1024), cpus: fc.double({ min: 0.01, max: 1024, noNaN: true }) });
const arbInCell = fc.subarray<Resource>(['processes', 'memory', 'cpu']).map((list) => new Set(list));
const NOBODY = { uid: 65534, gid: 65534 };

describe('what bounds a process', () => {
  it('a cell gets exactly the files of its delegated controllers, with the configured values', () => {
    fc.assert(
      fc.property(arbResources, arbInCell, (resources, inCell) => {
        const writes = new Map(cgroupLimitWrites(resources, inCell));
        expect(writes.get('pids.max')).toBe(inCell.has('processes') ? String(resources.processes) : undefined);
        expect(writes.get('memory.max')).toBe(inCell.has('memory') ? String(resources.memoryBytes) : undefined);
        expect(writes.get('memory.swap.max')).toBe(inCell.has('memory') ? '0' : undefined);
        const cpu = writes.get('cpu.max');
        expect(cpu === undefined).toBe(!inCell.has('cpu'));
        if (cpu === undefined) return;
        const [quota, period] = cpu.split(' ').map(Number);
        expect(period).toBe(100_000);
        // Rounded to the microsecond, and never under the kernel's 1 ms minimum.
        expect(Math.abs(quota! / period! - resources.cpus)).toBeLessThanOrEqual(0.01);
      }),
    );
  });

  it('a cgroup v1 cell gets, in each hierarchy, exactly the files of its controllers; memory before memsw (never below it), period before quota', () => {
    fc.assert(
      fc.property(arbResources, arbInCell, (resources, inCell) => {
        const writes = cgroupV1LimitWrites(resources, inCell);
        const at = (file: string) => writes.findIndex(([, f]) => f === file);
        const value = (file: string) => writes.find(([, f]) => f === file)?.[2];
        expect(new Set(writes.map(([controller]) => controller))).toEqual(new Set([...inCell].map((r) => ({ processes: 'pids', memory: 'memory', cpu: 'cpu' })[r])));
        expect(value('pids.max')).toBe(inCell.has('processes') ? String(resources.processes) : undefined);
        expect(value('memory.limit_in_bytes')).toBe(inCell.has('memory') ? String(resources.memoryBytes) : undefined);
        // Equal: swap holds nothing the memory bound refuses.
        expect(value('memory.memsw.limit_in_bytes')).toBe(value('memory.limit_in_bytes'));
        expect(at('memory.limit_in_bytes')).toBeLessThanOrEqual(at('memory.memsw.limit_in_bytes'));
        expect(value('cpu.cfs_quota_us') === undefined).toBe(!inCell.has('cpu'));
        if (!inCell.has('cpu')) return;
        expect(at('cpu.cfs_period_us')).toBeLessThan(at('cpu.cfs_quota_us'));
        expect(value('cpu.cfs_period_us')).toBe('100000');
        // The same quota as v2's cpu.max.
        expect(value('cpu.cfs_quota_us')).toBe(new Map(cgroupLimitWrites(resources, inCell)).get('cpu.max')!.split(' ')[0]);
      }),
    );
  });

  it('rlimits stand in for what no cell bounds: NPROC only for a non-root user, DATA in KiB; a gap warned for each', () => {
    fc.assert(
      fc.property(arbResources, arbInCell, fc.boolean(), (resources, inCell, asNobody) => {
        const route = config(resources, asNobody ? NOBODY : undefined);
        const shell = rlimitCommands(route, inCell);
        const nproc = !inCell.has('processes') && (asNobody || process.geteuid?.() !== 0);
        expect(shell.includes(`ulimit -p ${resources.processes} `)).toBe(nproc);
        expect(shell.includes(`ulimit -d ${Math.ceil(resources.memoryBytes / 1024)} `)).toBe(!inCell.has('memory'));
        expect(shell).not.toMatch(/ulimit -t/);
        const gaps = resourceGaps(route, inCell);
        expect(gaps === undefined).toBe(inCell.size === 3);
        expect(gaps?.includes('CPU not at all') ?? false).toBe(!inCell.has('cpu'));
      }),
    );
  });
});
