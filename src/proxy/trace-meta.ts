// Where HTTP headers do not reach the server — a stdio child reads JSON-RPC
// lines, a legacy SSE server answers on a stream of its own — the W3C trace
// context also travels in the message: `params._meta.traceparent` and
// `tracestate`, where OpenTelemetry's MCP semantic conventions put it. With
// tracing on, the gateway's span is the parent the server learns of; a
// `traceparent` the client wrote there is replaced, as its header is on HTTP,
// and its `baggage` removed (the header never passes either: headers.ts).
// The one place both forwarders write it.
import type { TraceHeaders } from '../observability/tracing.js';

type JsonObject = Record<string, unknown>;

const isObject = (value: unknown): value is JsonObject => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Sets the trace context on every request and notification of `messages` (responses carry none); in place. */
export function carryTraceContext(messages: readonly JsonObject[], trace: TraceHeaders): void {
  for (const message of messages) {
    if (typeof message.method !== 'string') continue;
    const params = message.params ?? {};
    // Positional params (an array) have no place for _meta: left as sent.
    if (!isObject(params)) continue;
    const { traceparent: _clientParent, tracestate: _clientState, baggage: _clientBaggage, ...meta } = isObject(params._meta) ? params._meta : {};
    message.params = { ...params, _meta: { ...meta, ...trace } };
  }
}
