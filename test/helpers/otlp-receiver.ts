/**
 * A real OTLP/HTTP trace receiver for tests: an HTTP server accepting POST /v1/traces in
 * protobuf (`application/x-protobuf`) and JSON (`application/json`), as an OpenTelemetry
 * Collector's otlphttp receiver does, answering 200 with an empty ExportTraceServiceResponse.
 * Protobuf is read with @opentelemetry/otlp-transformer's own ProtobufReader (the package
 * serializes requests but has no request decoder; its reader reads the wire format) and the
 * field numbers of opentelemetry-proto's trace.proto / common.proto / trace_service.proto.
 * Every body is kept raw too, so a test can search the exported bytes for what must not be there.
 */
import { createServer, type IncomingMessage } from 'node:http';
import { gunzipSync } from 'node:zlib';
import { ProtobufReader } from '@opentelemetry/otlp-transformer/build/src/common/protobuf/protobuf-reader.js';
import { closeServer, listen } from './net.js';

export type AttributeValue = string | number | boolean;

export interface ReceivedSpan {
  /** Lower-case hex, as in `traceparent`. */
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  traceState: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, AttributeValue>;
  /** OTLP StatusCode: 0 unset, 1 ok, 2 error. */
  statusCode: number;
  resource: Record<string, AttributeValue>;
}

export interface ReceivedExport {
  path: string;
  contentType: string;
  /** The request body as sent (after any gzip is undone). */
  body: Buffer;
}

