// `check --online` for a stdio upstream: its command resolved as the process
// will look for it (command-path.ts), then started once, as a session's
// process is (same environment, sandbox and user), for the MCP handshake; then
// stopped. A command that does not exist, exits at once or never answers
// shows here rather than as the first client's 502.
import type { RouteConfig } from '../config/types.js';
import { GatewayError } from '../errors/gateway-error.js';
import { resolveCommand } from '../proxy/stdio/command-path.js';
import { ProcessPool } from '../proxy/stdio/process-pool.js';
import type { StdioLogger } from '../proxy/stdio/stdio-deps.js';
import { initializeStdio } from '../proxy/stdio/stdio-handshake.js';
import { error, ok, type Finding } from './findings.js';

/** A process that takes longer to answer initialize than this is reported as not answering. */
const MAX_HANDSHAKE_MS = 30_000;
/** The process's last stderr lines shown when it fails. */
const SHOWN_LINES = 3;

export async function probeStdio(route: RouteConfig): Promise<Finding> {
  const stdio = route.stdio!;
  const resolution = resolveCommand(stdio);
  if ('problem' in resolution) return error('upstream', resolution.problem);
  const said: string[] = [];
  const record = (obj: object, msg: string) => {
    const detail = obj as { error?: string; code?: number | null; signal?: string | null };
    said.push(msg === 'stdio server process ended' ? `exited (${detail.error ?? (detail.signal ? `signal ${detail.signal}` : `code ${detail.code}`)})` : msg);
  };
  const logger: StdioLogger = { info: record, warn: record, error: record };
  const noSessions = { admit: () => Promise.reject(new GatewayError(404, 'not_found', 'no sessions in check')), bind: () => Promise.resolve(), release: () => undefined };
  const pool = new ProcessPool(route.path, stdio, route.maxBodyBytes, { session: noSessions, logger });
  try {
    const session = await pool.start('check --online', 'check --online', true);
    await initializeStdio(session, Math.min(route.upstreamTimeoutMs, MAX_HANDSHAKE_MS));
    return ok('upstream', `${stdio.command} (${resolution.found}) started and answered initialize`);
  } catch (err) {
    const tail = said.slice(-SHOWN_LINES).map((line) => printable(line.slice(0, 200)));
    return error('upstream', `${stdio.command} (${resolution.found}) did not answer initialize: ${(err as Error).message}${tail.length > 0 ? `; it said: ${tail.join(' | ')}` : ''}`);
  } finally {
    await pool.close();
  }
}

/** The process wrote it: no control characters reach the operator's terminal. */
const printable = (text: string) => text.replace(/[^\x20-\x7E]/g, '?');
