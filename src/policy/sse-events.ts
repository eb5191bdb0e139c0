// Splits a text/event-stream byte stream into whole events as it arrives, so
// one event can be rewritten while every other event passes through as soon
// as its terminating blank line is in. Only the bytes of the event not yet
// complete are held back; boundaries are found on bytes (CR and LF never
// occur inside a UTF-8 sequence), and events are handed on byte for byte. A
// comment line before any field of an event (the `:` keep-alive of a long-lived
// stream, which ends no event) is handed on at once, as a piece of its own.
const CR = 0x0d;
const LF = 0x0a;
const COLON = 0x3a;

/**
 * The index of the next CR or LF at or after `from` (the chunk's length when none), for `from`
 * rising: each byte is searched at most once per kind, so a chunk costs linear time.
 */
function lineEndFinder(chunk: Buffer): (from: number) => number {
  let cr = -1;
  let lf = -1;
  const next = (byte: number, from: number) => {
    const at = chunk.indexOf(byte, from);
    return at === -1 ? chunk.length : at;
  };
  return (from) => {
    if (cr < from && cr !== chunk.length) cr = next(CR, from);
    if (lf < from && lf !== chunk.length) lf = next(LF, from);
    return Math.min(cr, lf);
  };
}

export class EventTooLargeError extends Error {
  override readonly name = 'EventTooLargeError';
}

export class SseEventSplitter {
  /** The bytes of the piece not yet complete, as they came: joined once, when it completes (a hostile stream of small chunks costs linear time, not quadratic). */
  private pending: Buffer[] = [];
  private pendingLength = 0;
  /** Length of the line being scanned (0: at a line start). */
  private lineLength = 0;
  /** The line being scanned opens with `:` (a comment). */
  private lineIsComment = false;
  /** The piece being scanned holds a line other than line ends before the current one. */
  private pieceHasLine = false;
  /** The last byte scanned was a CR: an LF right after it belongs to that line end. */
  private afterCR = false;

  constructor(private readonly maxEventBytes: number) {}

  /** Feeds a chunk; returns the events it completes (raw bytes, each with its blank line). */
  push(chunk: Buffer): Buffer[] {
    const events: Buffer[] = [];
    const lineEnds = lineEndFinder(chunk);
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const byte = chunk[i]!;
      if (byte === LF && this.afterCR) {
        this.afterCR = false;
        // The LF of a CRLF that ended an event: it travels with the next one
        // (a stray line end that no parser turns into an event) unless the
        // event is still here to take it.
        continue;
      }
      this.afterCR = byte === CR;
      if (byte !== CR && byte !== LF) {
        if (this.lineLength === 0) this.lineIsComment = byte === COLON;
        // The rest of the line at once (native search, not a byte at a time).
        const end = lineEnds(i + 1);
        this.lineLength += end - i;
        i = end - 1;
        continue;
      }
      const blank = this.lineLength === 0;
      this.lineLength = 0;
      // A blank line ends the event; a comment before any field (a keep-alive)
      // goes on at once, as a piece of its own: no reader waits for it.
      if (!blank && !(this.lineIsComment && !this.pieceHasLine)) {
        this.pieceHasLine = true;
        continue;
      }
      let end = i + 1;
      // With the LF of a CRLF, when present.
      if (byte === CR && chunk[end] === LF) {
        end++;
        i++;
        this.afterCR = false;
      }
      events.push(this.take(chunk.subarray(start, end)));
      start = end;
    }
    if (start < chunk.length) {
      this.pending.push(chunk.subarray(start));
      this.pendingLength += chunk.length - start;
    }
    if (this.pendingLength > this.maxEventBytes) throw new EventTooLargeError(`an event exceeds ${this.maxEventBytes} bytes`);
    return events;
  }

  /** The bytes of an event that never ended (the stream closed mid-event). */
  rest(): Buffer {
    return this.take(Buffer.alloc(0));
  }

  /** The held bytes and `tail`, as one piece; nothing is held after. */
  private take(tail: Buffer): Buffer {
    this.pieceHasLine = false;
    if (this.pending.length === 0) return tail;
    const piece = Buffer.concat([...this.pending, tail], this.pendingLength + tail.length);
    this.pending = [];
    this.pendingLength = 0;
    return piece;
  }
}

export interface SseEvent {
  /** `event:` field; '' when absent (a `message` event). */
  type: string;
  /** `data:` lines joined with LF; undefined when the event has none. */
  data?: string;
  /** Every other line (`id:`, `retry:`, comments), as written, in order. */
  otherLines: string[];
}

/** Parses one raw event (as SseEventSplitter returns it). */
export function parseSseEvent(raw: Buffer): SseEvent {
  const event: SseEvent = { type: '', otherLines: [] };
  const data: string[] = [];
  for (const line of raw.toString('utf8').split(/\r\n|\r|\n/)) {
    if (line === '') continue;
    const colon = line.indexOf(':');
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') data.push(value);
    else {
      if (field === 'event') event.type = value;
      event.otherLines.push(line);
    }
  }
  if (data.length > 0) event.data = data.join('\n');
  return event;
}

/** Serialises an event whose data was replaced (data on one line: JSON has no raw line breaks). */
export function formatSseEvent(event: SseEvent): Buffer {
  const lines = [...event.otherLines];
  if (event.data !== undefined) lines.push(...event.data.split('\n').map((line) => `data: ${line}`));
  return Buffer.from(`${lines.join('\n')}\n\n`, 'utf8');
}
