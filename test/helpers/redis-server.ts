// A throw-away redis-server for tests: its own free port, no persistence,
// loopback only. `pause` stops the process (SIGSTOP: a hung, not a dead,
// server, as DEBUG SLEEP would be, but one a test can `resume` as soon as it
// has seen what it wanted rather than waiting the whole pause out); `kill` and
// `restart` simulate an outage on the same port.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { createServer, createConnection } from 'node:net';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';

export interface RedisServer {
  url: string;
  port: number;
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>;
  /** Block the server for up to `ms` (SIGSTOP, SIGCONT after `ms`); resolves once it is stopped. */
  pause(ms: number): Promise<void>;
  /** End a pause now (SIGCONT) and wait until the server answers PING; at once when it is not paused. */
  resume(): Promise<void>;
  /** SIGKILL and wait for exit: the connection drops without a goodbye. */
  kill(): Promise<void>;
  /** Start again on the same port and wait until it answers PING. */
  restart(): Promise<void>;
}

const BINARY = '/usr/bin/redis-server';
const live = new Set<ChildProcess>();
process.once('exit', () => live.forEach((p) => p.kill('SIGKILL')));

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** Send one inline command; resolves with the first reply chunk. */
function command(port: number, line: string, timeoutMs = 500): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error('timeout')));
    socket.once('error', reject);
    socket.once('connect', () => socket.write(`${line}\r\n`));
    socket.once('data', (data) => {
      socket.end();
      resolve(data.toString());
    });
  });
}

async function waitForPing(port: number, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`redis-server exited with ${child.exitCode}`);
    if ((await command(port, 'PING').catch(() => '')).startsWith('+PONG')) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('redis-server did not answer PING within 10 s');
}

/** The process state letter in /proc (T: stopped). */
function processState(pid: number): string {
  return /\) (\S)/.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1] ?? '?';
}

function majorVersion(): number {
  const out = execFileSync(BINARY, ['--version'], { encoding: 'utf8' });
  return Number(/v=(\d+)/.exec(out)?.[1] ?? 0);
}

/**
 * `extraArgs` are more config directives, e.g. `['--rename-command', 'GETDEL', '']`; `env` is added to
 * the server's environment (redis-clock.ts preloads libfaketime through it).
 */
export async function startRedisServer(extraArgs: string[] = [], env: NodeJS.ProcessEnv = {}): Promise<RedisServer> {
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmpdir()];
  // Redis 7 refuses DEBUG unless enabled; older versions do not know the option.
  if (majorVersion() >= 7) args.push('--enable-debug-command', 'local');
  args.push(...extraArgs);

  let child: ChildProcess;
  let wake: NodeJS.Timeout | undefined;
  const resume = () => {
    clearTimeout(wake);
    if (wake !== undefined && child.exitCode === null) child.kill('SIGCONT');
    wake = undefined;
  };
  const start = async () => {
    resume();
    child = spawn(BINARY, args, { stdio: 'ignore', env: { ...process.env, ...env } });
    live.add(child);
    child.once('exit', () => live.delete(child));
    await waitForPing(port, child);
  };
  const signal = async (sig: NodeJS.Signals) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    resume(); // a stopped process would hold SIGTERM until continued
    const exited = once(child, 'exit');
    child.kill(sig);
    await exited;
  };
  await start();

  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop: () => signal('SIGTERM'),
    kill: () => signal('SIGKILL'),
    restart: start,
    async pause(ms) {
      resume();
      child.kill('SIGSTOP');
      wake = setTimeout(resume, ms);
      wake.unref();
      while (processState(child.pid!) !== 'T') await new Promise((r) => setTimeout(r, 5));
    },
    async resume() {
      if (wake === undefined) return;
      resume();
      await waitForPing(port, child);
    },
  };
}
