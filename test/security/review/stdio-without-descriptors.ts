// Run under a low descriptor limit (`ulimit -n`) by k-stdio-descriptors.test.ts: for each number of
// descriptors left free, starts a stdio child and removes a process directory while the process has
// no more than that, and prints one JSON line per attempt. A spawn that fails for want of
// descriptors is an 'error' event on the next tick: unheard, it ends this process (exit 1), as it
// ended the gateway.
import { closeSync, openSync } from 'node:fs';
import type { StdioUpstreamConfig } from '../../../src/config/types.js';
import { createProcessDir, removeProcessDir } from '../../../src/proxy/stdio/process-dir.js';
import { StdioChild } from '../../../src/proxy/stdio/stdio-child.js';
import { StdioSession, type Answer } from '../../../src/proxy/stdio/stdio-session.js';

const frees = process.argv.slice(2).map(Number);
const quiet = () => undefined;
const logger = { debug: quiet, info: quiet, warn: quiet, error: quiet };
const config = { command: process.execPath, args: ['-e', ''], env: {}, inheritEnv: ['PATH'], resources: { processes: 256, memoryBytes: 1 << 30, cpus: 1 } } as unknown as StdioUpstreamConfig;

/** Takes every descriptor left, then gives back `free` of them; returns the rest, to close later. */
function exhaust(free: number): number[] {
  const held: number[] = [];
  try {
    for (;;) held.push(openSync('/dev/null', 'r'));
  } catch {
    // EMFILE: full.
  }
  for (let i = 0; i < free && held.length > 0; i++) closeSync(held.pop()!);
  return held;
}

for (const free of frees) {
  const outcome: Record<string, unknown> = { free };
  let held = exhaust(free);
  let child: StdioChild | undefined;
  // Wired as the process pool wires it: the process's exit ends its session.
  const session = new StdioSession('s', 'alice');
  const exited = new Promise<Record<string, unknown>>((resolve) => {
    try {
      const exit = (detail: Record<string, unknown>) => {
        session.end(detail.error === undefined ? 'Upstream process exited' : 'Upstream process could not start');
        resolve(detail);
      };
      child = new StdioChild(config, { route: '/r', session: 's', maxLineBytes: 1 << 20, logger, parentEnv: process.env }, { message: quiet, exit });
      session.child = child;
    } catch (err) {
      // Refused before any process existed (its cgroup or directory could not be made): the pool answers 500/503.
      resolve({ threw: (err as NodeJS.ErrnoException).code ?? String(err) });
    }
  });
  // A directory removal while nothing is left: its helper cannot start either.
  let dir: string | undefined;
  try {
    for (const fd of held.splice(0, 1)) closeSync(fd);
    dir = createProcessDir();
    held = held.concat(exhaust(0));
  } catch {
    dir = undefined;
  }
  const removed = dir === undefined ? Promise.resolve('not made') : new Promise<string>((resolve) => void removeProcessDir(dir!, (detail) => resolve(`failed: ${detail.split(':')[0]}`)).then(() => resolve('done')));
  outcome.exit = await exited;
  outcome.removal = await removed;
  // A request reaching a session whose process never started is answered now (502), not left to its timeout.
  if (child !== undefined) {
    let answered: unknown = 'left waiting';
    const answer: Answer = { outstanding: 0, streaming: false, respond: quiet, relay: () => false, fail: (error) => (answered = error.status) };
    session.send([{ jsonrpc: '2.0', id: 1, method: 'tools/list' }], answer);
    outcome.request = answered;
  }
  for (const fd of held) closeSync(fd);
  await child?.ended;
  console.log(JSON.stringify(outcome));
}
console.log(JSON.stringify({ alive: true }));
