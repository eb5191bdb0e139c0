/**
 * [K80] (review of issue 26): a gateway out of file descriptors ended at the next stdio spawn. One
 * user holding long tool calls open on an HTTP route brought a gateway with a limit of 300
 * descriptors to its limit; the next `initialize` on a stdio route answered 500 and the process
 * exited 1: Node sets up no pipes when `spawn` fails with EMFILE, so `child.stdout.on` threw
 * before the 'error' listener was attached, and the 'error' event of the next tick, unheard, was
 * fatal (`Error: spawn /bin/sh EMFILE ... Unhandled 'error' event`). The directory removal's
 * helper (`rm`) had the same order. Now the listeners come first and a child without pipes ends
 * as a process that could not start: the request gets 502 at once and the gateway stays up.
 *
 * The fixture runs under `ulimit -n 64` and, for every number of descriptors left free from 0
 * to 12 (below and above the six a child's three pipes take), starts a child and removes a
 * process directory. Fails without the fix: the fixture exits 1 at the first attempt.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const FIXTURE = join(import.meta.dirname, 'review/stdio-without-descriptors.ts');
const FREE = Array.from({ length: 13 }, (_, i) => i);

interface Attempt {
  free: number;
  exit: { code?: number | null; error?: string; threw?: string };
  removal: string;
  request?: unknown;
}

describe('[K80] a gateway out of file descriptors stays up when a stdio child cannot start', () => {
  it('[K80] for 0 to 12 descriptors left: each child ends as not started (EMFILE) or runs, its request gets 502 at once, and the process lives on', async () => {
    const command = `ulimit -n 64 && exec "${process.execPath}" --import tsx "${FIXTURE}" ${FREE.join(' ')}`;
    const run = await promisify(execFile)('sh', ['-c', command], { cwd: join(import.meta.dirname, '../..'), timeout: 60_000 }).then(
      (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
      (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
    );
    expect(run.stderr).not.toMatch(/Unhandled 'error' event/);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l) as Attempt & { alive?: boolean });
    expect(lines.at(-1)).toEqual({ alive: true });
    const attempts = lines.slice(0, -1);
    expect(attempts.map((a) => a.free)).toEqual(FREE);
    for (const a of attempts) {
      const notStarted = a.exit.error === 'EMFILE' || a.exit.error === 'ENFILE';
      expect(notStarted || a.exit.code === 0 || a.exit.threw !== undefined, JSON.stringify(a)).toBe(true);
      if (a.exit.threw === undefined) expect(a.request, JSON.stringify(a)).toBe(502);
    }
    // The class is exercised: some attempts were out of descriptors, and with enough left the child ran.
    expect(attempts.some((a) => a.exit.error === 'EMFILE')).toBe(true);
    expect(attempts.at(-1)!.exit.code).toBe(0);
  }, 90_000);
});
