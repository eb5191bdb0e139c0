// A stdio child's private directory (${PROCESS_DIR}), and its removal.
//
// Every directory lives under one root of this gateway process (0711, the
// gateway's): a child can reach its own directory by its path but can neither
// list its neighbours nor rename its own away and put a link in its place.
//
// Removal runs when the child is gone, never in its exit handler's stack and
// never on the event loop: whatever the child left (paths past PATH_MAX,
// thousands of files, symlink loops, FIFOs, unreadable directories) is
// removed by GNU `rm -rf --one-file-system` in a process of its own. rm walks
// the tree with fts over directory descriptors (openat), so no path is ever
// longer than one name, links are removed and never followed, special files
// are unlinked and never opened, and no mount the tree holds is crossed. A
// tree rm could not read (a child running as the gateway's own user can
// chmod 000 a directory; root reads it anyway) is made readable by `find -P`
// (never follows a link) and removed again. A removal that still fails is
// logged and counted, never thrown: the directory is left, the gateway goes on.
// At most a few removals run at once, so a mass exit cannot fork-bomb the host.
import { spawn } from 'node:child_process';
import { chmodSync, chownSync, mkdtempSync, rmdirSync } from 'node:fs';
import { lstat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PROCESS_DIR_ROOT_PREFIX } from '../../config/sandbox-paths.js';

/** Removals running at once; the others wait their turn. */
const CONCURRENT_REMOVALS = 4;
/** What is kept of a helper's stderr for the log. */
const STDERR_KEPT = 1_024;
/** The helpers are looked up here only: nothing of the gateway's PATH. */
const HELPER_ENV = { PATH: '/usr/bin:/bin', LC_ALL: 'C' };

let root: string | undefined;
/** Process directories made and not yet removed: the root goes with the last one. */
const live = new Set<string>();
let exitHookInstalled = false;

/** This gateway's root of session directories, made on first use, removed once empty (and at exit). */
export function processDirRoot(): string {
  if (root !== undefined) return root;
  root = mkdtempSync(join(tmpdir(), PROCESS_DIR_ROOT_PREFIX));
  chmodSync(root, 0o711);
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    process.once('exit', removeRoot);
  }
  return root;
}

function removeRoot(): void {
  if (root === undefined) return;
  try {
    rmdirSync(root);
    root = undefined;
  } catch {
    // Not empty (a removal still running, or one that failed and was logged): left.
  }
}

/** A fresh directory (mode 0700) for one process; owned by the process's user when it runs as another. */
export function createProcessDir(user?: { uid: number; gid: number }): string {
  const dir = mkdtempSync(join(processDirRoot(), 's-'));
  live.add(dir);
  if (user) chownSync(dir, user.uid, user.gid);
  return dir;
}

/** A process directory is gone (or given up on): with the last one, the root goes too (made again by the next). */
function dirGone(dir: string): void {
  if (live.delete(dir) && live.size === 0) removeRoot();
}

interface HelperOutcome {
  ok: boolean;
  detail: string;
}

/** Runs a helper to its end; never rejects (a helper that cannot start is an outcome too). */
function runHelper(command: string, args: string[]): Promise<HelperOutcome> {
  return new Promise((resolve) => {
    let stderr = '';
    try {
      const helper = spawn(command, args, { env: HELPER_ENV, stdio: ['ignore', 'ignore', 'pipe'], windowsHide: true });
      // First: out of descriptors, the spawn's failure is an 'error' event on the next tick (fatal
      // with no listener) and there is no stderr pipe at all.
      helper.once('error', (err) => resolve({ ok: false, detail: `${command}: ${err.message}` }));
      helper.once('close', (code, signal) => resolve({ ok: code === 0, detail: stderr.trim() || `${command} exited with ${code ?? signal}` }));
      helper.stderr?.on('data', (chunk: Buffer) => {
        if (stderr.length < STDERR_KEPT) stderr += chunk.toString('utf8').slice(0, STDERR_KEPT - stderr.length);
      });
    } catch (err) {
      resolve({ ok: false, detail: `${command}: ${(err as Error).message}` });
    }
  });
}

const exists = (path: string) =>
  lstat(path).then(
    () => true,
    (err: NodeJS.ErrnoException) => err.code !== 'ENOENT',
  );

let running = 0;
const queue: Array<() => void> = [];

/** One removal at a time per slot: the slot passes straight to the next waiter. */
async function inTurn<T>(work: () => Promise<T>): Promise<T> {
  if (running >= CONCURRENT_REMOVALS) await new Promise<void>((resolve) => queue.push(resolve));
  else running++;
  try {
    return await work();
  } finally {
    const next = queue.shift();
    if (next) next();
    else running--;
  }
}

async function removeTree(dir: string): Promise<HelperOutcome> {
  const first = await runHelper('rm', ['-rf', '--one-file-system', '--', dir]);
  if (first.ok || !(await exists(dir))) return { ok: true, detail: '' };
  // Unreadable directories: each made rwx for its owner just before find descends into it.
  await runHelper('find', ['-P', dir, '-type', 'd', '!', '-perm', '-u=rwx', '-execdir', 'chmod', 'u+rwx', '{}', ';']);
  const second = await runHelper('rm', ['-rf', '--one-file-system', '--', dir]);
  if (second.ok || !(await exists(dir))) return { ok: true, detail: '' };
  return { ok: false, detail: second.detail };
}

/**
 * Removes a process's directory and all it holds. Resolves (never rejects)
 * once done; `failed` is told why when the directory could not be removed.
 */
export function removeProcessDir(dir: string, failed: (detail: string) => void): Promise<void> {
  return inTurn(() => removeTree(dir)).then(
    (outcome) => {
      dirGone(dir);
      if (!outcome.ok) failed(outcome.detail);
    },
    (err: unknown) => failed(String(err)),
  )
    // Whatever the report itself throws (a logger, a metric) is not allowed to become an unhandled rejection.
    .catch(() => undefined);
}
