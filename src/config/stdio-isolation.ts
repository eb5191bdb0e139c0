// `upstream.stdio.sandbox` and `upstream.stdio.user` resolved at load: the
// sandbox's paths must exist (bubblewrap refuses a missing one at every
// spawn), the user's names are looked up, and a gateway that cannot switch
// users is refused here rather than at the first client. Whether bwrap itself
// works is checked when the routes are built (proxy/stdio/bubblewrap-check.ts).
import { existsSync } from 'node:fs';
import type { ConfigPath } from './yaml-file.js';
import type { StdioUpstreamFile } from './schema.js';
import type { StdioSandboxConfig, StdioUserConfig } from './types.js';
import { sessionPathProblem } from './sandbox-paths.js';
import { lookupGroup, lookupUser, thisProcessMissingCapabilities, USER_SWITCH_CAPABILITIES } from './os-users.js';

export interface IsolationProblem {
  /** Under `upstream.stdio`. */
  path: ConfigPath;
  message: string;
}

type Report = (problem: IsolationProblem) => void;

export function resolveSandbox(sandbox: StdioUpstreamFile['sandbox'], report: Report): StdioSandboxConfig | undefined {
  if (!sandbox) return undefined;
  for (const list of ['readable', 'writable'] as const) {
    sandbox[list].forEach((path, i) => {
      if (!existsSync(path)) report({ path: ['sandbox', list, i], message: `${path} does not exist (bubblewrap binds only what exists)` });
      const problem = sessionPathProblem(path);
      if (problem) report({ path: ['sandbox', list, i], message: problem });
    });
  }
  return { kind: sandbox.kind, readable: sandbox.readable, writable: sandbox.writable, network: sandbox.network };
}

export function resolveUser(user: StdioUpstreamFile['user'], report: Report, missing = thisProcessMissingCapabilities()): StdioUserConfig | undefined {
  if (!user) return undefined;
  if (missing.length > 0) {
    const message = `the gateway (uid ${process.geteuid?.()}) lacks ${missing.join(', ')}, so it cannot run processes as another user: run it as root, or grant ${Object.keys(USER_SWITCH_CAPABILITIES).join(', ')}; or drop user and run the whole gateway as a dedicated user`;
    report({ path: ['user'], message });
    return undefined;
  }
  const known = lookupUser(user.uid);
  if (!known && typeof user.uid === 'string') {
    report({ path: ['user', 'uid'], message: `no user ${user.uid} in /etc/passwd` });
    return undefined;
  }
  const uid = known?.uid ?? (user.uid as number);
  const gid = user.gid === undefined ? known?.gid : lookupGroup(user.gid);
  if (gid === undefined) {
    report({ path: ['user', 'gid'], message: user.gid === undefined ? `uid ${uid} is not in /etc/passwd: give gid` : `no group ${user.gid} in /etc/group` });
    return undefined;
  }
  if (uid === 0) report({ path: ['user', 'uid'], message: 'uid 0 is root: a process running as root is not isolated by its user' });
  return { uid, gid };
}
