// Where a stdio route's `command` is found, as the process will look for it:
// a name is searched in the process's own PATH (its `env`, else `inherit_env`,
// else the system's default: libuv and execvp both fall back to /usr/bin:/bin),
// a path is taken relative to the process's working directory. In a sandbox
// the program must also lie under a path the sandbox binds. `check` says what
// this finds; the pool says it again when a spawn fails.
import { accessSync, constants, realpathSync } from 'node:fs';
import { delimiter, isAbsolute, join, resolve } from 'node:path';
import type { ConfigIssue } from '../../config/config-error.js';
import type { RouteConfig, StdioUpstreamConfig } from '../../config/types.js';
import { SYSTEM_DIRS } from './bubblewrap-args.js';

export const DEFAULT_PATH = '/usr/bin:/bin';

/** The PATH the process searches its command in. */
export function childPath(config: StdioUpstreamConfig, parentEnv: NodeJS.ProcessEnv): string {
  const inherited = config.inheritEnv.includes('PATH') ? parentEnv.PATH : undefined;
  return config.env.PATH ?? inherited ?? DEFAULT_PATH;
}

const executable = (file: string) => {
  try {
    accessSync(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

export type CommandResolution = { found: string } | { problem: string };

/** The program that would run, or why none would (named, with where it was looked for). */
export function resolveCommand(config: StdioUpstreamConfig, parentEnv: NodeJS.ProcessEnv = process.env): CommandResolution {
  const { command } = config;
  let found: string | undefined;
  if (command.includes('/')) {
    if (!isAbsolute(command) && config.cwd === undefined) return { problem: `command ${JSON.stringify(command)} is a relative path, and the process starts in its own empty directory: give an absolute path or cwd` };
    const file = resolve(config.cwd ?? '/', command);
    if (!executable(file)) return { problem: `command ${JSON.stringify(command)}: ${file} does not exist or is not executable` };
    found = file;
  } else {
    const path = childPath(config, parentEnv);
    found = path.split(delimiter).filter((dir) => isAbsolute(dir)).map((dir) => join(dir, command)).find(executable);
    if (found === undefined) return { problem: `command ${JSON.stringify(command)} is not found in the process's PATH (${path}; set by upstream.stdio.env or inherit_env)` };
  }
  const sandbox = config.sandbox;
  if (sandbox) {
    const visible = [...(sandbox.readable.includes('/') ? ['/'] : SYSTEM_DIRS), ...sandbox.readable, ...sandbox.writable, ...(config.cwd ? [config.cwd] : [])];
    const real = realpathSync(found);
    const hidden = [found, real].find((file) => !visible.some((dir) => dir === '/' || file === dir || file.startsWith(`${dir}/`)));
    if (hidden !== undefined) return { problem: `command ${JSON.stringify(command)} is ${hidden}, which the sandbox does not bind: add its directory to upstream.stdio.sandbox.readable` };
  }
  return { found };
}

/** Every stdio route whose command would not start, as configuration issues of its file (`check`). */
export function commandIssues(routes: readonly RouteConfig[], parentEnv: NodeJS.ProcessEnv = process.env): ConfigIssue[] {
  return routes.flatMap((route): ConfigIssue[] => {
    const resolution = route.stdio && resolveCommand(route.stdio, parentEnv);
    return resolution && 'problem' in resolution ? [{ file: route.file, line: 0, column: 0, message: `${route.path}: upstream.stdio: ${resolution.problem}` }] : [];
  });
}
