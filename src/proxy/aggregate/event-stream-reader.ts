// Reads an upstream's event stream as it comes (the GET stream of an
// aggregated route's upstream session): each event's data parsed as JSON and
// handed on, message by message. Events are cut by the one splitter every
// event stream the gateway reads goes through (linear however the stream is
// chunked); an unfinished event longer than `maxBytes` is dropped, so a
// hostile upstream cannot grow what is held here.
import { EventTooLargeError, SseEventSplitter, parseSseEvent } from '../../policy/sse-events.js';

export class EventStreamReader {
  private splitter: SseEventSplitter;

  constructor(
    private readonly maxBytes: number,
    private readonly onMessage: (message: unknown) => void,
  ) {
    this.splitter = new SseEventSplitter(maxBytes);
  }

  push(chunk: Buffer): void {
    let events: Buffer[];
    try {
      events = this.splitter.push(chunk);
    } catch (err) {
      if (!(err instanceof EventTooLargeError)) throw err;
      // The oversized event is dropped; reading starts afresh with what comes next.
      this.splitter = new SseEventSplitter(this.maxBytes);
      return;
    }
    for (const raw of events) this.event(parseSseEvent(raw).data);
  }

  private event(data: string | undefined): void {
    if (data === undefined || data.length === 0) return;
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      return;
    }
    for (const m of Array.isArray(parsed) ? parsed : [parsed]) this.onMessage(m);
  }
}
