// Reads a legacy upstream's text/event-stream (the HTML living standard's
// event stream format) into whole events, as it arrives. The splitting is the
// Streamable HTTP reader's (policy/sse-events.ts): one splitter for both, which
// holds an incomplete event's chunks as they came and scans each byte once, so
// a hostile upstream trickling one endless line costs linear time, not a rescan
// of everything held per chunk. Bounded: an event (every line of it, the one
// being read included) over `maxEventBytes` is an EventTooLargeError, so an
// upstream cannot make the gateway hold an endless event or line in memory.
import { EventTooLargeError, SseEventSplitter, parseSseEvent } from '../../policy/sse-events.js';

export { EventTooLargeError };

export interface StreamEvent {
  /** The `event:` field; `message` when absent. */
  type: string;
  /** The `data:` lines joined with LF. */
  data: string;
}

export class EventStreamReader {
  private readonly splitter: SseEventSplitter;

  constructor(maxEventBytes: number) {
    this.splitter = new SseEventSplitter(maxEventBytes);
  }

  /** Feeds a chunk; returns the events it completes (an event without data dispatches nothing). Throws EventTooLargeError. */
  push(chunk: Buffer): StreamEvent[] {
    const events: StreamEvent[] = [];
    for (const raw of this.splitter.push(chunk)) {
      const { type, data } = parseSseEvent(raw);
      if (data !== undefined) events.push({ type: type || 'message', data });
    }
    return events;
  }
}
