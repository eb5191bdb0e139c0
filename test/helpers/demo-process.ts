// `mcp-auth-gateway demo` as a user runs it: the CLI through tsx, a separate process in an empty
// directory, on a free PORT; ready once it prints its MCP URL.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './net.js';

const require = createRequire(import.meta.url);
const tsxLoader = require.resolve('tsx');
const cli = new URL('../../src/cli.ts', import.meta.url).pathname;

export interface DemoProcess {
  /** The printed `MCP server URL` (the /demo/mcp route). */
  mcpUrl: string;
  child: ChildProcess;
  /** Everything it printed on stdout so far. */
  stdout(): string;
  /** SIGTERM (then SIGKILL after 10 s), and removes its directory. */
  stop(): Promise<void>;
}

export async function startDemo(): Promise<DemoProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'mag-demo-'));
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', tsxLoader, '-e', `import(${JSON.stringify(cli)}).then((m) => m.main(['demo'])).then((c) => { if (typeof c === 'number') process.exit(c); })`], {
    cwd: dir,
    env: { ...process.env, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Its audit lines go to stderr; not what the tests read.
  child.stderr!.resume();
  let stdout = '';
  const mcpUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`demo did not start:\n${stdout}`)), 30_000);
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      const url = /MCP server URL:\s+(\S+)/.exec(stdout)?.[1];
      if (url) {
        clearTimeout(timer);
        resolve(url);
      }
    });
    child.once('exit', (code) => reject(new Error(`demo exited with ${code}:\n${stdout}`)));
  });
  return {
    mcpUrl,
    child,
    stdout: () => stdout,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
