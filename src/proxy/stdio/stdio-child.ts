// One child process speaking MCP over stdio: started in a fresh private (0700)
// directory with only its own environment, its stdout read as bounded lines of
// JSON-RPC, its stderr relayed to the log, and stopped with SIGTERM then
// SIGKILL. It runs in its own process group, so a launcher (npx, a shell) and
// the server it starts are stopped together (a sandboxed one too: bwrap and
// what it runs share the group); what left the group is ended with it by its
// containment (containment.ts). When it is gone, its directory is removed in
// the background (process-dir.ts): nothing there runs on this stack or throws.
import { spawn, type ChildProcess } from 'node:child_process';
import type { Writable } from 'node:stream';
import type { StdioUpstreamConfig } from '../../config/types.js';
import { containmentOf, createCell, type CgroupCell } from './containment.js';
import { LineSplitter } from './line-splitter.js';
import { createProcessDir, removeProcessDir } from './process-dir.js';
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
  /**
   * The gateway is stopping the process for what it did (stdin left unread past its share, a line
   * over the limit, output that could not be handled); called once, before the signal. Its session
   * ends now, not when the exit is seen: a request in between would reach a process already dying.
   */
  fault?(): void;
}

export interface ChildOptions {
  route: string;
  /** A tag for logs: the session id, or `stateless`. */
  session: string;
  maxLineBytes: number;
  logger: StdioLogger;
  parentEnv: NodeJS.ProcessEnv;
  /** Its directory or cgroup could not be removed (logged already): counted. */
  cleanupFailed?: () => void;
}

/** A process leaving more than this many times max_body_bytes unread on its stdin is stopped, not buffered for. */
const UNREAD_STDIN_FACTOR = 4;

// Every child alive in this gateway, so none outlives it (see the exit hook below).
const alive = new Set<StdioChild>();
let exitHookInstalled = false;

/** A gateway that exits for any reason takes its children with it (SIGKILL to each group, synchronously). */
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of alive) {
      child.kill('SIGKILL');
      child.cell?.killAll();
    }
  });
}

export class StdioChild {
  readonly processDir: string;
  readonly process: ChildProcess;
  /** Its cgroup, when the route's processes are contained by one. */
  readonly cell: CgroupCell | undefined;
  private exited = false;
  private killTimer: NodeJS.Timeout | undefined;
  private readonly maxUnreadStdin: number;
  private readonly stdinFull: () => void;
  private readonly faulted: () => void;
  readonly ended: Promise<void>;

  constructor(config: StdioUpstreamConfig, options: ChildOptions, events: ChildEvents) {
    installExitHook();
    this.maxUnreadStdin = options.maxLineBytes * UNREAD_STDIN_FACTOR;
    // 0700, under the gateway's root of process directories; another user's process gets it as its own.
    this.processDir = createProcessDir(config.user);
    try {
      this.cell = containmentOf(config) === 'cgroup' ? createCell(config.resources) : undefined;
    } catch (err) {
      void removeProcessDir(this.processDir, () => undefined);
      throw err;
    }
    const env = childEnvironment(config, this.processDir, options.parentEnv);
    const plan = spawnPlan(config, this.processDir, env, this.cell !== undefined);
    const child = spawn(plan.command, plan.args, {
      cwd: plan.cwd,
      ...(plan.uid !== undefined && { uid: plan.uid, gid: plan.gid }),
      env,
      stdio: plan.gated ? ['pipe', 'pipe', 'pipe', 'pipe'] : ['pipe', 'pipe', 'pipe'],
      detached: true,
      windowsHide: true,
    });
    this.process = child;
    alive.add(this);
    let resolveEnded!: () => void;
    this.ended = new Promise<void>((resolve) => (resolveEnded = resolve));
    const tags = { route: options.route, session: options.session, pid: child.pid };
    this.stdinFull = () => options.logger.warn({ ...tags, unread: this.maxUnreadStdin }, 'stdio server does not read its stdin: stopping it');
    this.faulted = this.stopForFault(events, options.logger, tags);
    const finish = (detail: { code: number | null; signal: string | null; error?: string }) => {
      if (this.exited) return;
      this.exited = true;
      clearTimeout(this.killTimer);
      alive.delete(this);
      // The group may still hold a grandchild the launcher left behind; the cell, one that left the group.
      this.kill('SIGKILL');
      this.cell?.killAll();
      try {
        events.exit(detail);
      } catch (err) {
        // An exit handler that throws here would be an uncaught exception: the whole gateway would go.
        options.logger.error({ ...tags, err }, 'stdio process exit handling failed');
      }
      void this.cleanUp(options, tags).then(resolveEnded);
    };
    // First, before anything that could throw: a spawn that failed (EMFILE, ENOENT) is an 'error'
    // event on the next tick, which with no listener would end the whole gateway.
    child.on('error', (err) => finish({ code: null, signal: null, error: (err as NodeJS.ErrnoException).code ?? err.message }));
    child.on('exit', (code, signal) => finish({ code, signal }));
    // Out of descriptors (EMFILE, ENFILE), Node sets up no pipes at all: there is nothing to read or
    // write, and the 'error' above ends the session as a process that could not start.
    if (!child.stdin || !child.stdout || !child.stderr) return;
    this.readOutput(child, options, events, tags);
    // A write to a process that is going away fails with EPIPE: its exit says the rest.
    child.stdin.on('error', () => undefined);
    if (plan.gated) this.openGate(child, options, tags);
  }

