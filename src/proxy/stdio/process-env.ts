// What a child process starts with: only its configured `env` and the few
// `inherit_env` variables of the gateway's own environment (SECURITY: other
// routes' secrets, the gateway's keys and store URL never reach a child), and
// `${PROCESS_DIR}` replaced by the process's private directory. Nothing of the
// client (no token, no header) is ever part of it.
import type { StdioUpstreamConfig } from '../../config/types.js';

const PROCESS_DIR = /\$\{PROCESS_DIR\}/g;

/** `value` with every `${PROCESS_DIR}` replaced by `dir`. */
export const expandProcessDir = (value: string, dir: string): string => value.replace(PROCESS_DIR, () => dir);

/** The whole environment of one child: inherited names first, configured values over them. */
export function childEnvironment(config: StdioUpstreamConfig, processDir: string, parentEnv: NodeJS.ProcessEnv): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of config.inheritEnv) {
    const value = parentEnv[name];
    if (value !== undefined) env[name] = value;
  }
  for (const [name, value] of Object.entries(config.env)) env[name] = expandProcessDir(value, processDir);
  return env;
}

/** The arguments of one child, `${PROCESS_DIR}` replaced. */
export const childArguments = (config: StdioUpstreamConfig, processDir: string): string[] => config.args.map((a) => expandProcessDir(a, processDir));
