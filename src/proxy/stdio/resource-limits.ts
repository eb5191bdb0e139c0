// What one stdio process (and all it starts) may use: `upstream.stdio.resources`.
// Each bound is enforced by the first of these the host allows:
// - its cgroup cell (containment.ts), where the controller is there for it: on
//   cgroup v2 when the gateway's cgroup delegates it, pids.max, memory.max
//   (+ memory.swap.max 0), cpu.max; on cgroup v1 when its hierarchy is mounted
//   and writable, pids.max, memory.limit_in_bytes (+ memory.memsw.limit_in_bytes
//   equal to it, where swap is accounted), cpu.cfs_quota_us per
//   cpu.cfs_period_us. These bound the whole tree of the process together;
//   past the memory bound the kernel's OOM killer ends it, and its session
//   ends like any exit;
// - else an rlimit set before exec (by /bin/sh's ulimit, inherited by all it
//   starts, soft and hard, so it cannot raise them): RLIMIT_NPROC for processes,
//   which counts every process of the uid, and which the kernel ignores for root,
//   so it applies only to a route with `user` (another, non-root user; all that
//   user's processes share it); RLIMIT_DATA for memory, per process, so a tree of
//   N processes may hold N times it. CPU has none: RLIMIT_CPU is seconds in all,
//   not a rate, and would kill a long-lived server;
// - else nothing: `check` and the start's log say so once per route.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RouteConfig, StdioResources, StdioUpstreamConfig } from '../../config/types.js';

export type Resource = 'processes' | 'memory' | 'cpu';
const CONTROLLER: Record<Resource, string> = { processes: 'pids', memory: 'memory', cpu: 'cpu' };
/** cpu.max's (v1: cpu.cfs_period_us's) period: 100 ms, the kernel's default. */
const CPU_PERIOD_US = 100_000;
/** The CPU time a cell may use per period: at least 1 ms, the kernel's least. */
const cpuQuotaUs = (resources: StdioResources) => Math.max(1_000, Math.round(resources.cpus * CPU_PERIOD_US));

const words = (file: string) => (existsSync(file) ? readFileSync(file, 'utf8').trim().split(/\s+/).filter(Boolean) : []);

/**
 * Turns on, for the cells under `base`, each controller its parent offers (the
 * parent's own subtree_control first: allowed where it holds no process itself,
 * as at a delegated root). Returns the resources a cell can bound.
 */
export function enableControllers(parent: string, base: string): Set<Resource> {
  const wanted = Object.entries(CONTROLLER) as [Resource, string][];
  for (const [dir, offers] of [
    [parent, join(parent, 'cgroup.controllers')],
    [base, join(base, 'cgroup.controllers')],
  ] as const) {
    for (const [, controller] of wanted) {
      if (!words(offers).includes(controller) || words(join(dir, 'cgroup.subtree_control')).includes(controller)) continue;
      try {
        writeFileSync(join(dir, 'cgroup.subtree_control'), `+${controller}`);
      } catch {
        // Not delegated (or processes live there): that controller stays off, the rlimit stands in.
      }
    }
  }
  const enabled = words(join(base, 'cgroup.subtree_control'));
  return new Set(wanted.filter(([, controller]) => enabled.includes(controller)).map(([resource]) => resource));
}

/** The files a cell's bounds are written to, and their values. */
export function cgroupLimitWrites(resources: StdioResources, bounded: ReadonlySet<Resource>): [file: string, value: string][] {
  const writes: [string, string][] = [];
  if (bounded.has('processes')) writes.push(['pids.max', String(resources.processes)]);
  if (bounded.has('memory')) writes.push(['memory.max', String(resources.memoryBytes)], ['memory.swap.max', '0']);
  if (bounded.has('cpu')) writes.push(['cpu.max', `${cpuQuotaUs(resources)} ${CPU_PERIOD_US}`]);
  return writes;
}

