// The host facts `upstream.stdio.user` needs at load: user and group names
// looked up in /etc/passwd and /etc/group (local files, as a container has
// them; not NSS), and whether this process holds what running another user's
// process takes (root has it all, unless a container dropped some), so a
// configuration that cannot work is refused before any client comes.
import { readFileSync } from 'node:fs';

/**
 * What starting, stopping and cleaning up after another user's process takes (linux/capability.h):
 * switch user and group, give it its directory, signal it, and remove what it wrote there (a 0700
 * directory it owns, in the sticky temp directory).
 */
export const USER_SWITCH_CAPABILITIES = { CAP_CHOWN: 0n, CAP_DAC_OVERRIDE: 1n, CAP_FOWNER: 3n, CAP_KILL: 5n, CAP_SETGID: 6n, CAP_SETUID: 7n };

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

/** The capabilities of USER_SWITCH_CAPABILITIES this /proc/self/status lacks (root in a container may have dropped some). */
export function missingUserSwitchCapabilities(euid: number, status: string): string[] {
  const hex = /^CapEff:\s*([0-9a-f]+)$/m.exec(status)?.[1];
  // No status (not Linux): root can, anyone else cannot.
  if (hex === undefined) return euid === 0 ? [] : Object.keys(USER_SWITCH_CAPABILITIES);
  const effective = BigInt(`0x${hex}`);
  return Object.entries(USER_SWITCH_CAPABILITIES)
    .filter(([, bit]) => ((effective >> bit) & 1n) === 0n)
    .map(([name]) => name);
}

/** The same, for this process. */
export function thisProcessMissingCapabilities(): string[] {
  let status = '';
  try {
    status = readFileSync('/proc/self/status', 'utf8');
  } catch {
    // Not Linux.
  }
  return missingUserSwitchCapabilities(process.geteuid?.() ?? -1, status);
}
