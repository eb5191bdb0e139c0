// The Tracing of tracing.ts over the official OpenTelemetry SDK: a tracer
// provider of the gateway's own (never registered globally: nothing else in
// the process starts spans through it), W3C trace context in and out, and
// OTLP over HTTP (protobuf or JSON) through a batch processor whose bounded
// queue drops, and counts, what a slow or absent collector cannot take.
// Built by the wiring only when config.traces is set.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { IncomingHttpHeaders } from 'node:http';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Span, type Tracer } from '@opentelemetry/api';
import { ExportResultCode, W3CTraceContextPropagator, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SamplingResult,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import type { TracesConfig } from '../config/types.js';
import type { Metrics } from './metrics.js';
import type { GatewaySpan, SpanAttributes, TraceHeaders, Tracing } from './tracing.js';

/** Finished spans waiting for export; beyond it they are dropped and counted (an unreachable collector never grows memory). */
const MAX_QUEUED_SPANS = 4096;
const MAX_EXPORT_BATCH = 512;
/** How long a finished span may wait for its batch. */
const EXPORT_DELAY_MS = 1000;
/**
 * Shutdown waits this long at most for the last spans: it comes after the
 * drain has spent its grace, and Kubernetes' termination period is close.
 */
const SHUTDOWN_FLUSH_MS = 2000;

const propagator = new W3CTraceContextPropagator();
const headerGetter = {
  get: (carrier: IncomingHttpHeaders, key: string) => carrier[key],
  keys: (carrier: IncomingHttpHeaders) => Object.keys(carrier),
};
const headerSetter = { set: (carrier: Record<string, string>, key: string, value: string) => void (carrier[key] = value) };

type SpanCounts = Pick<Metrics, 'traceSpans'>;

export function createSdkTracing(config: TracesConfig, metrics: SpanCounts): Tracing {
  const queue = new CountedQueue(exporterFor(config), metrics);
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: config.serviceName }),
    sampler: samplerFor(config),
    spanProcessors: [queue.processor(config.exportTimeoutMs)],
  });
  const tracer = provider.getTracer('mcp-auth-gateway');
  const active = new AsyncLocalStorage<SdkSpan>();
  const wrap = (span: Span): SdkSpan => new SdkSpan(span, tracer, active);
  return {
    serverSpan(name, headers, attributes) {
      const parent = propagator.extract(ROOT_CONTEXT, headers, headerGetter);
      return wrap(tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent));
    },
    current() {
      const span = active.getStore();
      return span?.span.isRecording() ? span : undefined;
    },
    async shutdown() {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, SHUTDOWN_FLUSH_MS)));
      await Promise.race([provider.shutdown().catch(() => undefined), late]);
      clearTimeout(timer);
    },
  };
}

/**
 * The client's trace context is followed only when the operator asked
 * (parentbased_*): clients are on the internet. Otherwise neither its sampled
 * flag nor its trace id decides: a ratio by trace id would let a client pick
 * an id under the threshold to have every request traced, or over it to be
 * traced never. The gateway's own draw decides each request (its trace id
 * still continues the client's), and the spans of a request follow its server span.
 */
function samplerFor(config: Pick<TracesConfig, 'sampleRatio' | 'parentBased'>): Sampler {
  if (config.parentBased) return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(config.sampleRatio) });
  const own = new OwnDrawSampler(config.sampleRatio);
  return new ParentBasedSampler({ root: own, remoteParentSampled: own, remoteParentNotSampled: own });
}

/** Samples a share of the spans it is asked about by a random draw of its own, whatever their trace id. */
class OwnDrawSampler implements Sampler {
  constructor(private readonly ratio: number) {}

  shouldSample(): SamplingResult {
    return { decision: Math.random() < this.ratio ? SamplingDecision.RECORD_AND_SAMPLED : SamplingDecision.NOT_RECORD };
  }

  toString(): string {
    return `OwnDrawSampler{${this.ratio}}`;
  }
}

class SdkSpan implements GatewaySpan {
  constructor(
    readonly span: Span,
    private readonly tracer: Tracer,
    private readonly active: AsyncLocalStorage<SdkSpan>,
  ) {}

  set(key: string, value: string | number | boolean): void {
    this.span.setAttribute(key, value);
  }

  setStatus(httpStatus: number, errorType?: string): void {
    this.span.setAttribute('http.response.status_code', httpStatus);
    // HTTP semantic conventions: a server span fails on 5xx only; 4xx is the client's error.
    if (errorType !== undefined) this.span.setAttribute('error.type', errorType);
    if (httpStatus >= 500) this.span.setStatus({ code: SpanStatusCode.ERROR });
  }

  fail(errorType: string): void {
    this.span.setAttribute('error.type', errorType);
    this.span.setStatus({ code: SpanStatusCode.ERROR });
  }

  child(name: string, kind: 'internal' | 'client', attributes?: SpanAttributes): GatewaySpan {
    const options = { kind: kind === 'client' ? SpanKind.CLIENT : SpanKind.INTERNAL, attributes };
    return new SdkSpan(this.tracer.startSpan(name, options, trace.setSpan(ROOT_CONTEXT, this.span)), this.tracer, this.active);
  }

  traceHeaders(): TraceHeaders {
    const carrier: Record<string, string> = {};
    propagator.inject(trace.setSpan(ROOT_CONTEXT, this.span), carrier, headerSetter);
    return carrier as unknown as TraceHeaders;
  }

  within<T>(work: () => T): T {
    return this.active.run(this, work);
  }

  end(): void {
    this.span.end();
  }
}

function exporterFor(config: TracesConfig): SpanExporter {
  const options = { url: config.url, headers: config.headers, timeoutMillis: config.exportTimeoutMs };
  return config.protocol === 'http/json' ? new OtlpJsonExporter(options) : new OtlpProtobufExporter(options);
}

/**
 * The export queue, bounded and counted: a finished sampled span enters the
 * batch processor only while fewer than MAX_QUEUED_SPANS wait (else it is
 * dropped and counted), and leaves the count when its batch goes out; each
 * batch's outcome is counted too.
 */
class CountedQueue implements SpanExporter {
  private queued = 0;

  constructor(
    private readonly exporter: SpanExporter,
    private readonly metrics: SpanCounts,
  ) {}

  processor(exportTimeoutMs: number): SpanProcessor {
    const batch = new BatchSpanProcessor(this, {
      maxQueueSize: MAX_QUEUED_SPANS,
      maxExportBatchSize: MAX_EXPORT_BATCH,
      scheduledDelayMillis: EXPORT_DELAY_MS,
      exportTimeoutMillis: exportTimeoutMs,
    });
    return {
      onStart: (span, parent) => batch.onStart(span, parent),
      onEnd: (span) => {
        if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
        if (this.queued >= MAX_QUEUED_SPANS) return void this.metrics.traceSpans.labels('dropped').inc();
        this.queued++;
        batch.onEnd(span);
      },
      forceFlush: () => batch.forceFlush(),
      shutdown: () => batch.shutdown(),
    };
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.queued -= spans.length;
    this.exporter.export(spans, (result) => {
      this.metrics.traceSpans.labels(result.code === ExportResultCode.SUCCESS ? 'exported' : 'failed').inc(spans.length);
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.exporter.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.exporter.forceFlush?.() ?? Promise.resolve();
  }
}
