// Where the official MCP Python SDK lives for the tests, and how to get it: a
// virtualenv in test/tools/py/venv (git-ignored) with test/tools/py/requirements.txt.
import { execFileSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = join(dirname(fileURLToPath(import.meta.url)), 'py');
const venv = join(dir, 'venv');
const requirements = join(dir, 'requirements.txt');

/** The virtualenv's interpreter. */
export const venvPython = join(venv, 'bin', 'python');

/** The interpreter that creates the virtualenv (PYTHON overrides). */
const basePython = process.env.PYTHON ?? 'python3';

function sdkImports(): boolean {
  try {
    execFileSync(venvPython, ['-c', 'import mcp.client.auth'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Creates the virtualenv with the pinned SDK when it is missing or broken. Never skips: without
 * python3 (3.10+, as the SDK requires) it throws a message that says what to install.
 */
export function ensurePythonSdk(): void {
  if (existsSync(venvPython) && sdkImports()) return;
  try {
    execFileSync(basePython, ['-c', 'import sys, venv; assert sys.version_info >= (3, 10)'], { stdio: 'ignore' });
  } catch {
    throw new Error(
      `The Python SDK client test needs ${basePython} 3.10+ with the venv module (Debian: apt-get install -y python3 python3-venv); ` +
        'set PYTHON to another interpreter if it lives elsewhere.',
    );
  }
  rmSync(venv, { recursive: true, force: true });
  execFileSync(basePython, ['-m', 'venv', venv], { stdio: 'inherit' });
  execFileSync(join(venv, 'bin', 'pip'), ['install', '--quiet', '--retries', '0', '--timeout', '10', '-r', requirements], { stdio: 'inherit' });
  if (!sdkImports()) throw new Error(`pip installed ${requirements} into ${venv}, but mcp.client.auth does not import`);
}
