// Child processes of the benchmark (upstream, proxies, gateway, clients):
// started under a raised open-files limit, ready when they print a line the
// caller recognises, measured through /proc (CPU time, RSS) and stopped by pid.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** Children run from the repository root, so relative paths and `--import tsx` resolve there. */
export const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface SpawnOptions {
  env?: NodeJS.ProcessEnv;
  /** Open-files limit to ask for; the hard limit is used when it is lower (and the process is not root). */
  nofile?: number;
  /** Recognises the ready line on stdout and returns what the caller wants from it. */
  ready?: (line: string) => unknown;
  /** For processes that print nothing when ready (nginx): polled until it resolves to a value. */
  probe?: () => Promise<unknown>;
  readyTimeoutMs?: number;
}

export interface ChildHandle {
  name: string;
  pid: number;
  child: ChildProcess;
  /** What `ready` returned for the ready line. */
  readyValue: unknown;
  /** Last lines of output (stdout and stderr), for error messages. */
  tail(): string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

const TAIL_LINES = 40;

/** Children still running: killed when the harness exits, however it exits, so none is left behind. */
const running = new Set<ChildProcess>();
process.once('exit', () => {
  // SIGTERM, not SIGKILL: nginx's master then stops its worker too.
  for (const child of running) child.kill('SIGTERM');
});

/** `sh` raises the limit, then execs the command: the pid stays the command's own. */
const RAISE_NOFILE = 'ulimit -n "$0" 2>/dev/null || ulimit -n "$(ulimit -Hn)"; exec "$@"';

export async function spawnReady(name: string, command: string, args: string[], options: SpawnOptions): Promise<ChildHandle> {
  const nofile = String(options.nofile ?? 65_536);
  const child = spawn('sh', ['-c', RAISE_NOFILE, nofile, command, ...args], {
    env: options.env ?? process.env,
    cwd: REPO_ROOT,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const remember = (line: string) => {
    lines.push(line);
    if (lines.length > TAIL_LINES) lines.shift();
  };
  running.add(child);
  const exited = new Promise<void>((resolve) =>
    child.once('exit', () => {
      running.delete(child);
      resolve();
    }),
  );
  const readyValue = await new Promise<unknown>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start in time:\n${lines.join('\n')}`)), options.readyTimeoutMs ?? 30_000);
    let pending = '';
    let isReady = false;
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      pending += chunk;
      let newline;
      while ((newline = pending.indexOf('\n')) !== -1) {
        const line = pending.slice(0, newline);
        pending = pending.slice(newline + 1);
        remember(line);
        if (isReady || !options.ready) continue;
        const value = options.ready(line);
        if (value !== undefined) {
          isReady = true;
          clearTimeout(timer);
          resolve(value);
        }
      }
    });
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => chunk.split('\n').filter(Boolean).forEach(remember));
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`${name} exited (${code ?? signal}) before it was ready:\n${lines.join('\n')}`));
    });
    const probe = options.probe;
    if (probe) {
      const poll = () => {
        if (isReady || child.exitCode !== null) return;
        probe().then(
          (value) => {
            if (value === undefined) return void setTimeout(poll, 50);
            isReady = true;
            clearTimeout(timer);
            resolve(value);
          },
          () => setTimeout(poll, 50),
        );
      };
      poll();
    }
  });
  return {
    name,
    pid: child.pid!,
    child,
    readyValue,
    tail: () => lines.join('\n'),
    async stop(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const killer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(killer);
    },
  };
}

/** A ready line of the form `{"ready":true,"port":N}` (the bench servers and clients). */
export function readyPort(line: string): number | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const parsed = JSON.parse(line) as { ready?: unknown; port?: unknown };
    return parsed.ready === true && typeof parsed.port === 'number' ? parsed.port : undefined;
  } catch {
    return undefined;
  }
}

let ticksPerSecond: number | undefined;
/** Clock ticks per second, the unit of /proc/<pid>/stat CPU times. */
export function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

interface ProcStat {
  ppid: number;
  cpuTicks: number;
}

function readStat(pid: number | string): ProcStat | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command name, which may itself hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(fields[1]), cpuTicks: Number(fields[11]) + Number(fields[12]) };
  } catch {
    return undefined;
  }
}

/** CPU seconds (user + system) used so far by a process and its direct children (nginx's workers); undefined off Linux. */
export function cpuSeconds(pid: number): number | undefined {
  const own = readStat(pid);
  if (!own) return undefined;
  let ticks = own.cpuTicks;
  for (const entry of readdirSync('/proc')) {
    if (!/^[0-9]+$/.test(entry)) continue;
    const stat = readStat(entry);
    if (stat?.ppid === pid) ticks += stat.cpuTicks;
  }
  return ticks / clockTicks();
}

/** Resident set size in bytes of one process; undefined off Linux. */
export function rssBytes(pid: number): number | undefined {
  try {
    const match = /^VmRSS:\s+([0-9]+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** The soft open-files limit a process actually got. */
export function openFilesLimit(pid: number): number | undefined {
  try {
    const match = /^Max open files\s+([0-9]+|unlimited)/m.exec(readFileSync(`/proc/${pid}/limits`, 'utf8'));
    return match ? (match[1] === 'unlimited' ? Infinity : Number(match[1])) : undefined;
  } catch {
    return undefined;
  }
}
