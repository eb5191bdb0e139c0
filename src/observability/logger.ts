// pino with redaction: no token, code, secret or cookie reaches a log line,
// whatever the level. Callers log objects; these paths are censored (a
// network error's `code`, such as ECONNREFUSED, stays readable).
import dns from 'node:dns';
import { constants } from 'node:os';
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

const CENSORED = '[redacted]';

/** Single-word error codes: the system's errno names and the resolver's (ECONNREFUSED, ENOTFOUND). */
const ERRNO_NAMES = new Set([...Object.keys(constants.errno), ...Object.values(dns as Record<string, unknown>).filter((v): v is string => typeof v === 'string' && /^E[A-Z]+$/.test(v))]);
/** Multi-word error codes: ERR_*, UND_ERR_*, OpenSSL's CERT_HAS_EXPIRED. */
const WORDS_ERROR_CODE = /^[A-Z]+(_[A-Z]+)+$/;
const MAX_ERROR_CODE_LENGTH = 40;

/**
 * The censor of every redacted path, with one exception: `code` is an OAuth
 * authorization code, or a network error's code that operators need to read.
 * Only the second shape is kept (known errno names, or capitals joined by
 * underscores: nothing like the random letters and digits of a secret).
 */
export function censor(value: unknown, path: string[]): unknown {
  // A process's exit code (a number, or null when a signal or a failed spawn ended it) is no secret.
  if (path.at(-1) === 'code' && (value === null || typeof value === 'number')) return value;
  if (path.at(-1) !== 'code' || typeof value !== 'string' || value.length > MAX_ERROR_CODE_LENGTH) return CENSORED;
  return ERRNO_NAMES.has(value) || WORDS_ERROR_CODE.test(value) ? value : CENSORED;
}

export function createLogger(level: string, destination?: DestinationStream): Logger {
  const options: LoggerOptions = {
    level,
    base: { service: 'mcp-auth-gateway' },
    redact: { paths: REDACT_PATHS, censor },
    timestamp: pino.stdTimeFunctions.isoTime,
    serializers: { err: pino.stdSerializers.err },
  };
  return destination ? pino(options, destination) : pino(options);
}
