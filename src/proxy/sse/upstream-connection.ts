// One session's connection to a legacy HTTP+SSE upstream (2024-11-05): the
// GET stream, opened once and never reconnected, whose `endpoint` event says
// where to POST, and whose `message` events carry everything the server says;
// and the POSTs of the client's messages to that endpoint. Redirects are never
// followed (undici's request does not), and the endpoint is pinned to the SSE
// URL's origin (endpoint-url.ts).
import type { Dispatcher, Pool } from 'undici';
import { GatewayError } from '../../errors/gateway-error.js';
import { upstreamErrorResponse } from '../upstream-failure.js';
import { EventStreamReader, EventTooLargeError } from './event-stream-reader.js';
import { pinnedEndpoint } from './endpoint-url.js';
import type { SseScope } from './sse-scope.js';

type Body = Dispatcher.ResponseData['body'];
type Injected = Readonly<Record<string, string>>;

export interface UpstreamListener {
  /** One JSON-RPC message from the upstream (its JSON text, and parsed). */
  message(json: string, parsed: unknown): void;
  /** The stream ended without close(): dropped, or it broke the protocol (already counted and logged). */
  lost(err: GatewayError): void;
}

/** The upstream no longer knows this session (or it has ended here): the client's 404, as Streamable HTTP says. */
export const sessionGone = () => new GatewayError(404, 'not_found', 'Unknown session');

const isEventStream = (contentType: string | string[] | undefined) =>
  typeof contentType === 'string' && contentType.trimStart().toLowerCase().startsWith('text/event-stream');

export class UpstreamConnection {
  private readonly abort = new AbortController();
  /** Path and query of the endpoint, once its event came. */
  private endpoint: string | undefined;
  private closed = false;
  private timedOut = false;

  constructor(
    private readonly pool: Pool,
    private readonly sseUrl: URL,
    private readonly scope: SseScope,
    private readonly listener: UpstreamListener,
  ) {}

  /** Opens the GET stream and waits (upstream_timeout) for its endpoint. Rejects with the client's answer. */
  async open(injected: Injected): Promise<void> {
    const timer = setTimeout(() => {
      this.timedOut = true;
      this.abort.abort();
    }, this.scope.limits.timeoutMs);
    try {
      const res = await this.pool.request({
        path: this.sseUrl.pathname + this.sseUrl.search,
        method: 'GET',
        headers: { ...injected, accept: 'text/event-stream', 'cache-control': 'no-cache' },
        signal: this.abort.signal,
      });
      this.checkHead(res);
      await this.read(res.body);
    } catch (err) {
      const closedHere = this.closed;
      this.close();
      if (this.timedOut) throw this.scope.upstreamError('timeout', 'upstream sent no endpoint event in time');
      if (closedHere && !(err instanceof GatewayError)) throw upstreamErrorResponse('shutdown');
      throw this.scope.failure(err);
    } finally {
      clearTimeout(timer);
    }
  }

  private checkHead({ statusCode, headers, body }: Dispatcher.ResponseData): void {
    if (statusCode === 200 && isEventStream(headers['content-type'])) return;
    body.destroy();
    if (statusCode === 401 || statusCode === 403) throw this.credentialRejected(statusCode);
    const why = statusCode >= 300 && statusCode < 400 ? 'upstream redirected its event stream (redirects are not followed)' : 'upstream did not open an event stream';
    throw this.scope.upstreamError('protocol', why, { status: statusCode });
  }

