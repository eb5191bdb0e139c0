// Whether bubblewrap works here, asked once per sandbox setting and user when
// the routes are built (start, reload) and by `check`: bwrap found in the
// gateway's PATH, then a real sandbox with the route's own settings started
// around `true`. A route whose sandbox cannot work is refused before any
// client comes, with what to install or why the kernel said no.
import { execFile } from 'node:child_process';
import { accessSync, chownSync, constants, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { ConfigIssue } from '../../config/config-error.js';
import type { RouteConfig, StdioSandboxConfig, StdioUserConfig } from '../../config/types.js';
import { bubblewrapArgs } from './bubblewrap-args.js';

/** A probe that takes longer has hung (a sandbox starts in milliseconds). */
const PROBE_TIMEOUT_MS = 15_000;
export const BWRAP_MISSING = 'bubblewrap is not installed (no bwrap in the PATH): install the package bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), or remove sandbox';

/** bwrap's absolute path in this PATH, or undefined. */
export function findBubblewrap(pathVariable = process.env.PATH ?? ''): string | undefined {
  for (const dir of pathVariable.split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, 'bwrap');
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/** The first meaningful line of bwrap's complaint, bounded. */
const firstLine = (text: string) => (text.split('\n').find((l) => l.trim() !== '') ?? '').slice(0, 300);

/** Starts one sandbox with these settings around `true`: undefined when it worked, else why not. */
function probe(bwrap: string, sandbox: StdioSandboxConfig, user: StdioUserConfig | undefined): Promise<string | undefined> {
  const processDir = mkdtempSync(join(tmpdir(), 'mag-bwrap-probe-'));
  if (user) chownSync(processDir, user.uid, user.gid);
  const unprivileged = (user?.uid ?? process.geteuid?.()) !== 0;
  const args = bubblewrapArgs(sandbox, { processDir, cwd: processDir, command: 'true', args: [], unprivileged });
  return new Promise((resolve) => {
    execFile(bwrap, args, { env: { PATH: '/usr/bin:/bin' }, timeout: PROBE_TIMEOUT_MS, ...(user && { uid: user.uid, gid: user.gid }) }, (err, _stdout, stderr) => {
      rmSync(processDir, { recursive: true, force: true });
      if (!err) return resolve(undefined);
      const said = firstLine(stderr) || err.message;
      const hint = unprivileged ? ' (an unprivileged sandbox needs user namespaces: in a container they are often off; see docs/upstreams.md, isolating stdio servers)' : '';
      resolve(`bwrap could not start a sandbox${user ? ` as uid ${user.uid}` : ''}: ${said}${hint}`);
    });
  });
}

const probes = new Map<string, Promise<string | undefined>>();

/** Why this sandbox cannot work here, or undefined; asked once per setting for the life of the process. */
export function sandboxProblem(sandbox: StdioSandboxConfig, user: StdioUserConfig | undefined, pathVariable = process.env.PATH ?? ''): Promise<string | undefined> {
  const bwrap = findBubblewrap(pathVariable);
  if (bwrap === undefined) return Promise.resolve(BWRAP_MISSING);
  const key = JSON.stringify([bwrap, sandbox, user]);
  let answer = probes.get(key);
  if (!answer) {
    answer = probe(bwrap, sandbox, user);
    probes.set(key, answer);
  }
  return answer;
}

/** Every sandboxed stdio route whose sandbox cannot work here, as configuration issues of its file. */
export async function sandboxIssues(routes: RouteConfig[], pathVariable?: string): Promise<ConfigIssue[]> {
  const found = await Promise.all(
    routes.map(async (route): Promise<ConfigIssue[]> => {
      const sandbox = route.stdio?.sandbox;
      const message = sandbox && (await sandboxProblem(sandbox, route.stdio?.user, pathVariable));
      return message ? [{ file: route.file, line: 0, column: 0, message: `${route.path}: upstream.stdio.sandbox: ${message}` }] : [];
    }),
  );
  return found.flat();
}