export interface OtlpReceiver {
  /** The base URL (`http://127.0.0.1:<port>`), as `otlp_endpoint` takes it. */
  url: string;
  exports: ReceivedExport[];
  spans: ReceivedSpan[];
  /** Every exported byte so far, as latin1 text (for "never appears" checks). */
  everything(): string;
  /** Resolves once `predicate` holds over the spans received; rejects after `timeoutMs`. */
  waitFor(predicate: (spans: ReceivedSpan[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const exports: ReceivedExport[] = [];
  const spans: ReceivedSpan[] = [];
  const server = createServer((req, res) => {
    void readBody(req).then((body) => {
      const contentType = (req.headers['content-type'] ?? '').split(';')[0]!.trim();
      if (req.method !== 'POST' || req.url !== '/v1/traces') return void res.writeHead(404).end();
      exports.push({ path: req.url, contentType, body });
      if (contentType === 'application/x-protobuf') {
        spans.push(...decodeProtobufRequest(body));
        return void res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      }
      if (contentType === 'application/json') {
        spans.push(...decodeJsonRequest(JSON.parse(body.toString('utf8')) as JsonRequest));
        return void res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      }
      res.writeHead(415).end();
    });
  });
  const port = await listen(server);
  return {
    url: `http://127.0.0.1:${port}`,
    exports,
    spans,
    everything: () => exports.map((e) => e.body.toString('latin1')).join('\n'),
    async waitFor(predicate, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(spans)) {
        if (Date.now() > deadline) throw new Error(`spans not received in ${timeoutMs} ms; got: ${spans.map((s) => s.name).join(', ')}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
    close: () => closeServer(server),
  };
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const body = Buffer.concat(chunks);
  return req.headers['content-encoding'] === 'gzip' ? gunzipSync(body) : body;
}

// --- protobuf ------------------------------------------------------------------

const LENGTH_DELIMITED = 2;
const VARINT = 0;

/** Calls `onField` for each field of the message in `buf`; unread fields are skipped. */
function fields(buf: Uint8Array, onField: (field: number, reader: ProtobufReader, wireType: number) => boolean): void {
  const reader = new ProtobufReader(buf);
  while (!reader.isAtEnd()) {
    const { fieldNumber, wireType } = reader.readTag();
    if (!onField(fieldNumber, reader, wireType)) reader.skip(wireType);
  }
}

/** ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1 } */
function decodeProtobufRequest(body: Buffer): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  fields(body, (field, r, wire) => {
    if (field !== 1 || wire !== LENGTH_DELIMITED) return false;
    // ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2 }
    let resource: Record<string, AttributeValue> = {};
    const scopeSpans: Uint8Array[] = [];
    fields(r.readBytes(), (f, rr, w) => {
      if (w !== LENGTH_DELIMITED) return false;
      if (f === 1) resource = keyValues(rr.readBytes(), 1);
      else if (f === 2) scopeSpans.push(rr.readBytes());
      else return false;
      return true;
    });
    // ScopeSpans { InstrumentationScope scope = 1; repeated Span spans = 2 }
    for (const scope of scopeSpans) {
      fields(scope, (f, rr, w) => {
        if (f !== 2 || w !== LENGTH_DELIMITED) return false;
        out.push({ ...decodeSpan(rr.readBytes()), resource });
        return true;
      });
    }
    return true;
  });
  return out;
}

/** Span { trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5, kind 6, attributes 9, status 15 } */
function decodeSpan(buf: Uint8Array): Omit<ReceivedSpan, 'resource'> {
  const span: Omit<ReceivedSpan, 'resource'> = { traceId: '', spanId: '', parentSpanId: '', traceState: '', name: '', kind: 0, attributes: {}, statusCode: 0 };
  const hex = (bytes: Uint8Array) => Buffer.from(bytes).toString('hex');
  const attributes: Uint8Array[] = [];
  fields(buf, (f, r, w) => {
    if (w === VARINT && f === 6) span.kind = r.readVarint();
    else if (w !== LENGTH_DELIMITED) return false;
    else if (f === 1) span.traceId = hex(r.readBytes());
    else if (f === 2) span.spanId = hex(r.readBytes());
    else if (f === 3) span.traceState = r.readString();
    else if (f === 4) span.parentSpanId = hex(r.readBytes());
    else if (f === 5) span.name = r.readString();
    else if (f === 9) attributes.push(r.readBytes());
    // Status { string message = 2; StatusCode code = 3 }
    else if (f === 15) fields(r.readBytes(), (sf, sr, sw) => (sf === 3 && sw === VARINT ? ((span.statusCode = sr.readVarint()), true) : false));
    else return false;
    return true;
  });
  for (const kv of attributes) Object.assign(span.attributes, keyValue(kv));
  return span;
}

/** The repeated KeyValue field `field` of a message (Resource: attributes = 1). */
function keyValues(buf: Uint8Array, field: number): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  fields(buf, (f, r, w) => (f === field && w === LENGTH_DELIMITED ? (Object.assign(out, keyValue(r.readBytes())), true) : false));
  return out;
}

/** KeyValue { string key = 1; AnyValue value = 2 }; AnyValue { string 1, bool 2, int 3 } (others not used by the gateway). */
function keyValue(buf: Uint8Array): Record<string, AttributeValue> {
  let key = '';
  let value: AttributeValue = '';
  fields(buf, (f, r, w) => {
    if (f === 1 && w === LENGTH_DELIMITED) key = r.readString();
    else if (f === 2 && w === LENGTH_DELIMITED) {
      fields(r.readBytes(), (vf, vr, vw) => {
        if (vf === 1 && vw === LENGTH_DELIMITED) value = vr.readString();
        else if (vf === 2 && vw === VARINT) value = vr.readVarint() === 1;
        else if (vf === 3 && vw === VARINT) value = vr.readVarint();
        else return false;
        return true;
      });
    } else return false;
    return true;
  });
  return { [key]: value };
}

// --- JSON (OTLP/JSON: ids as hex strings, enums as numbers, int64 as strings) ---

interface JsonAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
}
type JsonKeyValue = { key: string; value: JsonAnyValue };
interface JsonRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: JsonKeyValue[] };
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string;
        spanId: string;
        parentSpanId?: string;
        traceState?: string;
        name: string;
        kind: number;
        attributes?: JsonKeyValue[];
        status?: { code?: number };
      }>;
    }>;
  }>;
}

function decodeJsonRequest(request: JsonRequest): ReceivedSpan[] {
  const attrs = (list: JsonKeyValue[] = []) =>
    Object.fromEntries(list.map(({ key, value }) => [key, value.stringValue ?? value.boolValue ?? (value.intValue !== undefined ? Number(value.intValue) : (value.doubleValue ?? ''))]));
  return (request.resourceSpans ?? []).flatMap((rs) =>
    (rs.scopeSpans ?? []).flatMap((ss) =>
      (ss.spans ?? []).map((s) => ({
        traceId: s.traceId.toLowerCase(),
        spanId: s.spanId.toLowerCase(),
        parentSpanId: (s.parentSpanId ?? '').toLowerCase(),
        traceState: s.traceState ?? '',
        name: s.name,
        kind: s.kind,
        attributes: attrs(s.attributes),
        statusCode: s.status?.code ?? 0,
        resource: attrs(rs.resource?.attributes),
      })),
    ),
  );
}
