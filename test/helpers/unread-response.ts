/**
 * A stand-in for a client's ServerResponse whose client reads nothing until told to (`drain`):
 * what is written stays in writableLength. For the aggregated session's stream tests.
 */
import { EventEmitter } from 'node:events';

export class UnreadResponse extends EventEmitter {
  statusCode = 0;
  headers: Record<string, unknown> = {};
  writableLength = 0;
  writableEnded = false;
  destroyed = false;
  headersSent = false;
  readonly chunks: string[] = [];
  writeHead(status: number, headers: Record<string, unknown> = {}) {
    this.statusCode = status;
    this.headers = headers;
    this.headersSent = true;
    return this;
  }
  flushHeaders() {}
  write(chunk: Buffer | string) {
    this.writableLength += chunk.length;
    this.chunks.push(chunk.toString());
    return false;
  }
  end(chunk?: Buffer | string) {
    if (chunk !== undefined) this.write(chunk);
    this.writableEnded = true;
    return this;
  }
  destroy() {
    this.destroyed = true;
    this.emit('close');
    return this;
  }
  /** The client read everything. */
  drain() {
    this.writableLength = 0;
    this.emit('drain');
  }
  /** The ids of the events written, in order. */
  ids(): string[] {
    return this.chunks
      .join('')
      .split('\n\n')
      .flatMap((e) => e.split('\n').filter((l) => l.startsWith('id: ')).map((l) => l.slice(4)));
  }
  /** The data of each event written, parsed. */
  messages(): Record<string, unknown>[] {
    return this.chunks
      .join('')
      .split('\n\n')
      .map((e) => e.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n'))
      .filter((d) => d !== '')
      .map((d) => JSON.parse(d) as Record<string, unknown>);
  }
}

