// Sandbox paths that would give a sandboxed process other sessions' files
// (DESIGN.md §8.3): every process directory lives under the temporary
// directory (proxy/stdio/process-dir.ts: `mag-stdio-*/`), and the sandbox's
// private /tmp hides the host's only where it is mounted over it. So a
// `readable` or `writable` path is refused when it is the temporary directory
// or holds it (`writable: [/tmp]` is bound over the private /tmp and brings the
// host's back), or lies inside a root of process directories. `/` itself is
// allowed when the temporary directory is under /tmp: the private /tmp is
// mounted over it. Compared as the kernel will see them: links resolved.
import { realpathSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { sep } from 'node:path';

/** The prefix of every root of process directories (proxy/stdio/process-dir.ts). */
export const PROCESS_DIR_ROOT_PREFIX = 'mag-stdio-';

const real = (path: string) => {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
};

const within = (inner: string, outer: string) => inner === outer || outer === sep || inner.startsWith(outer + sep);

/** Why a sandbox may not bind this path, or undefined. */
export function sessionPathProblem(path: string, temporary = tmpdir()): string | undefined {
  const resolved = real(path);
  const tmp = real(temporary);
  if (within(tmp, resolved)) {
    const hiddenByPrivateTmp = resolved === sep && within(tmp, '/tmp');
    if (!hiddenByPrivateTmp) return `${path} holds the temporary directory ${tmp}, where every session's directory is: a sandbox would see other sessions' files`;
  }
  const inside = resolved.startsWith(tmp + sep) ? resolved.slice(tmp.length + 1) : undefined;
  if (inside?.startsWith(PROCESS_DIR_ROOT_PREFIX)) return `${path} is inside the gateway's directory of session directories: a sandbox would see other sessions' files`;
  return undefined;
}
