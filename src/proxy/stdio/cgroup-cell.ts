// What a per-process cgroup cell is to the rest of the gateway, whichever
// cgroup version makes it (cgroup-v2.ts, cgroup-v1.ts; containment.ts picks),
// and the file work both share. The process in a cell, and all it starts, may
// be hostile: it may make sub-cgroups in its cell, move processes between
// them, freeze them, remove them, or leave the cell (as the gateway's own
// user). So every file operation here is fallible, and none of the cleanup
// (killAll, remove, the bases' removal) ever throws: a throw in an exit
// handler would end the whole gateway.
import { readdirSync, readFileSync, rmdirSync } from 'node:fs';
import { rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { StdioResources } from '../../config/types.js';
import type { Resource } from './resource-limits.js';

/** One process's cgroup cell (one directory per hierarchy): made before it starts, all in it killed when its session ends, removed once empty. */
export interface CgroupCell {
  /** Moves the (gated, not yet running) process in: all it starts from now on is in the cell. Throws if it cannot: the process must not run. */
  adopt(pid: number): void;
  /** SIGKILL to every process in the cell, sub-cgroups included, synchronously; never throws. */
  killAll(): void;
  /** Kills what is left, waits until the cell is empty, removes it; resolves with why not, if it could not. Never rejects. */
  remove(): Promise<string | undefined>;
}

/** A way of making cells that this host allows (probed once). */
export interface CellMaker {
  readonly version: 'v1' | 'v2';
  /** The resources a cell bounds here. */
  readonly resources: ReadonlySet<Resource>;
  /** A cell with its bounds written, before any process is in it. Throws if it cannot be made. */
  create(resources: StdioResources): CgroupCell;
}

/** How long an emptied cgroup is waited for before it is left in place (logged). */
const REMOVE_WAIT_MS = 10_000;
/** More sub-cgroups than this in one cell are not walked (a hostile child making them without end). */
const MAX_SUBTREE = 4_096;

/** `dir` and the sub-cgroups in it, deepest first (so removal goes bottom-up); [] when `dir` is gone. Never throws. */
export function cgroupTree(dir: string): string[] {
  const found: string[] = [];
  const pending = [dir];
  while (pending.length > 0 && found.length < MAX_SUBTREE) {
    const next = pending.pop()!;
    try {
      const subdirs = readdirSync(next, { withFileTypes: true }).filter((e) => e.isDirectory());
      found.push(next);
      pending.push(...subdirs.map((e) => join(next, e.name)));
    } catch {
      // Gone (removed by a process in the cell, or the host): nothing to walk.
    }
  }
  return found.reverse();
}

/** The pids a cgroup directory lists (`cgroup.procs`, or v1's `tasks`: threads too), but never the gateway's own; [] when unreadable. Never throws. */
export function pidsIn(dir: string, file = 'cgroup.procs'): number[] {
  try {
    return readFileSync(join(dir, file), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map(Number)
      .filter((pid) => Number.isInteger(pid) && pid > 0 && pid !== process.pid);
  } catch {
    return [];
  }
}

/** SIGKILL to each pid; ones already gone are skipped. Never throws. */
export function killPids(pids: Iterable<number>): void {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Gone already.
    }
  }
}

/** rmdir of each directory (deepest first), synchronously; whether all are gone. Never throws. */
export function removeDirsSync(dirs: string[]): boolean {
  let all = true;
  for (const dir of dirs) {
    try {
      rmdirSync(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') all = false;
    }
  }
  return all;
}

/** One pass over a cell's trees: rmdir each directory bottom-up; undefined when all are gone, else the first error code. */
async function removePass(roots: string[]): Promise<{ code: string } | undefined> {
  let failed: { code: string } | undefined;
  for (const dir of roots.flatMap(cgroupTree)) {
    try {
      await rmdir(dir);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? String(err);
      if (code !== 'ENOENT') failed ??= { code: `${dir}: ${code}` };
    }
  }
  return failed;
}

/**
 * Kills all in a cell (its directories `roots`, one per hierarchy) until it can be removed, and
 * removes it with every sub-cgroup a process made in it; resolves with why not, if it could not
 * within REMOVE_WAIT_MS. Never rejects.
 */
export async function emptyAndRemove(roots: string[], killAll: () => void): Promise<string | undefined> {
  const deadline = Date.now() + REMOVE_WAIT_MS;
  for (;;) {
    killAll();
    const failed = await removePass(roots).catch((err: unknown) => ({ code: String(err) }));
    if (failed === undefined) return undefined;
    if (!failed.code.endsWith('EBUSY') || Date.now() > deadline) return `cgroup ${failed.code}`;
    // Killed processes take a moment to be reaped.
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * The gateway's cgroup(s) of cells, there while any cell is: made with the first cell, removed
 * with the last (and at exit, so a gateway that ends without its exit hook leaves none behind).
 */
export class CellBase<T> {
  private base: T | undefined;
  private cells = 0;
  private exitHookInstalled = false;

  /** `make` may throw (no cell then); `removeSync` never does, and says whether all of it went. */
  constructor(
    private readonly make: () => T,
    private readonly removeSync: (base: T) => boolean,
  ) {}

  /** The base, made if need be, counted as holding one more cell until `leave`. */
  enter(): T {
    this.base ??= this.make();
    this.cells++;
    if (!this.exitHookInstalled) {
      this.exitHookInstalled = true;
      process.once('exit', () => this.removeBase());
    }
    return this.base;
  }

  /** A cell is gone (or was never made): the base goes with the last. */
  leave(): void {
    if (--this.cells === 0) this.removeBase();
  }

  private removeBase(): void {
    if (this.base === undefined) return;
    try {
      // Still holding a cell that could not be removed (logged): kept, and the host's to clean.
      if (this.removeSync(this.base)) this.base = undefined;
    } catch {
      // Never from an exit hook.
    }
  }
}
