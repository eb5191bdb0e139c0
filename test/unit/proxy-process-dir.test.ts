/**
 * A stdio process's directory and its removal (src/proxy/stdio/process-dir.ts): a fast-check
 * property over random trees — nesting past PATH_MAX (built one relative step at a time, as a
 * child would), names up to 255 bytes, symlink loops and links out of the tree, FIFOs, empty and
 * unreadable directories — removal always resolves, never rejects, leaves nothing, reports no
 * failure, and never touches what a link pointed at. Beside it: a directory that cannot be
 * removed is reported (with why), not thrown.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { createProcessDir, processDirRoot, removeProcessDir } from '../../src/proxy/stdio/process-dir.js';

type Entry =
  | { kind: 'file'; name: string }
  | { kind: 'fifo'; name: string }
  | { kind: 'loop'; name: string }
  | { kind: 'outside'; name: string }
  | { kind: 'dir'; name: string; locked: boolean; children: Entry[] }
  | { kind: 'chain'; name: string; bytes: number };

const name = fc.oneof(fc.stringMatching(/^[a-z]{1,12}$/), fc.integer({ min: 200, max: 255 }).map((n) => 'n'.repeat(n)));
const leaf: fc.Arbitrary<Entry> = fc.oneof(
  fc.record({ kind: fc.constant('file' as const), name }),
  fc.record({ kind: fc.constant('fifo' as const), name }),
  fc.record({ kind: fc.constant('loop' as const), name }),
  fc.record({ kind: fc.constant('outside' as const), name }),
  fc.record({ kind: fc.constant('chain' as const), name, bytes: fc.integer({ min: 100, max: 6_000 }) }),
);
/** Entries of one directory: their names differ, as a directory's do (two alike made the build throw EEXIST). */
const siblings = (entry: fc.Arbitrary<Entry>, minLength: number, maxLength: number) =>
  fc.uniqueArray(entry, { selector: (e) => e.name, minLength, maxLength });
const tree = fc.letrec<{ entry: Entry }>((tie) => ({
  entry: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    leaf,
    fc.record({ kind: fc.constant('dir' as const), name, locked: fc.boolean(), children: siblings(tie('entry'), 0, 4) }),
  ),
})).entry;

/** A canary outside the tree that links point at: it must survive every removal. */
const outside = mkdtempSync(join(tmpdir(), 'mag-process-dir-canary-'));
writeFileSync(join(outside, 'canary'), 'keep me');
afterAll(() => rmSync(outside, { recursive: true, force: true }));

/** Builds `entry` in the working directory `cwd` (relative steps only: paths past PATH_MAX never reach a syscall). */
function build(cwd: string, entry: Entry): void {
  const here = process.cwd();
  process.chdir(cwd);
  try {
    if (entry.kind === 'file') writeFileSync(entry.name, 'x');
    else if (entry.kind === 'fifo') execFileSync('mkfifo', [entry.name]);
    else if (entry.kind === 'loop') symlinkSync(entry.name, entry.name);
    else if (entry.kind === 'outside') symlinkSync(outside, entry.name);
    else if (entry.kind === 'chain') {
      mkdirSync(entry.name);
      process.chdir(entry.name);
      for (let made = 0; made < entry.bytes; made += 201) {
        mkdirSync('c'.repeat(200));
        process.chdir('c'.repeat(200));
      }
      writeFileSync('end', 'x');
    } else {
      mkdirSync(entry.name);
      for (const child of entry.children) build(join(process.cwd(), entry.name), child);
      if (entry.locked) chmodSync(entry.name, 0o000);
    }
  } finally {
    process.chdir(here);
  }
}

describe('process directories', () => {
  it('live under one root of the gateway (0711): a child reaches its own, lists no other', () => {
    const dir = createProcessDir();
    expect(dir.startsWith(`${processDirRoot()}/`)).toBe(true);
    expect(statSync(processDirRoot()).mode & 0o777).toBe(0o711);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  it('the root goes with the last directory in it (a gateway that ends without its exit hook leaves nothing), and comes back with the next', async () => {
    const root = processDirRoot();
    const dirs = readdirSync(root).map((name) => join(root, name));
    const another = createProcessDir();
    for (const dir of [...dirs, another]) await removeProcessDir(dir, () => undefined);
    expect(existsSync(root)).toBe(false);
    const next = createProcessDir();
    expect(existsSync(next)).toBe(true);
    await removeProcessDir(next, () => undefined);
    expect(existsSync(join(next, '..'))).toBe(false);
  });

  it('removal of any tree resolves, leaves nothing, reports nothing, and never follows a link out', async () => {
    await fc.assert(
      fc.asyncProperty(siblings(tree, 1, 5), async (entries) => {
        const dir = createProcessDir();
        for (const entry of entries) build(dir, entry);
        const failures: string[] = [];
        await removeProcessDir(dir, (detail) => failures.push(detail));
        expect(failures).toEqual([]);
        expect(existsSync(dir)).toBe(false);
        expect(readdirSync(outside)).toEqual(['canary']);
      }),
      { numRuns: 25 },
    );
  }, 120_000);

  it('a directory that cannot be removed is reported with why, never thrown', async () => {
    const failures: string[] = [];
    // /proc entries cannot be unlinked by anyone.
    await expect(removeProcessDir('/proc/self/fdinfo', (detail) => failures.push(detail))).resolves.toBeUndefined();
    expect(failures).toHaveLength(1);
    expect(failures[0]).toMatch(/rm|cannot|Permission|Operation/);
  });
});
