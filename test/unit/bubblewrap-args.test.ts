// The bwrap command line of a sandboxed process: every namespace and --die-with-parent,
// capabilities dropped, a user namespace exactly when the process is not root, the network
// unshared only on request, mounts parents before children (a later mount hides what is under
// it, so a readable folder under /tmp must come after /tmp's tmpfs), nothing writable but
// `writable` and the process's own directory, and the command with its arguments after `--`,
// where bwrap reads no option.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { bubblewrapArgs, type SandboxedProcess } from '../../src/proxy/stdio/bubblewrap-args.js';
import type { StdioSandboxConfig } from '../../src/config/types.js';

const sandbox = (more: Partial<StdioSandboxConfig> = {}): StdioSandboxConfig => ({ kind: 'bubblewrap', readable: [], writable: [], network: true, ...more });
const processOf = (more: Partial<SandboxedProcess> = {}): SandboxedProcess => ({
  processDir: '/tmp/mag-stdio-abc',
  cwd: '/tmp/mag-stdio-abc',
  command: 'node',
  args: ['server.js'],
  unprivileged: false,
  ...more,
});

/** The mount operations before `--`: [option, ...operands]. */
function mounts(args: string[]): { op: string; src?: string; dest: string }[] {
  const end = args.indexOf('--');
  const found: { op: string; src?: string; dest: string }[] = [];
  for (let i = 0; i < end; i++) {
    const op = args[i]!;
    if (['--ro-bind', '--bind', '--symlink'].includes(op)) {
      found.push({ op, src: args[i + 1]!, dest: args[i + 2]! });
      i += 2;
    } else if (['--proc', '--dev', '--tmpfs', '--chdir', '--remount-ro'].includes(op)) {
      found.push({ op, dest: args[i + 1]! });
      i += 1;
    } else if (op === '--cap-drop') i += 1;
  }
  return found;
}

const isUnder = (path: string, parent: string) => parent === '/' || path === parent || path.startsWith(`${parent}/`);

describe('bubblewrapArgs', () => {
  it('namespaces, capabilities and the parent tie, always; the user namespace only for a non-root process; the network only on request', () => {
    const args = bubblewrapArgs(sandbox(), processOf());
    for (const flag of ['--die-with-parent', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try']) expect(args).toContain(flag);
    expect(args.slice(args.indexOf('--cap-drop'), args.indexOf('--cap-drop') + 2)).toEqual(['--cap-drop', 'ALL']);
    expect(args).not.toContain('--unshare-user');
    expect(args).not.toContain('--unshare-net');
    expect(bubblewrapArgs(sandbox(), processOf({ unprivileged: true }))).toContain('--unshare-user');
    expect(bubblewrapArgs(sandbox({ network: false }), processOf())).toContain('--unshare-net');
  });

  it('a fresh /proc, a minimal /dev, a private /tmp, the system set read-only, the process directory read-write and its cwd', () => {
    const found = mounts(bubblewrapArgs(sandbox(), processOf()));
    expect(found).toContainEqual({ op: '--proc', dest: '/proc' });
    expect(found).toContainEqual({ op: '--dev', dest: '/dev' });
    expect(found).toContainEqual({ op: '--tmpfs', dest: '/tmp' });
    expect(found).toContainEqual({ op: '--ro-bind', src: '/usr', dest: '/usr' });
    expect(found).toContainEqual({ op: '--bind', src: '/tmp/mag-stdio-abc', dest: '/tmp/mag-stdio-abc' });
    // Then the sandbox's own root is made read-only, and the process starts in its directory.
    expect(found.slice(-2)).toEqual([
      { op: '--remount-ro', dest: '/' },
      { op: '--chdir', dest: '/tmp/mag-stdio-abc' },
    ]);
    // Nothing of the gateway's own: no /root, /home, /var, /run, and /etc only file by file.
    for (const m of found.filter((m) => m.op === '--ro-bind' || m.op === '--bind')) expect(['/', '/etc', '/root', '/home', '/var', '/run', '/srv', '/opt']).not.toContain(m.dest);
  });

  it('a configured cwd is seen read-only, or read-write when it is also writable (the later, deeper-or-equal mount wins)', () => {
    const ro = mounts(bubblewrapArgs(sandbox(), processOf({ cwd: '/srv/app' })));
    expect(ro).toContainEqual({ op: '--ro-bind', src: '/srv/app', dest: '/srv/app' });
    const rw = mounts(bubblewrapArgs(sandbox({ writable: ['/srv/app'] }), processOf({ cwd: '/srv/app' })));
    const atCwd = rw.filter((m) => m.dest === '/srv/app' && m.op !== '--chdir');
    expect(atCwd.at(-1)?.op).toBe('--bind');
  });

  it('readable: ["/"] binds the whole root read-only first, instead of the system set', () => {
    const found = mounts(bubblewrapArgs(sandbox({ readable: ['/'] }), processOf()));
    expect(found[0]).toEqual({ op: '--ro-bind', src: '/', dest: '/' });
    expect(found.filter((m) => m.dest === '/usr')).toEqual([]);
  });

  const segment = fc.stringMatching(/^[a-z0-9._-]{1,8}$/).filter((s) => s !== '.' && s !== '..');
  const absolute = fc.array(segment, { minLength: 1, maxLength: 4 }).map((parts) => `/${parts.join('/')}`);
  const underTmp = absolute.map((p) => `/tmp${p}`);
  const anyPath = fc.oneof(absolute, underTmp, fc.constant('/'));

  it('property: parents are mounted before children, only writable paths and the process directory are bound read-write, and the command and its arguments follow -- verbatim', () => {
    fc.assert(
      fc.property(
        fc.array(anyPath, { maxLength: 6 }),
        fc.array(fc.oneof(absolute, underTmp), { maxLength: 4 }),
        fc.array(fc.string(), { maxLength: 5 }),
        fc.boolean(),
        fc.boolean(),
        (readable, writable, args, network, unprivileged) => {
          const out = bubblewrapArgs(sandbox({ readable, writable, network }), processOf({ args, unprivileged }));
          const found = mounts(out).filter((m) => m.op !== '--chdir' && m.op !== '--remount-ro');
          // A mount never comes after one below it: whatever a parent mount hides was mounted earlier.
          found.forEach((m, i) => {
            for (const later of found.slice(i + 1)) if (later.dest !== m.dest) expect(isUnder(m.dest, later.dest)).toBe(false);
          });
          const rw = found.filter((m) => m.op === '--bind').map((m) => m.dest);
          for (const dest of rw) expect([...writable, '/tmp/mag-stdio-abc']).toContain(dest);
          expect(rw).toContain('/tmp/mag-stdio-abc');
          expect(out.slice(out.indexOf('--') + 1)).toEqual(['node', ...args]);
          expect(out.includes('--unshare-user')).toBe(unprivileged);
          expect(out.includes('--unshare-net')).toBe(!network);
        },
      ),
      { numRuns: 300 },
    );
  });
});
