// What the stdio forwarder is given by the wiring, as types only: the session
// hook and logger every forwarder gets, and the process counters of its route.
import type { ProxyMetrics, SessionHook } from '../forwarder.js';

export interface StdioLogger {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** Why a process ended: it exited by itself, or the gateway stopped it (idle, session deleted, stopped to make room for another session, shutdown, a protocol fault). */
export type ProcessEndReason = 'exited' | 'idle' | 'deleted' | 'evicted' | 'shutdown' | 'fault' | 'timeout' | 'spawn_failed';

export interface StdioMetrics extends ProxyMetrics {
  processStarted(): void;
  processEnded(reason: ProcessEndReason): void;
  /** A process's directory or cgroup could not be removed (logged). */
  cleanupFailed(): void;
}

export interface StdioForwarderDeps {
  session: SessionHook;
  logger: StdioLogger;
  metrics?: StdioMetrics;
  /** The gateway's environment, from which only `inherit_env` passes (default: process.env). */
  parentEnv?: NodeJS.ProcessEnv;
}
