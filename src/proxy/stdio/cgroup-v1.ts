// Cells on cgroup v1 (a hybrid or legacy host: each controller its own
// hierarchy): one directory per process in each hierarchy that is mounted and
// writable here, under `mag-<pid>-*` under the gateway's own cgroup in that
// hierarchy (cgroup-paths.ts). The freezer one is required: it is how a cell's
// tree is killed without a race (FROZEN, SIGKILL to every task in it and its
// sub-cgroups, THAWED); pids, memory and cpu bound what they can
// (resource-limits.ts). The gate moves the process into every one of them.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StdioResources } from '../../config/types.js';
import { CellBase, cgroupTree, emptyAndRemove, killPids, pidsIn, removeDirsSync, type CellMaker, type CgroupCell } from './cgroup-cell.js';
import { ownV1Dirs } from './cgroup-paths.js';
import { applyV1CellLimits, type Resource } from './resource-limits.js';

/** Each v1 controller used, and a file of its that a usable cell has. */
const CONTROLLERS = { freezer: 'freezer.state', pids: 'pids.max', memory: 'memory.limit_in_bytes', cpu: 'cpu.cfs_quota_us' } as const;
type Controller = keyof typeof CONTROLLERS;
const RESOURCE: Partial<Record<Controller, Resource>> = { pids: 'processes', memory: 'memory', cpu: 'cpu' };
/** How long killAll waits, blocking, for the freezer to reach FROZEN (a task that cannot be frozen is killed all the same, and again by remove). */
const FREEZE_WAIT_MS = 10;
const pause = new Int32Array(new SharedArrayBuffer(4));

/** Writes a file of a cgroup that may be gone or hostile; whether it took. Never throws. */
function tryWrite(path: string, value: string): boolean {
  try {
    writeFileSync(path, value);
    return true;
  } catch {
    return false;
  }
}

function waitFrozen(freezer: string): void {
  for (let waited = 0; waited < FREEZE_WAIT_MS; waited++) {
    try {
      if (readFileSync(join(freezer, 'freezer.state'), 'utf8').trim() !== 'FREEZING') return;
    } catch {
      return;
    }
    Atomics.wait(pause, 0, 0, 1);
  }
}

class V1Cell implements CgroupCell {
  /** Its directories, one per hierarchy (two controllers mounted together share one). */
  private readonly roots: string[];

  constructor(
    private readonly dirs: ReadonlyMap<Controller, string>,
    private readonly base: CellBase<string>,
  ) {
    this.roots = [...new Set(dirs.values())];
  }

  adopt(pid: number): void {
    for (const dir of this.roots) writeFileSync(join(dir, 'cgroup.procs'), String(pid));
  }

  killAll(): void {
    try {
      const freezer = this.dirs.get('freezer')!;
      // Frozen first (its sub-cgroups with it), so nothing forks while the list is killed.
      if (tryWrite(join(freezer, 'freezer.state'), 'FROZEN')) waitFrozen(freezer);
      // Every hierarchy's tasks: one that left the freezer cell but not the others is found too.
      killPids(new Set(this.roots.flatMap(cgroupTree).flatMap((dir) => pidsIn(dir, 'tasks'))));
      // Thawed, sub-cgroups a process froze itself included: the killed die only once thawed.
      for (const dir of cgroupTree(freezer)) tryWrite(join(dir, 'freezer.state'), 'THAWED');
    } catch {
      // Nothing here throws; an exit handler must never see it if something did.
    }
  }

  async remove(): Promise<string | undefined> {
    const problem = await emptyAndRemove(this.roots, () => this.killAll()).catch((err: unknown) => String(err));
    this.base.leave();
    return problem;
  }
}

/** This process's directory in each v1 hierarchy used where a cell can be made there (verified: one made, its file seen, removed). */
function usableHierarchies(): Map<Controller, string> {
  const usable = new Map<Controller, string>();
  for (const [controller, own] of ownV1Dirs(Object.keys(CONTROLLERS))) {
    try {
      const probe = mkdtempSync(join(own, `mag-${process.pid}-probe-`));
      try {
        if (existsSync(join(probe, CONTROLLERS[controller as Controller]))) usable.set(controller as Controller, own);
      } finally {
        rmdirSync(probe);
      }
    } catch {
      // Not mounted writable for the gateway: that hierarchy is not used.
    }
  }
  return usable;
}

/** Cells on cgroup v1, or undefined where this host has no writable v1 freezer hierarchy for the gateway. */
export function probeV1(): CellMaker | undefined {
  try {
    const own = usableHierarchies();
    return own.has('freezer') ? v1Maker(own) : undefined;
  } catch {
    return undefined;
  }
}

function v1Maker(own: ReadonlyMap<Controller, string>): CellMaker {
  const resources = new Set([...own.keys()].flatMap((c) => RESOURCE[c] ?? []));
  const hierarchies = [...new Set(own.values())];
  // One name for the base in every hierarchy; made again in any a host or a process removed.
  const name = `mag-${process.pid}-${randomBytes(6).toString('hex')}`;
  const base = new CellBase(
    () => name,
    () => removeDirsSync(hierarchies.map((dir) => join(dir, name))),
  );
  return {
    version: 'v1',
    resources,
    create(limits: StdioResources): CgroupCell {
      base.enter();
      const cellName = `s-${randomBytes(6).toString('hex')}`;
      const cell = new Map([...own].map(([controller, dir]) => [controller, join(dir, name, cellName)]));
      const made: string[] = [];
      try {
        for (const dir of new Set(cell.values())) {
          mkdirSync(join(dir, '..'), { recursive: true });
          mkdirSync(dir);
          made.push(dir);
        }
        applyV1CellLimits(cell, limits, resources);
        return new V1Cell(cell, base);
      } catch (err) {
        removeDirsSync(made);
        base.leave();
        throw err;
      }
    },
  };
}
