// Cells on cgroup v2 (the unified hierarchy): one directory per process under
// `mag-<pid>-*` under the gateway's own cgroup, with the controllers that
// cgroup delegates enabled (resource-limits.ts). `cgroup.kill` ends every
// process in a cell and its sub-cgroups at once; before Linux 5.14, freeze,
// kill each, thaw.
import { existsSync, mkdtempSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StdioResources } from '../../config/types.js';
import { CellBase, cgroupTree, emptyAndRemove, killPids, pidsIn, removeDirsSync, type CellMaker, type CgroupCell } from './cgroup-cell.js';
import { ownV2Dir } from './cgroup-paths.js';
import { applyCellLimits, enableControllers, type Resource } from './resource-limits.js';

class V2Cell implements CgroupCell {
  constructor(
    private readonly dir: string,
    private readonly base: CellBase<string>,
  ) {}

  adopt(pid: number): void {
    writeFileSync(join(this.dir, 'cgroup.procs'), String(pid));
  }

  killAll(): void {
    try {
      if (existsSync(join(this.dir, 'cgroup.kill'))) return writeFileSync(join(this.dir, 'cgroup.kill'), '1');
      // Before Linux 5.14: frozen first (sub-cgroups with it), so nothing forks while the list is killed.
      writeFileSync(join(this.dir, 'cgroup.freeze'), '1');
      const tree = cgroupTree(this.dir);
      killPids(tree.flatMap((dir) => pidsIn(dir)));
      for (const dir of tree) {
        try {
          writeFileSync(join(dir, 'cgroup.freeze'), '0');
        } catch {
          // Gone.
        }
      }
    } catch {
      // The cell is gone already, or the host took it away: nothing left to kill in it.
    }
  }

  async remove(): Promise<string | undefined> {
    const problem = await emptyAndRemove([this.dir], () => this.killAll());
    this.base.leave();
    return problem;
  }
}

/** Cells on cgroup v2, or undefined where this host does not let the gateway make one (no cgroup v2, read-only, not delegated). */
export function probeV2(): CellMaker | undefined {
  try {
    const own = ownV2Dir();
    if (own === undefined) return undefined;
    // Verified, not assumed: one is made, its files read, and removed.
    const probe = mkdtempSync(join(own, `mag-${process.pid}-probe-`));
    let resources: Set<Resource>;
    try {
      readFileSync(join(probe, 'cgroup.procs'), 'utf8');
      resources = enableControllers(own, probe);
    } finally {
      rmdirSync(probe);
    }
    return v2Maker(own, resources);
  } catch {
    return undefined;
  }
}

function v2Maker(own: string, probed: Set<Resource>): CellMaker {
  let controllers = probed;
  const base = new CellBase(
    () => {
      const dir = mkdtempSync(join(own, `mag-${process.pid}-`));
      controllers = enableControllers(own, dir);
      return dir;
    },
    (dir) => removeDirsSync([dir]),
  );
  return {
    version: 'v2',
    get resources() {
      return controllers;
    },
    create(resources: StdioResources): CgroupCell {
      const baseDir = base.enter();
      try {
        const dir = mkdtempSync(join(baseDir, 's-'));
        try {
          applyCellLimits(dir, resources, controllers);
        } catch (err) {
          removeDirsSync([dir]);
          throw err;
        }
        return new V2Cell(dir, base);
      } catch (err) {
        base.leave();
        throw err;
      }
    },
  };
}
