// What is actually executed for one process: the configured command itself,
// or bwrap with the command inside its sandbox (upstream.stdio.sandbox); and
// as whom (upstream.stdio.user, node's spawn uid/gid: libuv also drops the
// supplementary groups). The environment is the same either way. A process
// contained by a cgroup (containment.ts) starts behind the gate, which runs
// the command once the process is in its cgroup.
import { accessSync, constants, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { StdioUpstreamConfig } from '../../config/types.js';
import { bubblewrapArgs } from './bubblewrap-args.js';
import { findBubblewrap } from './bubblewrap-check.js';
import { GATE_SCRIPT, GATE_SHELL } from './containment.js';
import { childArguments } from './process-env.js';

export interface SpawnPlan {
  command: string;
  args: string[];
  cwd: string;
  uid?: number;
  gid?: number;
  /** Started behind the gate: fd 3 says when it may run the command. */
  gated: boolean;
}

let bwrap: string | undefined;

const executable = (path: string) => {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
};

/** The file spawn would execute for `command` (a bare name looked up in the child's PATH, else /usr/bin:/bin, as libuv does), or undefined. */
export function resolveCommand(command: string, env: Record<string, string>, cwd: string): string | undefined {
  if (command.includes('/')) return executable(resolve(cwd, command)) ? resolve(cwd, command) : undefined;
  for (const dir of (env.PATH ?? '/usr/bin:/bin').split(':')) {
    const candidate = join(isAbsolute(dir) ? dir : resolve(cwd, dir || '.'), command);
    if (executable(candidate)) return candidate;
  }
  return undefined;
}

export function spawnPlan(config: StdioUpstreamConfig, processDir: string, env: Record<string, string>, gate: boolean): SpawnPlan {
  const command = config.command;
  const args = childArguments(config, processDir);
  const cwd = config.cwd ?? processDir;
  const as = config.user && { uid: config.user.uid, gid: config.user.gid };
  if (config.sandbox) {
    // Checked when the routes were built (bubblewrap-check.ts); if it went since, the spawn fails and says so.
    bwrap ??= findBubblewrap() ?? 'bwrap';
    const unprivileged = (config.user?.uid ?? process.geteuid?.()) !== 0;
    return { command: bwrap, args: bubblewrapArgs(config.sandbox, { processDir, cwd, command, args, unprivileged }), cwd: processDir, ...as, gated: false };
  }
  // A command that cannot be found is spawned as it is: it fails to start (ENOENT) as it always did, and nothing ran to contain.
  const file = gate ? resolveCommand(command, env, cwd) : undefined;
  if (file === undefined) return { command, args, cwd, ...as, gated: false };
  return { command: GATE_SHELL, args: ['-c', GATE_SCRIPT, 'mag-stdio-gate', file, ...args], cwd, ...as, gated: true };
}
