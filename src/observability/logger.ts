// pino with redaction: no token, code, secret or cookie reaches a log line,
// whatever the level. Callers log objects; these paths are censored.
import { pino, type Logger, type LoggerOptions, type DestinationStream } from 'pino';

export type { Logger } from 'pino';

const SECRET_KEYS = [
  'authorization',
  'proxy-authorization',
  'cookie',
  'set-cookie',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  'code',
  'code_verifier',
  'state',
  'client_secret',
  'secret',
  'password',
  'subject_token',
  'assertion',
];

export const REDACT_PATHS = [
  ...SECRET_KEYS.map((k) => (/^[a-z_]+$/.test(k) ? k : `["${k}"]`)),
  ...SECRET_KEYS.map((k) => (/^[a-z_]+$/.test(k) ? `*.${k}` : `*["${k}"]`)),
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers.cookie',
];

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options: LoggerOptions = {
    level,
    base: { service: 'mcp-auth-gateway' },
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    serializers: { err: pino.stdSerializers.err },
  };
  return destination ? pino(options, destination) : pino(options);
}
