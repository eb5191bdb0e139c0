// What `check --online` found: one line per finding, each about one subject
// (a URL with its credentials removed), at one of three levels.

export type FindingLevel = 'ok' | 'warn' | 'error';

export interface Finding {
  level: FindingLevel;
  /** What was reached: `issuer metadata`, `jwks`, `introspection`, `upstream`. */
  subject: string;
  message: string;
}

export const ok = (subject: string, message: string): Finding => ({ level: 'ok', subject, message });
export const warn = (subject: string, message: string): Finding => ({ level: 'warn', subject, message });
export const error = (subject: string, message: string): Finding => ({ level: 'error', subject, message });

export function formatFinding({ level, subject, message }: Finding): string {
  return `  ${level.padEnd(5)}  ${subject}: ${message}`;
}
