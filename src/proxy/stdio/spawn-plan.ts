// What is actually executed for one process: the configured command itself,
// or bwrap with the command inside its sandbox (upstream.stdio.sandbox); and
// as whom (upstream.stdio.user, node's spawn uid/gid: libuv also drops the
// supplementary groups). The environment is the same either way.
import type { StdioUpstreamConfig } from '../../config/types.js';
import { bubblewrapArgs } from './bubblewrap-args.js';
import { findBubblewrap } from './bubblewrap-check.js';
import { childArguments } from './process-env.js';

export interface SpawnPlan {
  command: string;
  args: string[];
  cwd: string;
  uid?: number;
  gid?: number;
}

let bwrap: string | undefined;

export function spawnPlan(config: StdioUpstreamConfig, processDir: string): SpawnPlan {
  const command = config.command;
  const args = childArguments(config, processDir);
  const cwd = config.cwd ?? processDir;
  const as = config.user && { uid: config.user.uid, gid: config.user.gid };
  if (!config.sandbox) return { command, args, cwd, ...as };
  // Checked when the routes were built (bubblewrap-check.ts); if it went since, the spawn fails and says so.
  bwrap ??= findBubblewrap() ?? 'bwrap';
  const unprivileged = (config.user?.uid ?? process.geteuid?.()) !== 0;
  return { command: bwrap, args: bubblewrapArgs(config.sandbox, { processDir, cwd, command, args, unprivileged }), cwd: processDir, ...as };
}
