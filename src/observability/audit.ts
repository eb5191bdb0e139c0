// One JSON line per policy decision and authorization-server event.
// Never holds a token, code or secret: only who, what, and why.
import { pino, type Logger } from 'pino';

export interface AuditEvent {
  event: 'decision' | string;
  route?: string;
  sub?: string;
  client_id?: string;
  method?: string;
  name?: string;
  decision?: 'allow' | 'deny';
  rule?: string;
  status?: number;
  [key: string]: unknown;
}

export interface Audit {
  /** false when the sink is `none`: callers skip building events. */
  readonly enabled: boolean;
  record(event: AuditEvent): void;
}

export function createAudit(sink: 'stdout' | 'stderr' | 'none'): Audit {
  if (sink === 'none') return { enabled: false, record: () => undefined };
  const logger: Logger = pino(
    { base: { log: 'audit' }, timestamp: pino.stdTimeFunctions.isoTime },
    pino.destination({ fd: sink === 'stdout' ? 1 : 2, sync: false }),
  );
  return { enabled: true, record: (event) => logger.info(event) };
}