/** Writes the bounds into a fresh cell, before its process runs; memory.swap.max only where swap accounting exists. */
export function applyCellLimits(dir: string, resources: StdioResources, bounded: ReadonlySet<Resource>): void {
  for (const [file, value] of cgroupLimitWrites(resources, bounded)) {
    if (file === 'memory.swap.max' && !existsSync(join(dir, file))) continue;
    writeFileSync(join(dir, file), value);
  }
}

/**
 * A cgroup v1 cell's bounds: the hierarchy (by its controller) each is written in, the file and
 * value, in order (memory.limit_in_bytes before memory.memsw.limit_in_bytes, which may not be
 * below it: equal, so swap cannot hold more than memory.limit_in_bytes lets through).
 */
export function cgroupV1LimitWrites(resources: StdioResources, bounded: ReadonlySet<Resource>): [controller: string, file: string, value: string][] {
  const writes: [string, string, string][] = [];
  if (bounded.has('processes')) writes.push(['pids', 'pids.max', String(resources.processes)]);
  if (bounded.has('memory')) writes.push(['memory', 'memory.limit_in_bytes', String(resources.memoryBytes)], ['memory', 'memory.memsw.limit_in_bytes', String(resources.memoryBytes)]);
  if (bounded.has('cpu')) writes.push(['cpu', 'cpu.cfs_period_us', String(CPU_PERIOD_US)], ['cpu', 'cpu.cfs_quota_us', String(cpuQuotaUs(resources))]);
  return writes;
}

/** Writes the bounds into a fresh v1 cell (its directory per controller), before its process runs; memory.memsw.* only where swap is accounted. */
export function applyV1CellLimits(dirs: ReadonlyMap<string, string>, resources: StdioResources, bounded: ReadonlySet<Resource>): void {
  for (const [controller, file, value] of cgroupV1LimitWrites(resources, bounded)) {
    const path = join(dirs.get(controller)!, file);
    if (file === 'memory.memsw.limit_in_bytes' && !existsSync(path)) continue;
    writeFileSync(path, value);
  }
}

/** Whether RLIMIT_NPROC means anything for this route's processes: the kernel ignores it for root. */
function nprocBinds(config: StdioUpstreamConfig): boolean {
  return (config.user?.uid ?? process.geteuid?.()) !== 0;
}

/** The `ulimit` commands (dash and bash alike) for the bounds no cell holds; empty when none. */
export function rlimitCommands(config: StdioUpstreamConfig, inCell: Set<Resource>): string {
  const commands: string[] = [];
  if (!inCell.has('processes') && nprocBinds(config)) commands.push(`ulimit -p ${config.resources.processes}`);
  if (!inCell.has('memory')) commands.push(`ulimit -d ${Math.ceil(config.resources.memoryBytes / 1024)}`);
  return commands.map((c) => `${c} || exit 125; `).join('');
}

/** What is not bounded, or bounded only loosely, for this route's processes here: undefined when all are bounded by a cell. */
export function resourceGaps(config: StdioUpstreamConfig, inCell: Set<Resource>): string | undefined {
  const gaps: string[] = [];
  if (!inCell.has('processes')) {
    gaps.push(nprocBinds(config) ? 'processes only by RLIMIT_NPROC, shared by every process of its uid' : 'processes not at all (RLIMIT_NPROC does not bind root; set user to another user)');
  }
  if (!inCell.has('memory')) gaps.push('memory only by RLIMIT_DATA, per process (a tree of N processes may hold N times it)');
  if (!inCell.has('cpu')) gaps.push('CPU not at all');
  return gaps.length === 0 ? undefined : gaps.join('; ');
}

/** One warning per route whose processes' resources are not all bounded by a cgroup here. */
export function unboundedRoutes(routes: RouteConfig[], inCell: (config: StdioUpstreamConfig) => Set<Resource>): string[] {
  return routes.flatMap((route) => {
    const gaps = route.stdio && resourceGaps(route.stdio, inCell(route.stdio));
    return gaps ? [`${route.path}: upstream.stdio.resources: no cgroup controller here for what is missing (a cgroup v2 that delegates it, or a writable cgroup v1 hierarchy of it beside a freezer one), so its processes are bounded in ${gaps}: run the gateway in a cgroup that delegates pids, memory and cpu`] : [];
  });
}
