// The host facts `upstream.stdio.user` needs at load: user and group names
// looked up in /etc/passwd and /etc/group (local files, as a container has
// them; not NSS), and whether this process may switch users at all (root, or
// CAP_SETUID and CAP_SETGID), so a configuration that cannot work is refused
// before any client comes.
import { readFileSync } from 'node:fs';

/** Capability bits (linux/capability.h). */
const CAP_SETGID = 6n;
const CAP_SETUID = 7n;

/** The colon-separated records of a passwd/group file, by name and by number. */
function records(file: string): string[][] {
  try {
    return readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => line !== '' && !line.startsWith('#'))
      .map((line) => line.split(':'));
  } catch {
    return [];
  }
}

/** A user's uid and primary gid, by name or number; undefined when /etc/passwd does not know it. */
export function lookupUser(user: string | number, passwd = '/etc/passwd'): { uid: number; gid: number } | undefined {
  const found = records(passwd).find((r) => (typeof user === 'number' ? Number(r[2]) === user : r[0] === user));
  return found && { uid: Number(found[2]), gid: Number(found[3]) };
}

/** A group's gid by name; numbers pass unchanged. */
export function lookupGroup(group: string | number, groupFile = '/etc/group'): number | undefined {
  if (typeof group === 'number') return group;
  const found = records(groupFile).find((r) => r[0] === group);
  return found && Number(found[2]);
}

/** Whether a process with this effective uid and this /proc/self/status may setuid and setgid. */
export function canSwitchUsers(euid: number, status: string): boolean {
  if (euid === 0) return true;
  const hex = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  if (hex === undefined) return false;
  const effective = BigInt(`0x${hex}`);
  return ((effective >> CAP_SETUID) & 1n) === 1n && ((effective >> CAP_SETGID) & 1n) === 1n;
}

/** The same, for this process. */
export function thisProcessCanSwitchUsers(): boolean {
  let status = '';
  try {
    status = readFileSync('/proc/self/status', 'utf8');
  } catch {
    // Not Linux: only root can.
  }
  return canSwitchUsers(process.geteuid?.() ?? -1, status);
}