  /** Stops the process for what it did, its owner told first (once); a throwing owner is logged, the process stopped all the same. */
  private stopForFault(events: ChildEvents, logger: StdioLogger, tags: object): () => void {
    let told = false;
    return () => {
      if (!told && !this.exited) {
        told = true;
        try {
          events.fault?.();
        } catch (err) {
          logger.error({ ...tags, err }, 'stdio process fault handling failed');
        }
      }
      void this.stop();
    };
  }

  /** stdout as bounded lines of JSON-RPC, stderr (and stdout that is not JSON-RPC) to the log, bounded and rate-limited. */
  private readOutput(child: ChildProcess, options: ChildOptions, events: ChildEvents, tags: { route: string; session: string; pid: number | undefined }): void {
    // Not JSON-RPC on stdout (a banner, debug output): logged as stderr is, bounded and rate-limited, never forwarded.
    const stdoutLog = new StderrRelay(options.logger, tags, 'stdout', 'not JSON-RPC, not forwarded: ');
    const stdout = new LineSplitter(options.maxLineBytes, {
      line: (text) => this.onLine(text, events, stdoutLog),
      overflow: () => {
        options.logger.warn(tags, 'stdio server wrote a message over the size limit: stopping it');
        this.faulted();
      },
    });
    const stderr = new StderrRelay(options.logger, tags);
    // Whatever the child wrote, a throw while handling it would be an uncaught exception: the whole
    // gateway would go. It is logged and the child stopped instead.
    const guarded = (handle: (chunk: Buffer) => void) => (chunk: Buffer) => {
      try {
        handle(chunk);
      } catch (err) {
        options.logger.error({ ...tags, err }, 'stdio server output could not be handled: stopping it');
        this.faulted();
      }
    };
    child.stdout!.on('data', guarded((chunk) => stdout.push(chunk)));
    child.stderr!.on('data', guarded((chunk) => stderr.push(chunk)));
    // A pipe error ends the process's output; its exit says the rest.
    child.stdout!.on('error', () => undefined);
    child.stderr!.on('error', () => undefined);
  }

  /** Moves the gated process into its cell, then lets it run the command; a process that cannot be contained never runs it. */
  private openGate(child: ChildProcess, options: ChildOptions, tags: object): void {
    const gate = child.stdio[3] as Writable;
    gate.on('error', () => undefined);
    if (child.pid === undefined) return; // it did not start: its error says so
    try {
      this.cell!.adopt(child.pid);
      gate.end('\n');
    } catch (err) {
      options.logger.error({ ...tags, err }, 'stdio process could not be moved into its cgroup: not started');
      gate.destroy();
      this.kill('SIGKILL');
    }
  }

  /** The cell emptied and removed, then the directory; failures logged and counted, never thrown. */
  private async cleanUp(options: ChildOptions, tags: object): Promise<void> {
    const failed = (what: string) => (detail: string) => {
      options.logger.error({ ...tags, detail }, `stdio process ${what} could not be removed`);
      options.cleanupFailed?.();
    };
    const cellProblem = await this.cell?.remove();
    if (cellProblem !== undefined) failed('cgroup')(cellProblem);
    await removeProcessDir(this.processDir, failed('directory'));
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
    const stdin = this.process.stdin;
    if (this.exited || !stdin) return;
    stdin.write(`${JSON.stringify(message)}\n`);
    // A process that does not read its stdin is not buffered for without bound.
    if (stdin.writableLength > this.maxUnreadStdin && this.killTimer === undefined) {
      this.stdinFull();
      this.faulted();
    }
  }

  /** SIGTERM to the group (stdin closed too, which ends most stdio servers), SIGKILL after the grace. */
  stop(graceMs = STOP_GRACE_MS): Promise<void> {
    if (this.exited) return this.ended;
    this.process.stdin?.end();
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
