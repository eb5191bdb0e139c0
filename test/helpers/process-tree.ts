/**
 * The host's view of a process tree, from /proc (Linux): what a sandboxed child really is
 * (bwrap, its init, the server), since the server's own pid is one of its namespace.
 */
import { readdirSync, readFileSync } from 'node:fs';

/** pid → parent pid, for every process now. */
function parents(): Map<number, number> {
  const found = new Map<number, number>();
  for (const name of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(name)) continue;
    try {
      // `pid (comm) state ppid …`: comm may hold spaces and parentheses, so read after the last ')'.
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      found.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // Gone meanwhile.
    }
  }
  return found;
}

/** Every process below `pid` (children, theirs, …), not `pid` itself. */
export function descendantsOf(pid: number): number[] {
  const all = parents();
  const found: number[] = [];
  const queue = [pid];
  while (queue.length > 0) {
    const parent = queue.shift()!;
    for (const [child, ppid] of all) {
      if (ppid === parent) {
        found.push(child);
        queue.push(child);
      }
    }
  }
  return found;
}
