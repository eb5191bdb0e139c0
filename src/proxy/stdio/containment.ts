// How every descendant of a stdio process is ended with its session, even one
// that double-forked and called setsid() (so it left the process group the
// gateway signals):
// - sandboxed routes: bubblewrap's PID namespace (--unshare-pid) ends every
//   process in it when the sandbox's init goes, and --die-with-parent ends
//   the sandbox with the gateway;
// - other routes: a cgroup cell of its own per process, under the gateway's
//   own cgroup, when this host lets the gateway make one: on cgroup v2
//   (cgroup-v2.ts; `cgroup.kill`, or freeze, kill each, thaw before 5.14), or
//   on the cgroup v1 hierarchies of a hybrid or legacy host (cgroup-v1.ts; a
//   directory in each of freezer, pids, memory, cpu; freeze, kill each task,
//   thaw), whichever bounds more (below). The process is moved into it before
//   it runs the configured command (a gate, below), so all it ever starts is
//   in it too; all in it is killed when the session ends, and the cell is
//   removed once empty (cgroup-cell.ts);
//   That holds only for a process of another user (`upstream.stdio.user`): one
//   running as the gateway's own user may write every cgroup.procs the gateway
//   may, its own cgroup's included, and so move a daemon out of its cell
//   (chmod does not stop the file's owner; a cgroup namespace needs privilege
//   the gateway's user may not have). `check` and the start's log say so for
//   such a route;
// - else nothing contains them: `check` and the start's log say so for the
//   route (a daemonising server then outlives its session).
import type { RouteConfig, StdioResources, StdioUpstreamConfig } from '../../config/types.js';
import type { CellMaker, CgroupCell } from './cgroup-cell.js';
import { probeV1 } from './cgroup-v1.js';
import { probeV2 } from './cgroup-v2.js';
import { unboundedRoutes, type Resource } from './resource-limits.js';

export type Containment = 'sandbox' | 'cgroup' | 'none';
export type { CgroupCell } from './cgroup-cell.js';

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

/** How cells are made here (probed once): undefined where none can be. */
let maker: CellMaker | undefined | null = null;

/**
 * The cells this host allows, probed once: cgroup v2's, unless cgroup v1
 * hierarchies bound a resource v2 does not (a hybrid host, whose controllers
 * are on v1 while the unified hierarchy offers none): then v1's.
 */
function cellMaker(): CellMaker | undefined {
  if (maker !== null) return maker;
  const v2 = probeV2();
  const v1 = probeV1();
  const v1BoundsMore = v1 !== undefined && [...v1.resources].some((r) => !v2?.resources.has(r));
  maker = v1BoundsMore || v2 === undefined ? v1 : v2;
  return maker;
}

/** Whether this host lets the gateway make a cgroup cell for its children (probed once, verified by making one). */
export function cgroupsUsable(): boolean {
  return cellMaker() !== undefined;
}

/** Which cgroup version cells are made on here, or undefined where none can be. */
export function cgroupVersion(): 'v1' | 'v2' | undefined {
  return cellMaker()?.version;
}

/** One process's cell, its bounds written, before the process starts (throws if it cannot be made). */
export function createCell(resources: StdioResources): CgroupCell {
  const cells = cellMaker();
  if (cells === undefined) throw new Error('no cgroup cell can be made here');
  return cells.create(resources);
}

/** How this route's processes are contained here. */
export function containmentOf(config: StdioUpstreamConfig): Containment {
  if (config.sandbox) return 'sandbox';
  return cgroupsUsable() ? 'cgroup' : 'none';
}

/** The resources a cell bounds for this route's processes here (none when they get no cell). */
export function cellResources(config: StdioUpstreamConfig): Set<Resource> {
  return containmentOf(config) === 'cgroup' ? new Set(cellMaker()!.resources) : new Set();
}

/** Whether a process of this route runs as the gateway's own user, who may move it out of any cgroup cell. */
function runsAsGatewayUser(config: StdioUpstreamConfig): boolean {
  return config.user === undefined || config.user.uid === process.getuid?.();
}

/** Why this route's processes are not contained here, or undefined when they are. */
function uncontained(config: StdioUpstreamConfig): string | undefined {
  const containment = containmentOf(config);
  if (containment === 'none') return 'no sandbox, and no cgroup the gateway can make a cell in here (a writable cgroup v2, or cgroup v1 with a writable freezer hierarchy); add sandbox (bubblewrap), or run the gateway where it can make a cgroup';
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