  /** Reads the stream; resolves at its endpoint event, rejects if the stream fails before it. */
  private read(body: Body): Promise<void> {
    const reader = new EventStreamReader(this.scope.limits.maxBytes);
    return new Promise<void>((resolve, reject) => {
      const fail = (err: GatewayError) => {
        body.destroy();
        if (this.endpoint === undefined) reject(err);
        else this.lose(err);
      };
      const onData = (chunk: Buffer): void => {
        if (this.closed) return;
        let events;
        try {
          events = reader.push(chunk);
        } catch (err) {
          if (!(err instanceof EventTooLargeError)) throw err;
          return fail(this.scope.upstreamError('protocol', 'upstream event over max_body_bytes', { limit: this.scope.limits.maxBytes }));
        }
        for (const event of events) {
          if (this.closed) return;
          if (this.endpoint !== undefined) {
            // A later `endpoint` event is ignored: a session's endpoint is fixed once.
            if (event.type === 'message') this.deliver(event.data);
            continue;
          }
          // Nothing before the endpoint belongs to a session yet.
          if (event.type !== 'endpoint') continue;
          const endpoint = pinnedEndpoint(event.data, this.sseUrl);
          if (endpoint === undefined) {
            return fail(this.scope.upstreamError('protocol', 'upstream endpoint is not on the origin of its SSE URL', { endpoint: event.data.slice(0, 200) }));
          }
          this.endpoint = endpoint;
          resolve();
        }
      };
      // Whatever the upstream's bytes make a step below throw (a message nested past the stack's
      // depth, for one) ends this connection, never the process: a throw here would escape.
      body.on('data', (chunk: Buffer) => {
        try {
          onData(chunk);
        } catch (err) {
          fail(this.scope.upstreamError('protocol', 'upstream message could not be handled', { err: err instanceof Error ? err.message : String(err) }));
        }
      });
      // Ended here (close(), the endpoint's timeout): open() says why, nothing is counted twice.
      const endedHere = () => this.closed || this.timedOut;
      body.on('error', (err: Error) => {
        if (endedHere()) return reject(err);
        fail(this.endpoint === undefined ? this.scope.failure(err) : this.scope.upstreamError('reset', 'upstream event stream failed', { err: err.message }));
      });
      body.on('end', () => {
        if (endedHere()) return reject(new Error('closed'));
        fail(this.scope.upstreamError('reset', 'upstream closed its event stream'));
      });
    });
  }

  private deliver(data: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(data);
    } catch {
      this.scope.logger?.warn({ route: this.scope.route }, 'upstream sent a message that is not JSON; dropped');
      return;
    }
    // A 2024-11-05 server may batch: each message is routed on its own.
    if (Array.isArray(parsed)) for (const one of parsed) this.listener.message(JSON.stringify(one), one);
    else this.listener.message(data, parsed);
  }

  private lose(err: GatewayError): void {
    if (this.closed) return;
    this.closed = true;
    this.listener.lost(err);
  }

  /** POSTs client messages to the endpoint. Rejects with the client's answer (404 sessionGone when the upstream forgot the session). */
  async post(body: Buffer, injected: Injected): Promise<void> {
    if (this.closed || this.endpoint === undefined) throw sessionGone();
    let res: Dispatcher.ResponseData;
    try {
      res = await this.pool.request({ path: this.endpoint, method: 'POST', headers: { ...injected, 'content-type': 'application/json' }, body });
    } catch (err) {
      throw this.scope.failure(err);
    }
    // Legacy servers answer `202 Accepted`; the body says nothing the client needs.
    await res.body.dump().catch(() => undefined);
    const status = res.statusCode;
    if (status >= 200 && status < 300) return;
    if (status === 401 || status === 403) throw this.credentialRejected(status);
    if (status === 404) {
      this.lose(this.scope.upstreamError('protocol', 'upstream no longer knows the session'));
      throw sessionGone();
    }
    throw this.scope.upstreamError('protocol', 'upstream refused a message', { status });
  }

  /** The upstream refused the gateway's own credential: its challenge is not the client's business (SECURITY H36). */
  private credentialRejected(status: number): GatewayError {
    this.scope.logger?.warn({ route: this.scope.route, status }, 'upstream rejected the gateway credential');
    return new GatewayError(502, 'bad_gateway', "Upstream rejected the gateway's credential");
  }

  /** Ends the GET stream (DELETE, shutdown, idle): the legacy server ends its session with it. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.abort.abort();
  }
}
