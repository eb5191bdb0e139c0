// A child's stderr into the gateway's log, tagged with route and session, and
// bounded: lines are cut at a length, at most a burst of lines is logged and
// then a steady rate, and what is dropped is counted in the next line logged.
// A server flooding stderr costs a counter, never memory or the log. Its
// stdout lines that are not JSON-RPC go through one of these too (`log`).
import { LineSplitter } from './line-splitter.js';
import type { StdioLogger } from './stdio-deps.js';

/** Longest stderr line logged; longer ones are cut (and say so). */
const MAX_LINE_CHARS = 2_048;
/** Lines a process may log at once, then LINES_PER_SECOND. */
const BURST = 50;
const LINES_PER_SECOND = 10;

export class StderrRelay {
  private tokens = BURST;
  private refilledAt = Date.now();
  private dropped = 0;
  private readonly lines: LineSplitter;

  constructor(
    private readonly logger: StdioLogger,
    private readonly tags: { route: string; session: string; pid: number | undefined },
    /** The stream named in each line; `prefix` opens each line's message. */
    private readonly stream: 'stderr' | 'stdout' = 'stderr',
    private readonly prefix = '',
  ) {
    // Held lines are bounded by the cut length (a longer line is dropped as one, and counted).
    this.lines = new LineSplitter(MAX_LINE_CHARS * 4, { line: (text) => this.log(text), overflow: () => this.log('[a line too long to log]') });
  }

  push(chunk: Buffer): void {
    this.lines.push(chunk);
  }

  /** One line, if the rate allows; else counted. */
  log(text: string): void {
    const now = Date.now();
    this.tokens = Math.min(BURST, this.tokens + ((now - this.refilledAt) / 1000) * LINES_PER_SECOND);
    this.refilledAt = now;
    if (this.tokens < 1) {
      this.dropped++;
      return;
    }
    this.tokens--;
    const line = text.length > MAX_LINE_CHARS ? `${text.slice(0, MAX_LINE_CHARS)}… (cut)` : text;
    const dropped = this.dropped;
    this.dropped = 0;
    this.logger.info({ ...this.tags, stream: this.stream, ...(dropped > 0 && { dropped_lines: dropped }) }, this.prefix + line);
  }
}
