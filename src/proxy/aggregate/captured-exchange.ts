// One request to an upstream of an aggregated route, through that upstream's
// own forwarder (HTTP, legacy SSE or stdio: the same code, limits and session
// hook as a route of its own), with the request made here and the answer kept
// in memory instead of written to a socket, or, for an answer that is an event
// stream read live, handed on chunk by chunk and never kept: its reader says
// when the answer came, and the exchange ends there. The forwarders use a
// small part of Node's ServerResponse; CapturedResponse is that part.
import { EventEmitter } from 'node:events';
import { IncomingMessage, type ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import type { AnswerValueSink, ForwardContext, Forwarder } from '../forwarder.js';

export interface CapturedAnswer {
  status: number;
  headers: Record<string, string>;
  /** The body as it came; empty for an event stream read live (`tap`), which is never kept. */
  body: Buffer;
  /** Bytes the upstream sent, kept or not. */
  bytes: number;
  /** The gateway refused it at its own bound on upstream sessions (ForwardContext.admissionRefused), not the upstream. */
  refusedHere?: boolean;
  /** The JSON value `body` is the serialisation of, when the forwarder handed it (forwarder.ts AnswerValueSink). */
  value?: unknown;
}

type HeaderValue = string | number | readonly string[];

/** The part of ServerResponse the forwarders write to, answering into memory, bounded by `maxBytes` (beyond it: destroyed). */
class CapturedResponse extends EventEmitter implements AnswerValueSink {
  statusCode = 200;
  headersSent = false;
  writableEnded = false;
  destroyed = false;
  closed = false;
  readonly writableLength = 0;
  private readonly head: Record<string, string> = {};
  private readonly chunks: Buffer[] = [];
  private bytes = 0;
  /** The gateway's own session admission refused the request (its answer is the gateway's, not the upstream's). */
  refusedHere = false;
  private value?: { of: unknown };
  /**
   * Sees each chunk of a 2xx event stream as it comes, instead of its being kept (the upstream's
   * messages read live); true once the answer came: the exchange ends then, the rest is cut.
   */
  tap?: (chunk: Buffer) => boolean;

  /** With `onChunk`, a stream: each chunk is handed on, never kept (its reader bounds what it holds). */
  constructor(
    private readonly maxBytes: number,
    private readonly onChunk?: (chunk: Buffer) => void,
  ) {
    super();
  }

  setHeader(name: string, value: HeaderValue): this {
    this.head[name.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
    return this;
  }
  getHeader(name: string): string | undefined {
    return this.head[name.toLowerCase()];
  }
  removeHeader(name: string): void {
    delete this.head[name.toLowerCase()];
  }
  writeHead(status: number, headers?: Record<string, HeaderValue | undefined>): this {
    this.statusCode = status;
    for (const [name, value] of Object.entries(headers ?? {})) if (value !== undefined) this.setHeader(name, value);
    this.headersSent = true;
    this.emit('head');
    return this;
  }
  flushHeaders(): void {
    this.headersSent = true;
    this.emit('head');
  }
  write(chunk: Buffer | string): boolean {
    if (this.writableEnded || this.destroyed) return false;
    this.headersSent = true;
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (this.onChunk) return (this.onChunk(buf), true);
    this.bytes += buf.length;
    // The whole, kept or not, is bounded: an upstream that streams on and on is cut.
    if (this.bytes > this.maxBytes) this.destroy();
    else if (this.tap && this.readLive()) {
      if (this.tap(buf)) this.settle();
    } else this.chunks.push(buf);
    return true;
  }
  /** A 2xx event stream, with a reader: read as it comes. */
  private readLive(): boolean {
    return this.statusCode >= 200 && this.statusCode < 300 && (this.head['content-type'] ?? '').includes('text/event-stream');
  }
  /** The answer came: the exchange is over (resolved), and the forwarder sees its client leave, which cuts the upstream's stream. */
  private settle(): void {
    this.writableEnded = true;
    this.destroyed = true;
    this.finish();
  }
  end(chunk?: Buffer | string): this {
    if (chunk !== undefined && chunk.length > 0) this.write(chunk);
    if (this.writableEnded) return this;
    this.writableEnded = true;
    this.headersSent = true;
    this.finish();
    return this;
  }
  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.finish();
    return this;
  }
  keepAnswerValue(value: unknown): void {
    // Only for a body written whole, with nothing before it: what is written then is its serialisation.
    if (this.chunks.length === 0 && !this.destroyed) this.value = { of: value };
  }
  answer(): CapturedAnswer {
    const answer: CapturedAnswer = { status: this.statusCode, headers: this.head, body: Buffer.concat(this.chunks), bytes: this.bytes, ...(this.refusedHere && { refusedHere: true }) };
    if (this.value && !this.destroyed) answer.value = this.value.of;
    return answer;
  }
  private finish(): void {
    if (this.closed) return;
    this.closed = true;
    setImmediate(() => this.emit('close'));
  }
}

export interface ExchangeLimits {
  timeoutMs: number;
  maxBytes: number;
  /** Reads a 2xx event-stream answer as it comes (then never kept); true once the answer came (CapturedResponse.tap). */
  tap?: (chunk: Buffer) => boolean;
  signal?: AbortSignal;
  /** The credential renews itself: an upstream 401 is answered as such (status 401, empty) for the caller to retry once. */
  renews?: boolean;
}

export interface CapturedRequest {
  method: 'POST' | 'DELETE' | 'GET';
  /** Lower-case names: the only headers the upstream's forwarder sees from this side. */
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Sends `request` through `forwarder` and resolves with the whole answer once
 * it is over; after `timeoutMs` the answer is cut (the forwarder sees the
 * client leave) and the promise rejects.
 */
export function captureExchange(forwarder: Forwarder, request: CapturedRequest, ctx: Omit<ForwardContext, 'body'>, limits: ExchangeLimits): Promise<CapturedAnswer> {
  const req = requestOf(request);
  const res = new CapturedResponse(limits.maxBytes);
  res.tap = limits.tap;
  return new Promise<CapturedAnswer>((resolve, reject) => {
    // The client cancelled: the answer is cut (the forwarder sees the client leave), not waited for.
    limits.signal?.addEventListener('abort', () => (res.destroy(), reject(new AggregateUpstreamError('cancelled'))), { once: true });
    const timer = setTimeout(() => {
      res.destroy();
      reject(new AggregateUpstreamError('timeout'));
    }, limits.timeoutMs);
    res.once('close', () => {
      clearTimeout(timer);
      if (res.destroyed && !res.writableEnded) reject(new AggregateUpstreamError(res.statusCode === 200 && !res.headersSent ? 'timeout' : 'cut'));
      else resolve(res.answer());
    });
    let refused = false;
    const rejected = limits.renews ? () => void (refused = true) : undefined;
    const admissionRefused = () => void (res.refusedHere = true);
    forwarder.forward(req, res as unknown as ServerResponse, { ...ctx, body: request.body, admissionRefused, ...(rejected && { rejected }) }).then(
      () => {
        // The forwarder wrote nothing on the upstream's 401: the caller renews the credential and asks again.
        if (!refused) return;
        clearTimeout(timer);
        resolve({ status: 401, headers: {}, body: Buffer.alloc(0), bytes: 0 });
      },
      (err: unknown) => {
        clearTimeout(timer);
        reject(err as Error);
      },
    );
  });
}

/**
 * A long-lived GET (the upstream session's stream of server messages) through
 * `forwarder`: each chunk goes to `onChunk` as it comes; `started` resolves
 * with the status when the upstream answered its head (undefined when the
 * stream ended without one), `ended` when the stream ends, whatever the
 * reason; `stop()` ends it from this side.
 */
export function openStream(forwarder: Forwarder, request: CapturedRequest, ctx: Omit<ForwardContext, 'body'>, onChunk: (chunk: Buffer) => void): { started: Promise<number | undefined>; ended: Promise<void>; stop(): void } {
  const res = new CapturedResponse(0, onChunk);
  const started = new Promise<number | undefined>((resolve) => {
    res.once('head', () => resolve(res.statusCode));
    res.once('close', () => resolve(undefined));
  });
  const ended = new Promise<void>((resolve) => {
    res.once('close', () => resolve());
    // A forwarder that throws, at once or later, ends the stream: `ended` never rejects.
    const failed = () => (res.destroy(), undefined);
    try {
      forwarder.forward(requestOf(request), res as unknown as ServerResponse, { ...ctx, body: request.body }).then(() => undefined, failed);
    } catch {
      failed();
    }
  });
  return { started, ended, stop: () => void res.destroy() };
}

function requestOf(request: CapturedRequest): IncomingMessage {
  const req = new IncomingMessage(new Socket());
  req.method = request.method;
  req.headers = request.headers;
  req.rawHeaders = Object.entries(request.headers).flat();
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.complete = true;
  return req;
}

/** An upstream that did not answer as an MCP server (timeout, cut answer, non-2xx status, unreadable body). */
export class AggregateUpstreamError extends Error {
  constructor(
    readonly reason: 'timeout' | 'cut' | 'status' | 'unreadable' | 'down' | 'cancelled',
    readonly status?: number,
  ) {
    super(`upstream ${reason}${status === undefined ? '' : ` ${status}`}`);
  }
}
