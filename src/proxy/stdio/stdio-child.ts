// One child process speaking MCP over stdio: started in a fresh private (0700)
// directory with only its own environment, its stdout read as bounded lines of
// JSON-RPC, its stderr relayed to the log, and stopped with SIGTERM then
// SIGKILL. It runs in its own process group, so a launcher (npx, a shell) and
// the server it starts are stopped together (a sandboxed one too: bwrap and
// what it runs share the group). Its directory is removed when it ends.
import { spawn, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { StdioUpstreamConfig } from '../../config/types.js';
import { LineSplitter } from './line-splitter.js';
import { childEnvironment } from './process-env.js';
import { spawnPlan } from './spawn-plan.js';
import { StderrRelay } from './stderr-relay.js';
import type { StdioLogger } from './stdio-deps.js';

/** Between SIGTERM and SIGKILL. */
export const STOP_GRACE_MS = 2_000;

export interface ChildEvents {
  /** One parsed JSON-RPC message (an object or a batch array) from stdout. */
  message(message: unknown): void;
  /** The process is gone (exited, killed, or never started); called once. */
  exit(detail: { code: number | null; signal: string | null; error?: string }): void;
}

export interface ChildOptions {
  route: string;
  /** A tag for logs: the session id, or `stateless`. */
  session: string;
  maxLineBytes: number;
  logger: StdioLogger;
  parentEnv: NodeJS.ProcessEnv;
}

// Every child alive in this gateway, so none outlives it (see the exit hook below).
const alive = new Set<StdioChild>();
let exitHookInstalled = false;

/** A gateway that exits for any reason takes its children with it (SIGKILL to each group, synchronously). */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of alive) child.kill('SIGKILL');
  });
}

export class StdioChild {
  readonly processDir: string;
  readonly process: ChildProcess;
  private exited = false;
  private killTimer: NodeJS.Timeout | undefined;
  readonly ended: Promise<void>;

  constructor(config: StdioUpstreamConfig, options: ChildOptions, events: ChildEvents) {
    installExitHook();
    // mkdtemp creates the directory with mode 0700: the process's alone.
    this.processDir = mkdtempSync(join(tmpdir(), 'mag-stdio-'));
    // Another user's process gets its directory (still 0700: its alone).
    if (config.user) chownSync(this.processDir, config.user.uid, config.user.gid);
    const plan = spawnPlan(config, this.processDir);
    const child = spawn(plan.command, plan.args, {
      cwd: plan.cwd,
      ...(plan.uid !== undefined && { uid: plan.uid, gid: plan.gid }),
      env: childEnvironment(config, this.processDir, options.parentEnv),
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
      windowsHide: true,
    });
    this.process = child;
    alive.add(this);
    let resolveEnded!: () => void;
    this.ended = new Promise<void>((resolve) => (resolveEnded = resolve));
    const tags = { route: options.route, session: options.session, pid: child.pid };
    const finish = (detail: { code: number | null; signal: string | null; error?: string }) => {
      if (this.exited) return;
      this.exited = true;
      clearTimeout(this.killTimer);
      alive.delete(this);
      // The group may still hold a grandchild the launcher left behind.
      this.kill('SIGKILL');
      rmSync(this.processDir, { recursive: true, force: true });
      events.exit(detail);
      resolveEnded();
    };
    // Not JSON-RPC on stdout (a banner, debug output): logged as stderr is, bounded and rate-limited, never forwarded.
    const stdoutLog = new StderrRelay(options.logger, tags, 'stdout', 'not JSON-RPC, not forwarded: ');
    const stdout = new LineSplitter(options.maxLineBytes, {
      line: (text) => this.onLine(text, events, stdoutLog),
      overflow: () => {
        options.logger.warn(tags, 'stdio server wrote a message over the size limit: stopping it');
        this.stop();
      },
    });
    const stderr = new StderrRelay(options.logger, tags);
    child.stdout!.on('data', (chunk: Buffer) => stdout.push(chunk));
    child.stderr!.on('data', (chunk: Buffer) => stderr.push(chunk));
    // A write to a process that is going away fails with EPIPE: its exit says the rest.
    child.stdin!.on('error', () => undefined);
    child.on('error', (err) => finish({ code: null, signal: null, error: (err as NodeJS.ErrnoException).code ?? err.message }));
    child.on('exit', (code, signal) => finish({ code, signal }));
  }

  private onLine(text: string, events: ChildEvents, stdoutLog: StderrRelay): void {
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      message = undefined;
    }
    if (typeof message !== 'object' || message === null) {
      // Cut before the relay's own cut: a banner line needs no more to be recognised.
      stdoutLog.log(text.slice(0, 512));
      return;
    }
    events.message(message);
  }

  get pid(): number | undefined {
    return this.process.pid;
  }

  get running(): boolean {
    return !this.exited;
  }

  /** Writes one message as one line. */
  send(message: unknown): void {
    if (this.exited) return;
    this.process.stdin!.write(`${JSON.stringify(message)}\n`);
  }

  /** SIGTERM to the group (stdin closed too, which ends most stdio servers), SIGKILL after the grace. */
  stop(graceMs = STOP_GRACE_MS): Promise<void> {
    if (this.exited) return this.ended;
    this.process.stdin!.end();
    this.kill('SIGTERM');
    this.killTimer ??= setTimeout(() => this.kill('SIGKILL'), graceMs);
    this.killTimer.unref();
    return this.ended;
  }

  /** A signal to the process group (the child leads it: detached). */
  kill(signal: NodeJS.Signals): void {
    const pid = this.process.pid;
    if (pid === undefined) return;
    try {
      process.kill(-pid, signal);
    } catch {
      // Already gone.
    }
  }
}
