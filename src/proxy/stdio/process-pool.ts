// One route's processes: at most `max_processes` alive at once and at most
// `max_processes_per_principal` of one user, whatever its clients
// (session-admission.ts: room is made by stopping one of the user's own idle
// processes, else the client gets 503 with Retry-After), each serving one session of one principal, stopped when idle
// for `idle_timeout`, when its session is deleted, and all of them at close
// (shutdown, or a reload that drops the route). A process that exits ends its
// session; the session's id is then unknown (404) and the client starts a new one.
import { randomUUID } from 'node:crypto';
import type { StdioUpstreamConfig } from '../../config/types.js';
import { GatewayError } from '../../errors/gateway-error.js';
import { admit, SessionAdmission, type AdmissionContext, type Slot } from '../session-admission.js';
import { StatelessSessions } from '../stateless-init.js';
import { SaidOnce } from '../../errors/diagnosis.js';
import { childPath, resolveCommand } from './command-path.js';
import { StdioChild } from './stdio-child.js';
import type { ProcessEndReason, StdioForwarderDeps } from './stdio-deps.js';
import { StdioSession } from './stdio-session.js';

/** The idle check runs this often at most (and at least four times per idle_timeout). */
const MAX_SWEEP_MS = 30_000;

const shuttingDown = () => new GatewayError(503, 'temporarily_unavailable', 'Gateway is shutting down');

export class ProcessPool {
  /** Sessions by the `Mcp-Session-Id` the gateway minted. */
  readonly sessions = new Map<string, StdioSession>();
  /** The per-principal processes of stateless (2026-07-28) clients. */
  readonly stateless = new StatelessSessions<StdioSession>();
  private readonly admission: SessionAdmission<StdioSession>;
  private readonly admissionContext: AdmissionContext;
  private live = 0;
  private readonly diagnosed = new SaidOnce();
  private closing = false;
  private readonly sweep: NodeJS.Timeout;

  constructor(
    private readonly route: string,
    private readonly config: StdioUpstreamConfig,
    private readonly maxLineBytes: number,
    private readonly deps: StdioForwarderDeps,
  ) {
    this.admission = new SessionAdmission({ perRoute: config.maxProcesses, perPrincipal: config.maxProcessesPerPrincipal });
    this.admissionContext = { route, logger: deps.logger, settings: { route: 'max_processes', principal: 'max_processes_per_principal' } };
    this.sweep = setInterval(() => this.stopIdle(), Math.max(50, Math.min(MAX_SWEEP_MS, config.idleTimeoutMs / 4)));
    this.sweep.unref();
  }

  /** Processes alive now (started and not yet exited). */
  get size(): number {
    return this.live;
  }

  /**
   * Starts a process for a new session of `owner`, once admitted (an idle
   * process stopped to make room has exited first); throws 503 when nothing
   * can make room, or while closing.
   */
  async start(owner: string, user: string, stateless: boolean): Promise<StdioSession> {
    if (this.closing) throw shuttingDown();
    const { slot, evict } = admit(this.admission, user, this.admissionContext);
    if (evict !== undefined) void this.stop(evict, 'evicted');
    await slot.vacant;
    if (this.closing) {
      this.admission.abandon(slot);
      throw shuttingDown();
    }
    return this.spawn(owner, stateless, slot);
  }

  private spawn(owner: string, stateless: boolean, slot: Slot<StdioSession>): StdioSession {
    const session = new StdioSession(stateless ? undefined : randomUUID(), owner);
    const tag = session.id ?? 'stateless';
    let reason: ProcessEndReason = 'exited';
    try {
      session.child = new StdioChild(
        this.config,
        {
          route: this.route,
          session: tag,
          maxLineBytes: this.maxLineBytes,
          logger: this.deps.logger,
          parentEnv: this.deps.parentEnv ?? process.env,
          cleanupFailed: () => this.deps.metrics?.cleanupFailed(),
        },
        {
          message: (m) => session.receive(m),
          exit: ({ code, signal, error }) => {
            this.live--;
            if (error !== undefined) reason = 'spawn_failed';
            this.deps.metrics?.processEnded(reason);
            this.forget(session);
            this.admission.release(session);
            if (error !== undefined) this.diagnoseSpawn(error);
            const level = reason === 'exited' || reason === 'spawn_failed' ? 'warn' : 'info';
            this.deps.logger[level]({ route: this.route, session: tag, code, signal, error, reason }, 'stdio server process ended');
            session.end(error !== undefined ? 'Upstream process could not start' : 'Upstream process exited');
          },
          // Stopped for what it did: its id is unknown (404) from now on, as after a DELETE.
          fault: () => void this.stop(session, 'fault'),
        },
      );
    } catch (err) {
      this.admission.abandon(slot);
      throw err;
    }
    this.live++;
    this.deps.metrics?.processStarted();
    this.admission.open(slot, session);
    // Whoever stops the process says why, before its exit is seen.
    session.stopWith = (why) => {
      if (reason === 'exited') reason = why;
      return session.child.stop();
    };
    if (session.id !== undefined) this.sessions.set(session.id, session);
    return session;
  }

  /** A command that cannot start, said once per error code: named, with its errno and where it was looked for (as `check` says it). */
  private diagnoseSpawn(errno: string): void {
    if (!this.diagnosed.first(errno)) return;
    const { command, cwd } = this.config;
    const parentEnv = this.deps.parentEnv ?? process.env;
    const resolution = resolveCommand(this.config, parentEnv);
    const why = 'problem' in resolution ? resolution.problem : `found at ${resolution.found}`;
    this.deps.logger.error(
      { route: this.route, cause: 'stdio_spawn', command, errno, path: childPath(this.config, parentEnv), ...(cwd !== undefined && { cwd }) },
      `stdio server cannot start: ${command}: ${errno}; ${why} (check says the same)`,
    );
  }

  /** Ends a session: its process is stopped and its id forgotten at once (its slot counts until the process exited). */
  stop(session: StdioSession, why: ProcessEndReason): Promise<void> {
    this.forget(session);
    this.admission.closing(session);
    return session.stopWith(why);
  }

  private forget(session: StdioSession): void {
    if (session.id === undefined) return this.stateless.forget(session.owner, session);
    if (this.sessions.get(session.id) === session) {
      this.sessions.delete(session.id);
      this.deps.session.release(session.id);
    }
  }

  private stopIdle(): void {
    const before = Date.now() - this.config.idleTimeoutMs;
    for (const session of this.admission.occupants(true)) {
      if (!session.busy && session.lastActivity <= before) void this.stop(session, 'idle');
    }
  }

  /** Every process stopped (SIGTERM, then SIGKILL after the grace); resolves when all have exited. */
  async close(): Promise<void> {
    this.closing = true;
    clearInterval(this.sweep);
    await Promise.all(this.admission.occupants().map((s) => this.stop(s, 'shutdown')));
  }
}
