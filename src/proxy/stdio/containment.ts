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
// - else nothing contains them: `check` and the start's log say so for the
//   route (a daemonising server then outlives its session).
import { existsSync, mkdtempSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { RouteConfig, StdioUpstreamConfig } from '../../config/types.js';

export type Containment = 'sandbox' | 'cgroup' | 'none';

/**
 * The gate: runs as the process itself (same pid, user, environment), waits
 * until the gateway has moved it into its cgroup (a line on fd 3), closes
 * fd 3 and becomes the configured command. Nothing runs before the move.
 */
// `unset PWD`: the shell exports one, the command's environment is exactly process-env.ts's.
export const GATE_SCRIPT = 'read -r _ <&3 || exit 125; exec 3<&-; unset PWD; exec "$@"';
export const GATE_SHELL = '/bin/sh';

/** How long an emptied cgroup is waited for before it is left in place (logged). */
const REMOVE_WAIT_MS = 10_000;

let base: string | null | undefined;

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
 * This gateway's own cgroup for its children (made once, then reused), or
 * null when the host does not let it make one (no cgroup v2, read-only, not
 * delegated). Verified, not assumed: the directory is made and its files read.
 */
export function cgroupBase(): string | null {
  if (base !== undefined) return base;
  base = null;
  try {
    const own = ownCgroupDir();
    if (own === undefined) return null;
    const made = mkdtempSync(join(own, `mag-${process.pid}-`));
    readFileSync(join(made, 'cgroup.procs'), 'utf8');
    process.once('exit', () => {
      try {
        rmdirSync(made);
      } catch {
        // Still holds a cell (a removal waiting): the host's to clean.
      }
    });
    base = made;
  } catch {
    base = null;
  }
  return base;
}

/** How this route's processes are contained here. */
export function containmentOf(config: StdioUpstreamConfig): Containment {
  if (config.sandbox) return 'sandbox';
  return cgroupBase() === null ? 'none' : 'cgroup';
}

/** The routes whose processes nothing contains here: one warning each, for `check` and the start's log. */
export function uncontainedRoutes(routes: RouteConfig[]): string[] {
  return routes
    .filter((route) => route.stdio !== undefined && containmentOf(route.stdio) === 'none')
    .map(
      (route) =>
        `${route.path}: upstream.stdio: processes a server starts that leave its process group (double fork and setsid) can outlive their session and the gateway: no sandbox, and no writable cgroup v2 here; add sandbox (bubblewrap), or run the gateway where it can make a cgroup`,
    );
}

/** One process's cgroup: made before it starts, every process in it killed when its session ends, removed once empty. */
export class CgroupCell {
  private constructor(readonly dir: string) {}

  static create(): CgroupCell {
    const parent = cgroupBase();
    if (parent === null) throw new Error('no cgroup v2 to contain the process');
    return new CgroupCell(mkdtempSync(join(parent, 's-')));
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
