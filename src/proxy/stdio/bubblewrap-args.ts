// The bwrap command line around one process (upstream.stdio.sandbox): new PID,
// IPC, UTS and cgroup namespaces (and a user namespace when the process is not
// root, which is how an unprivileged bwrap gets its others), every capability
// dropped, killed with the gateway (--die-with-parent), a fresh /proc (the
// gateway and other children are not in it), a minimal /dev, a private /tmp,
// and a filesystem of only: the system set below read-only, `readable` and a
// configured `cwd` read-only, `writable` and the process's own ${PROCESS_DIR}
// read-write.
// The network is shared unless `network: false`. The environment is not
// touched: bwrap passes on exactly what process-env.ts built.
import { lstatSync, readlinkSync } from 'node:fs';
import type { StdioSandboxConfig } from '../../config/types.js';

/** What a dynamically linked program (node, python, a shell) needs to start, resolve names and trust TLS. */
export const SYSTEM_DIRS = ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32'];
const SYSTEM_ETC = [
  '/etc/ld.so.cache',
  '/etc/ld.so.conf',
  '/etc/ld.so.conf.d',
  '/etc/alternatives',
  '/etc/ssl',
  '/etc/ca-certificates',
  '/etc/pki',
  '/etc/resolv.conf',
  '/etc/hosts',
  '/etc/nsswitch.conf',
  '/etc/gai.conf',
  '/etc/host.conf',
  '/etc/passwd',
  '/etc/group',
  '/etc/localtime',
  '/etc/mime.types',
];

/** One mount (or symlink) of the sandbox, placed by the depth of where it goes. */
interface Mount {
  dest: string;
  args: string[];
}

let systemMounts: Mount[] | undefined;

/** The system set as this host has it, read once: a merged-/usr link (/bin → usr/bin) stays a link. */
function systemSet(): Mount[] {
  systemMounts ??= [...SYSTEM_DIRS, ...SYSTEM_ETC].flatMap((path): Mount[] => {
    let link: string | undefined;
    try {
      link = lstatSync(path).isSymbolicLink() && SYSTEM_DIRS.includes(path) ? readlinkSync(path) : undefined;
    } catch {
      return [];
    }
    // An /etc file that is a link (resolv.conf in many containers) is bound as what it points to.
    return [{ dest: path, args: link === undefined ? ['--ro-bind', path, path] : ['--symlink', link, path] }];
  });
  return systemMounts;
}

const depth = (path: string) => (path === '/' ? 0 : path.split('/').length - 1);

export interface SandboxedProcess {
  processDir: string;
  cwd: string;
  command: string;
  args: string[];
  /** The process runs as a non-root user: bwrap needs a user namespace. */
  unprivileged: boolean;
}

/** bwrap's arguments: the namespaces, then the mounts parents first, then the command. */
export function bubblewrapArgs(sandbox: StdioSandboxConfig, p: SandboxedProcess): string[] {
  const namespaces = ['--die-with-parent', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--cap-drop', 'ALL'];
  if (p.unprivileged) namespaces.push('--unshare-user');
  if (!sandbox.network) namespaces.push('--unshare-net');
  // With the whole root readable, the system set is already in it.
  const system = sandbox.readable.includes('/') ? [] : systemSet();
  const mounts: Mount[] = [
    ...system,
    ...sandbox.readable.map((path) => ({ dest: path, args: ['--ro-bind', path, path] })),
    // A configured cwd is seen (read-only unless also writable), or the process could not start in it.
    ...(p.cwd === p.processDir ? [] : [{ dest: p.cwd, args: ['--ro-bind', p.cwd, p.cwd] }]),
    { dest: '/proc', args: ['--proc', '/proc'] },
    { dest: '/dev', args: ['--dev', '/dev'] },
    { dest: '/tmp', args: ['--tmpfs', '/tmp'] },
    ...sandbox.writable.map((path) => ({ dest: path, args: ['--bind', path, path] })),
    { dest: p.processDir, args: ['--bind', p.processDir, p.processDir] },
  ];
  // Stable: at one depth, the order above (a writable path over a readable one, the process's directory last).
  mounts.sort((a, b) => depth(a.dest) - depth(b.dest));
  // The sandbox's own root (a tmpfs holding the mount points) is made read-only too: nothing is writable but what is bound so.
  return [...namespaces, ...mounts.flatMap((m) => m.args), '--remount-ro', '/', '--chdir', p.cwd, '--', p.command, ...p.args];
}
