// Reads a legacy upstream's text/event-stream (the HTML living standard's
// event stream format) into whole events, as it arrives. Bounded: an event
// (its data lines plus the line being read) over `maxEventBytes` is an error,
// so an upstream cannot make the gateway hold an endless event in memory.
import { StringDecoder } from 'node:string_decoder';

export interface StreamEvent {
  /** The `event:` field; `message` when absent. */
  type: string;
  /** The `data:` lines joined with LF. */
  data: string;
}

export class EventTooLargeError extends Error {
  override readonly name = 'EventTooLargeError';
}

const LINE_END = /\r\n|\r|\n/g;

export class EventStreamReader {
  private readonly decoder = new StringDecoder('utf8');
  /** Text after the last line end (a line not yet complete). */
  private partial = '';
  private type = '';
  private data: string[] = [];
  private dataLength = 0;
  /** The last chunk ended with a CR: an LF starting the next one is the rest of that CRLF. */
  private afterCr = false;

  constructor(private readonly maxEventBytes: number) {}

  /** Feeds a chunk; returns the events it completes. Throws EventTooLargeError. */
  push(chunk: Buffer): StreamEvent[] {
    let fresh = this.decoder.write(chunk);
    if (this.afterCr && fresh.startsWith('\n')) {
      fresh = fresh.slice(1);
      this.afterCr = false;
    }
    // A chunk that decodes to nothing (part of a UTF-8 sequence) changes nothing.
    if (fresh.length > 0) this.afterCr = fresh.endsWith('\r');
    const text = this.partial + fresh;
    const events: StreamEvent[] = [];
    let start = 0;
    LINE_END.lastIndex = 0;
    for (let m = LINE_END.exec(text); m !== null; m = LINE_END.exec(text)) {
      const event = this.line(text.slice(start, m.index));
      if (event) events.push(event);
      start = m.index + m[0].length;
    }
    this.partial = text.slice(start);
    if (this.partial.length + this.dataLength > this.maxEventBytes) throw new EventTooLargeError(`an event exceeds ${this.maxEventBytes} bytes`);
    return events;
  }

  /** One complete line: a field, a comment, or the blank line that ends an event. */
  private line(line: string): StreamEvent | undefined {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return undefined;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.type = value;
    else if (field === 'data') {
      this.data.push(value);
      this.dataLength += value.length + 1;
      if (this.dataLength > this.maxEventBytes) throw new EventTooLargeError(`an event exceeds ${this.maxEventBytes} bytes`);
    }
    // `id` and `retry` mean nothing here: the gateway never reconnects a session's stream.
    return undefined;
  }

  private dispatch(): StreamEvent | undefined {
    const event = this.data.length === 0 ? undefined : { type: this.type || 'message', data: this.data.join('\n') };
    this.type = '';
    this.data = [];
    this.dataLength = 0;
    return event;
  }
}
