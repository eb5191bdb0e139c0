// Reads an upstream's event stream as it comes (the GET stream of an
// aggregated route's upstream session): each event's data parsed as JSON and
// handed on, message by message. An unfinished event longer than `maxBytes`
// is dropped, so a hostile upstream cannot grow what is held here.
const EVENT_END = /\r\n\r\n|\n\n|\r\r/;

export class EventStreamReader {
  private pending = '';

  constructor(
    private readonly maxBytes: number,
    private readonly onMessage: (message: unknown) => void,
  ) {}

  push(chunk: Buffer): void {
    this.pending += chunk.toString('utf8');
    let match: RegExpExecArray | null;
    while ((match = EVENT_END.exec(this.pending)) !== null) {
      const event = this.pending.slice(0, match.index);
      this.pending = this.pending.slice(match.index + match[0].length);
      this.event(event);
    }
    if (this.pending.length > this.maxBytes) this.pending = '';
  }

  private event(event: string): void {
    const data = event
      .split(/\r\n|\n|\r/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
      .join('\n');
    if (data.length === 0) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      return;
    }
    for (const m of Array.isArray(parsed) ? parsed : [parsed]) this.onMessage(m);
  }
}
