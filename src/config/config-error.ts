// A configuration problem, located in the file (or environment variable) that
// caused it, so start-up and `check` can print `file:line:col: message`.

export interface ConfigIssue {
  /** The file as reached from the config source, or `env:NAME` for an environment override. */
  file: string;
  /** 1-based; 0 when there is no position (environment variables, unreadable files). */
  line: number;
  column: number;
  message: string;
}

export function formatIssue(issue: ConfigIssue): string {
  const where = issue.line > 0 ? `${issue.file}:${issue.line}:${issue.column}` : issue.file;
  // A key or value quoted in a message may hold CR/LF: one issue stays one line (no forged issues in logs).
  return `${where}: ${issue.message}`.replace(/[^\x20-\x7E\x80-\uFFFF]/g, (ch) => JSON.stringify(ch).slice(1, -1));
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';

  constructor(readonly issues: ConfigIssue[]) {
    super(issues.map(formatIssue).join('\n'));
  }
}
