// Where this process's own cgroups are, read from /proc/self/cgroup (which
// cgroup, per hierarchy) and /proc/self/mountinfo (where each hierarchy is
// mounted, and from which of its cgroups): never assumed paths, so a host that
// mounts them elsewhere, or a container that sees only a subtree, is read right.
// Cells are made under these (cgroup-v2.ts, cgroup-v1.ts).
import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

interface Mount {
  /** The cgroup of the hierarchy mounted there (`/` unless a subtree is bind-mounted). */
  root: string;
  at: string;
  fstype: string;
  superOptions: string[];
}

/** mountinfo escapes space, tab, newline and backslash in paths as \ooo. */
const unescape = (path: string) => path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));

function cgroupMounts(mountinfo: string): Mount[] {
  return mountinfo.split('\n').flatMap((line) => {
    const fields = line.split(' ');
    const dash = fields.indexOf('-');
    const fstype = fields[dash + 1];
    if (dash < 0 || (fstype !== 'cgroup' && fstype !== 'cgroup2')) return [];
    return [{ root: unescape(fields[3]!), at: unescape(fields[4]!), fstype, superOptions: (fields[dash + 3] ?? '').split(',') }];
  });
}

/** The directory of cgroup `own` under a mount of its hierarchy that shows it, or undefined. */
function dirIn(mounts: Mount[], own: string): string | undefined {
  for (const mount of mounts) {
    const rel = relative(mount.root, own);
    if (!rel.startsWith('..')) return join(mount.at, rel);
  }
  return undefined;
}

/** The lines of /proc/self/cgroup: hierarchy id, its controllers (empty for v2), the cgroup. */
function ownCgroups(procCgroup: string): { controllers: string[]; path: string }[] {
  return procCgroup.split('\n').flatMap((line) => {
    const match = /^(\d+):([^:]*):(.*)$/.exec(line);
    return match ? [{ controllers: match[2] === '' ? [] : match[2]!.split(','), path: match[3]! }] : [];
  });
}

/** This process's cgroup v2 directory: undefined without a mounted unified hierarchy. */
export function parseOwnV2Dir(procCgroup: string, mountinfo: string): string | undefined {
  const own = ownCgroups(procCgroup).find((c) => c.controllers.length === 0 && c.path !== '');
  return own && dirIn(cgroupMounts(mountinfo).filter((m) => m.fstype === 'cgroup2'), own.path);
}

/** This process's directory in each mounted cgroup v1 hierarchy of the wanted controllers, by controller. */
export function parseOwnV1Dirs(procCgroup: string, mountinfo: string, wanted: readonly string[]): Map<string, string> {
  const mounts = cgroupMounts(mountinfo).filter((m) => m.fstype === 'cgroup');
  const dirs = new Map<string, string>();
  for (const { controllers, path } of ownCgroups(procCgroup)) {
    for (const controller of controllers.filter((c) => wanted.includes(c))) {
      const dir = dirIn(mounts.filter((m) => m.superOptions.includes(controller)), path);
      if (dir !== undefined) dirs.set(controller, dir);
    }
  }
  return dirs;
}

const readProc = () => ({ cgroup: readFileSync('/proc/self/cgroup', 'utf8'), mountinfo: readFileSync('/proc/self/mountinfo', 'utf8') });

/** This process's cgroup v2 directory, from /proc: undefined without a unified hierarchy. */
export function ownV2Dir(): string | undefined {
  const proc = readProc();
  return parseOwnV2Dir(proc.cgroup, proc.mountinfo);
}

/** This process's directory in each cgroup v1 hierarchy of `wanted` that is mounted here, from /proc. */
export function ownV1Dirs(wanted: readonly string[]): Map<string, string> {
  const proc = readProc();
  return parseOwnV1Dirs(proc.cgroup, proc.mountinfo, wanted);
}
