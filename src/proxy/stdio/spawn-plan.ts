// What is actually executed for one process: the configured command itself,
// or bwrap with the command inside its sandbox (upstream.stdio.sandbox); and
// as whom (upstream.stdio.user, node's spawn uid/gid: libuv also drops the
// supplementary groups). The environment is the same either way. A process
// contained by a cgroup (containment.ts) starts behind the gate, which runs
// the command once the process is in its cgroup. Resource bounds no cgroup
// holds are set as rlimits by /bin/sh before the command (resource-limits.ts).
import { accessSync, constants, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import type { StdioUpstreamConfig } from '../../config/types.js';
import { bubblewrapArgs } from './bubblewrap-args.js';
import { findBubblewrap } from './bubblewrap-check.js';
import { cellResources, GATE_SHELL, gateScript, rlimitScript } from './containment.js';
import { rlimitCommands } from './resource-limits.js';
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
  const rlimits = rlimitCommands(config, gate ? cellResources(config) : new Set());
  if (config.sandbox) {
    // Checked when the routes were built (bubblewrap-check.ts); if it went since, the spawn fails and says so.
    bwrap ??= findBubblewrap() ?? 'bwrap';
    const unprivileged = (config.user?.uid ?? process.geteuid?.()) !== 0;
    const sandboxed = bubblewrapArgs(config.sandbox, { processDir, cwd, command, args, unprivileged });
    // bubblewrap and all in its sandbox inherit the rlimits.
    if (rlimits !== '') return { command: GATE_SHELL, args: ['-c', rlimitScript(rlimits), 'mag-stdio-limits', bwrap, ...sandboxed], cwd: processDir, ...as, gated: false };
    return { command: bwrap, args: sandboxed, cwd: processDir, ...as, gated: false };
  }
  // A command that cannot be found is spawned as it is: it fails to start (ENOENT) as it always did, and nothing ran to contain.
  const file = gate || rlimits !== '' ? resolveCommand(command, env, cwd) : undefined;
  if (file === undefined) return { command, args, cwd, ...as, gated: false };
  if (!gate) return { command: GATE_SHELL, args: ['-c', rlimitScript(rlimits), 'mag-stdio-limits', file, ...args], cwd, ...as, gated: false };
  return { command: GATE_SHELL, args: ['-c', gateScript(rlimits), 'mag-stdio-gate', file, ...args], cwd, ...as, gated: true };
}
