// Times every store call and counts its failures (mag_store_* metrics), so an
// operator sees a slow or unreachable Redis before users report 503s. A thin
// wrapper: the backend's behaviour, errors included, passes through unchanged.
// With tracing, a call made while a request's span is open is a child span of
// it, named by operation only: keys hold token hashes and session ids.
import type { Metrics } from '../observability/metrics.js';
import type { Tracing } from '../observability/tracing.js';
import { StoreUnavailableError, type Admission, type AdmitRequest, type LogEntry, type Store } from './store.js';

type StoreMetrics = Pick<Metrics, 'storeDuration' | 'storeErrors'>;
type Operation = 'get' | 'set' | 'setIfAbsent' | 'compareAndSet' | 'take' | 'increment' | 'delete' | 'ping' | 'appendToLog' | 'readLog' | 'admit' | 'time';

export class InstrumentedStore implements Store {
  readonly kind: Store['kind'];
  readonly notices: Store['notices'];
  readonly time?: () => Promise<number>;

  constructor(
    /** The backend itself (e.g. for backend-specific checks). */
    readonly backend: Store,
    private readonly metrics: StoreMetrics,
    private readonly tracing?: Tracing,
  ) {
    this.kind = backend.kind;
    this.notices = backend.notices;
    // Only a backend with a clock of its own has one to pass through.
    if (backend.time) this.time = () => this.#observe('time', () => backend.time!());
  }

  get(key: string): Promise<string | undefined> {
    return this.#observe('get', () => this.backend.get(key));
  }

  set(key: string, value: string, ttlMs: number): Promise<void> {
    return this.#observe('set', () => this.backend.set(key, value, ttlMs));
  }

  setIfAbsent(key: string, value: string, ttlMs: number): Promise<boolean> {
    return this.#observe('setIfAbsent', () => this.backend.setIfAbsent(key, value, ttlMs));
  }

  compareAndSet(key: string, expected: string | undefined, next: string | undefined, ttlMs: number): Promise<boolean> {
    return this.#observe('compareAndSet', () => this.backend.compareAndSet(key, expected, next, ttlMs));
  }

  take(key: string): Promise<string | undefined> {
    return this.#observe('take', () => this.backend.take(key));
  }

  increment(key: string, ttlMs: number): Promise<number> {
    return this.#observe('increment', () => this.backend.increment(key, ttlMs));
  }

  appendToLog(key: string, member: string, retentionMs: number): Promise<void> {
    return this.#observe('appendToLog', () => this.backend.appendToLog(key, member, retentionMs));
  }

  readLog(key: string, sinceMs: number): Promise<LogEntry[]> {
    return this.#observe('readLog', () => this.backend.readLog(key, sinceMs));
  }

  admit(key: string, request: AdmitRequest): Promise<Admission> {
    return this.#observe('admit', () => this.backend.admit(key, request));
  }

  delete(key: string): Promise<void> {
    return this.#observe('delete', () => this.backend.delete(key));
  }

  ping(): Promise<void> {
    return this.#observe('ping', () => this.backend.ping());
  }

  close(): Promise<void> {
    return this.backend.close();
  }

  /** The histogram child of an operation that succeeded, bound once: labels() hashes its labels on every call, and a stream writes per event. */
  readonly #ok = new Map<Operation, { observe(seconds: number): void }>();
  #succeeded(operation: Operation): { observe(seconds: number): void } {
    let child = this.#ok.get(operation);
    if (child === undefined) this.#ok.set(operation, (child = this.metrics.storeDuration.labels(this.kind, operation, 'ok')));
    return child;
  }

  async #observe<T>(operation: Operation, call: () => Promise<T>): Promise<T> {
    const span = this.tracing?.current()?.child(`store ${operation}`, this.kind === 'redis' ? 'client' : 'internal', {
      'db.system.name': this.kind,
      'db.operation.name': operation,
    });
    const started = process.hrtime.bigint();
    const seconds = () => Number(process.hrtime.bigint() - started) / 1e9;
    try {
      const result = await call();
      this.#succeeded(operation).observe(seconds());
      span?.end();
      return result;
    } catch (err) {
      const kind = err instanceof StoreUnavailableError ? 'unavailable' : 'other';
      this.metrics.storeDuration.labels(this.kind, operation, 'error').observe(seconds());
      this.metrics.storeErrors.labels(this.kind, operation, kind).inc();
      span?.fail(kind);
      span?.end();
      throw err;
    }
  }
}
