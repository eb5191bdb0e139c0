// How every descendant of a stdio process is ended with its session, even one
// that double-forked and called setsid() (so it left the process group the
// gateway signals):
// - sandboxed routes: bubblewrap's PID namespace (--unshare-pid) ends every
//   process in it when the sandbox's init goes, and --die-with-parent ends
//   the sandbox with the gateway;
// - other routes: a cgroup v2 of its own per process, under the gateway's own
//   cgroup, when this host lets the gateway make one. The process is moved
//   into it before it runs the configured command (a gate, below), so all it
//   ever starts is in it too; `cgroup.kill` (or freeze, kill each, thaw on
//   kernels before 5.14) ends them all when the session ends, and the cgroup
//   is removed once empty;
//   That holds only for a process of another user (`upstream.stdio.user`): one
//   running as the gateway's own user may write every cgroup.procs the gateway
//   may, its own cgroup's included, and so move a daemon out of its cell
//   (chmod does not stop the file's owner; a cgroup namespace needs privilege
//   the gateway's user may not have). `check` and the start's log say so for
//   such a route;
// - else nothing contains them: `check` and the start's log say so for the
//   route (a daemonising server then outlives its session).
import { existsSync, mkdtempSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { RouteConfig, StdioResources, StdioUpstreamConfig } from '../../config/types.js';
import { applyCellLimits, enableControllers, unboundedRoutes, type Resource } from './resource-limits.js';

export type Containment = 'sandbox' | 'cgroup' | 'none';

/**
 * The gate: runs as the process itself (same pid, user, environment), waits
 * until the gateway has moved it into its cgroup (a line on fd 3), closes
 * fd 3 and becomes the configured command. Nothing runs before the move.
 */
// `unset PWD`: the shell exports one, the command's environment is exactly process-env.ts's.
// `rlimits`: resource-limits.ts's ulimit commands for what the cell does not bound.
export const gateScript = (rlimits = '') => `read -r _ <&3 || exit 125; exec 3<&-; ${rlimits}unset PWD; exec "$@"`;
/** No gate, only the rlimits (resource-limits.ts), then the command. */
export const rlimitScript = (rlimits: string) => `${rlimits}unset PWD; exec "$@"`;
export const GATE_SHELL = '/bin/sh';

/** How long an emptied cgroup is waited for before it is left in place (logged). */
const REMOVE_WAIT_MS = 10_000;

/** Whether this host lets the gateway make cgroups (probed once). */
let usable: boolean | undefined;
/** The resources a cell bounds here (its controllers delegated), probed with usable. */
let controllers = new Set<Resource>();
/** The gateway's cgroup of cells, there while any cell is (so a gateway that ends without its exit hook leaves none behind). */
let base: string | undefined;
let cells = 0;
let exitHookInstalled = false;

/** The cgroup v2 directory of this process, from /proc: undefined without a unified hierarchy. */
function ownCgroupDir(): string | undefined {
  const own = readFileSync('/proc/self/cgroup', 'utf8')
    .split('\n')
    .find((line) => line.startsWith('0::'))
    ?.slice(3);
  const mount = readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' '))
    .find((fields) => fields[fields.indexOf('-') + 1] === 'cgroup2')?.[4];
  if (own === undefined || mount === undefined) return undefined;
  return join(mount, own);
}

/**
 * Whether the host lets the gateway make a cgroup for its children (no cgroup
 * v2, read-only, not delegated: no). Verified, not assumed: one is made, its
 * files read, and removed.
 */
export function cgroupsUsable(): boolean {
  if (usable !== undefined) return usable;
  usable = false;
  try {
    const own = ownCgroupDir();
    if (own === undefined) return false;
    const probe = mkdtempSync(join(own, `mag-${process.pid}-probe-`));
    readFileSync(join(probe, 'cgroup.procs'), 'utf8');
    try {
      controllers = enableControllers(own, probe);
    } finally {
      rmdirSync(probe);
    }
    usable = true;
  } catch {
    usable = false;
  }
  return usable;
}

/** The gateway's cgroup of cells, made when the first cell is. */
function baseDir(): string {
  if (base !== undefined) return base;
  const own = ownCgroupDir()!;
  base = mkdtempSync(join(own, `mag-${process.pid}-`));
  controllers = enableControllers(own, base);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', removeBase);
  }
  return base;
}

