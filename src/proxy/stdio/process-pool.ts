// One route's processes: at most `max_processes` alive at once (beyond it the
// client gets 503 with Retry-After), each serving one session of one
// principal, stopped when idle for `idle_timeout`, when its session is
// deleted, and all of them at close (shutdown, or a reload that drops the
// route). A process that exits ends its session; the session's id is then
// unknown (404) and the client starts a new one.
import { randomUUID } from 'node:crypto';
import type { StdioUpstreamConfig } from '../../config/types.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { StdioChild } from './stdio-child.js';
import type { ProcessEndReason, StdioForwarderDeps } from './stdio-deps.js';
import { StdioSession } from './stdio-session.js';

/** What a client at the process limit is told to wait: sessions end all the time, so soon. */
const RETRY_AFTER_SECONDS = 5;
/** The idle check runs this often at most (and at least four times per idle_timeout). */
const MAX_SWEEP_MS = 30_000;

export class ProcessPool {
  /** Sessions by the `Mcp-Session-Id` the gateway minted. */
  readonly sessions = new Map<string, StdioSession>();
  /** The per-principal processes of stateless (2026-07-28) clients, by principal key. */
  readonly stateless = new Map<string, StdioSession>();
  private live = 0;
  private closing = false;
  private readonly sweep: NodeJS.Timeout;

  constructor(
    private readonly route: string,
    private readonly config: StdioUpstreamConfig,
    private readonly maxLineBytes: number,
    private readonly deps: StdioForwarderDeps,
  ) {
    this.sweep = setInterval(() => this.stopIdle(), Math.max(50, Math.min(MAX_SWEEP_MS, config.idleTimeoutMs / 4)));
    this.sweep.unref();
  }

  /** Processes alive now (started and not yet exited). */
  get size(): number {
    return this.live;
  }

  /** Starts a process for a new session of `owner`; throws 503 at the limit or while closing. */
  start(owner: string, stateless: boolean): StdioSession {
    if (this.closing) throw new GatewayError(503, 'temporarily_unavailable', 'Gateway is shutting down');
    if (this.live >= this.config.maxProcesses) {
      this.deps.logger.warn({ route: this.route, max_processes: this.config.maxProcesses }, 'stdio route at max_processes');
      throw new GatewayError(503, 'temporarily_unavailable', 'Too many upstream processes; try again later', {
        headers: { 'retry-after': String(RETRY_AFTER_SECONDS) },
      });
    }
    const session = new StdioSession(stateless ? undefined : randomUUID(), owner);
    const tag = session.id ?? 'stateless';
    let reason: ProcessEndReason = 'exited';
    this.live++;
    this.deps.metrics?.processStarted();
    session.child = new StdioChild(
      this.config,
      { route: this.route, session: tag, maxLineBytes: this.maxLineBytes, logger: this.deps.logger, parentEnv: this.deps.parentEnv ?? process.env },
      {
        message: (m) => session.receive(m),
        exit: ({ code, signal, error }) => {
          this.live--;
          if (error !== undefined) reason = 'spawn_failed';
          this.deps.metrics?.processEnded(reason);
          this.forget(session);
          const level = reason === 'exited' || reason === 'spawn_failed' ? 'warn' : 'info';
          this.deps.logger[level]({ route: this.route, session: tag, code, signal, error, reason }, 'stdio server process ended');
          session.end(error !== undefined ? 'Upstream process could not start' : 'Upstream process exited');
        },
      },
    );
    // Whoever stops the process says why, before its exit is seen.
    session.stopWith = (why) => {
      if (reason === 'exited') reason = why;
      return session.child.stop();
    };
    if (session.id !== undefined) this.sessions.set(session.id, session);
    else this.stateless.set(owner, session);
    return session;
  }

  /** Ends a session: its process is stopped and its id forgotten at once. */
  stop(session: StdioSession, why: ProcessEndReason): Promise<void> {
    this.forget(session);
    return session.stopWith(why);
  }

  private forget(session: StdioSession): void {
    if (session.id !== undefined) {
      if (this.sessions.get(session.id) === session) {
        this.sessions.delete(session.id);
        this.deps.session.release(session.id);
      }
    } else if (this.stateless.get(session.owner) === session) {
      this.stateless.delete(session.owner);
    }
  }

  private stopIdle(): void {
    const before = Date.now() - this.config.idleTimeoutMs;
    for (const session of [...this.sessions.values(), ...this.stateless.values()]) {
      if (!session.busy && session.lastActivity <= before) void this.stop(session, 'idle');
    }
  }

  /** Every process stopped (SIGTERM, then SIGKILL after the grace); resolves when all have exited. */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.sweep);
    const all = [...this.sessions.values(), ...this.stateless.values()];
    await Promise.all(all.map((s) => this.stop(s, 'shutdown')));
  }
}
