/**
 * The event-stream half of a body transform that reads JSON-RPC answers: whole events in (the
 * splitter bounds each), one event's rewrite out, a cut-short last event passed as it came. The
 * readers of answers (the tools/list filter, the task and event-id binding) differ only in what
 * they do with one parsed event.
 */
import type { BodyTransform } from '../proxy/response-transform.js';
import { SseEventSplitter, parseSseEvent, type SseEvent } from './sse-events.js';

const EMPTY = Buffer.alloc(0);

export abstract class SseEventTransform implements BodyTransform {
  readonly perCaller = true;
  private readonly splitter: SseEventSplitter;
  /** No event has gone by yet: a BOM here is skipped by clients (the EventSource rules). */
  private first = true;

  constructor(maxBytes: number) {
    this.splitter = new SseEventSplitter(maxBytes);
  }

  push(chunk: Buffer): Buffer {
    const events = this.splitter.push(chunk);
    if (events.length === 0) return EMPTY;
    const out = events.map((raw) => this.read(raw));
    return out.length === 1 ? out[0]! : Buffer.concat(out);
  }

  end(): Buffer {
    // An event cut short is passed as it came: no client dispatches it.
    return this.splitter.rest();
  }

  private read(raw: Buffer): Buffer {
    const bom = this.first && raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf;
    this.first = false;
    return this.rewriteEvent(parseSseEvent(bom ? raw.subarray(3) : raw), raw);
  }

  /** What passes on for one whole event: `raw` as it came, EMPTY, or the event formatted anew. */
  protected abstract rewriteEvent(event: SseEvent, raw: Buffer): Buffer;
}