function removeBase(): void {
  if (base === undefined) return;
  try {
    rmdirSync(base);
    base = undefined;
  } catch {
    // Still holds a cell that could not be removed (logged): the host's to clean.
  }
}

/** The last cell is gone: the base goes too (made again by the next). */
function cellGone(): void {
  if (--cells === 0) removeBase();
}

/** How this route's processes are contained here. */
export function containmentOf(config: StdioUpstreamConfig): Containment {
  if (config.sandbox) return 'sandbox';
  return cgroupsUsable() ? 'cgroup' : 'none';
}

/** The resources a cell bounds for this route's processes here (none when they get no cell). */
export function cellResources(config: StdioUpstreamConfig): Set<Resource> {
  return containmentOf(config) === 'cgroup' ? new Set(controllers) : new Set();
}

/** Whether a process of this route runs as the gateway's own user, who may move it out of any cgroup cell. */
function runsAsGatewayUser(config: StdioUpstreamConfig): boolean {
  return config.user === undefined || config.user.uid === process.getuid?.();
}

/** Why this route's processes are not contained here, or undefined when they are. */
function uncontained(config: StdioUpstreamConfig): string | undefined {
  const containment = containmentOf(config);
  if (containment === 'none') return 'no sandbox, and no writable cgroup v2 here; add sandbox (bubblewrap), or run the gateway where it can make a cgroup';
  if (containment === 'cgroup' && runsAsGatewayUser(config)) {
    return "they run as the gateway's own user, who may move a process out of its cgroup (into the gateway's); add sandbox (bubblewrap), or set user to another user";
  }
  return undefined;
}

/** The routes whose processes nothing contains here: one warning each, for `check` and the start's log. */
export function uncontainedRoutes(routes: RouteConfig[]): string[] {
  return routes.flatMap((route) => {
    const why = route.stdio && uncontained(route.stdio);
    return why ? [`${route.path}: upstream.stdio: processes a server starts that leave its process group (double fork and setsid) can outlive their session and the gateway: ${why}`] : [];
  });
}

/** The routes whose processes' resources no cell bounds (all of them) here: one warning each, for `check` and the start's log. */
export function unboundedResourceRoutes(routes: RouteConfig[]): string[] {
  return unboundedRoutes(routes, cellResources);
}

/** One process's cgroup: made before it starts, every process in it killed when its session ends, removed once empty. */
export class CgroupCell {
  private constructor(readonly dir: string) {}

  /** Made with its bounds written (resource-limits.ts), before any process is in it. */
  static create(resources: StdioResources): CgroupCell {
    const dir = mkdtempSync(join(baseDir(), 's-'));
    try {
      applyCellLimits(dir, resources, controllers);
    } catch (err) {
      rmdirSync(dir);
      throw err;
    }
    cells++;
    return new CgroupCell(dir);
  }

  /** Moves the (gated, not yet running) process in: all it starts from now on is in the cell. */
  adopt(pid: number): void {
    writeFileSync(join(this.dir, 'cgroup.procs'), String(pid));
  }

  /** SIGKILL to every process in the cell, synchronously; never throws. */
  killAll(): void {
    try {
      if (existsSync(join(this.dir, 'cgroup.kill'))) return writeFileSync(join(this.dir, 'cgroup.kill'), '1');
      // Before Linux 5.14: frozen first, so nothing forks while the list is killed.
      writeFileSync(join(this.dir, 'cgroup.freeze'), '1');
      for (const pid of readFileSync(join(this.dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
      writeFileSync(join(this.dir, 'cgroup.freeze'), '0');
    } catch {
      // The cell is gone already, or the host took it away: nothing left to kill in it.
    }
  }

  /** Kills what is left, waits until the cell is empty, removes it; resolves with why not, if it could not. */
  async remove(): Promise<string | undefined> {
    const problem = await this.emptyAndRemove();
    cellGone();
    return problem;
  }

  private async emptyAndRemove(): Promise<string | undefined> {
    const deadline = Date.now() + REMOVE_WAIT_MS;
    for (;;) {
      this.killAll();
      try {
        await rmdir(this.dir);
        return undefined;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') return undefined;
        if (code !== 'EBUSY' || Date.now() > deadline) return `cgroup ${this.dir}: ${code ?? String(err)}`;
      }
      // Killed processes take a moment to be reaped.
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}
