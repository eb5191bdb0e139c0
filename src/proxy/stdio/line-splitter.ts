// Splits a child's stdout into lines (the stdio transport's framing: one
// JSON-RPC message per line), bounded: a line longer than `maxBytes` is never
// held whole; it is reported once and then discarded up to its newline.

export interface LineSplitterEvents {
  line(text: string): void;
  /** A line grew beyond the bound; its bytes are dropped. */
  overflow(): void;
}

const NEWLINE = 0x0a;

export class LineSplitter {
  private parts: Buffer[] = [];
  private held = 0;
  private discarding = false;

  constructor(
    private readonly maxBytes: number,
    private readonly events: LineSplitterEvents,
  ) {}

  push(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(NEWLINE, start); nl !== -1; nl = chunk.indexOf(NEWLINE, start)) {
      this.take(chunk.subarray(start, nl));
      this.emit();
      start = nl + 1;
    }
    if (start < chunk.length) this.take(chunk.subarray(start));
  }

  private take(bytes: Buffer): void {
    if (this.discarding || bytes.length === 0) return;
    if (this.held + bytes.length > this.maxBytes) {
      this.parts = [];
      this.held = 0;
      this.discarding = true;
      this.events.overflow();
      return;
    }
    this.parts.push(bytes);
    this.held += bytes.length;
  }

  private emit(): void {
    if (this.discarding) {
      this.discarding = false;
      return;
    }
    const text = (this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts)).toString('utf8');
    this.parts = [];
    this.held = 0;
    // Windows-style servers end lines with CRLF; blank lines carry nothing.
    const line = text.endsWith('\r') ? text.slice(0, -1) : text;
    if (line.trim() !== '') this.events.line(line);
  }
}
