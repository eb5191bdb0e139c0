/**
 * A raw-socket HTTP/1.1 client for what `fetch` and `node:http` refuse to send or silently fix:
 * duplicate or folded headers, CR/LF tricks, non-normalised or absolute-form targets, CONNECT,
 * conflicting framing, and slow-drip writes. It sends exactly the bytes it is given and parses the
 * first final response (1xx answers are skipped) from whatever comes back.
 */
import { connect, type Socket } from 'node:net';

export interface RawResponse {
  status: number;
  reason: string;
  /** Header pairs as received (names as sent, duplicates kept). */
  headers: Array<[string, string]>;
  body: string;
  /** Every byte the server sent on this connection until the response was complete. */
  raw: Buffer;
}

/** Value of a response header (case-insensitive; duplicates joined with ", "). */
export function headerOf(res: Pick<RawResponse, 'headers'>, name: string): string | undefined {
  const values = res.headers.filter(([n]) => n.toLowerCase() === name.toLowerCase()).map(([, v]) => v);
  return values.length === 0 ? undefined : values.join(', ');
}

/**
 * An HTTP/1.1 request message from its parts, exactly as given: nothing is added, encoded or
 * validated (no Host, no Content-Length unless listed).
 */
export function message(requestLine: string, headers: ReadonlyArray<readonly [string, string]> | readonly string[], body: string | Buffer = ''): Buffer {
  const lines = headers.map((h) => (typeof h === 'string' ? h : `${h[0]}: ${h[1]}`));
  return Buffer.concat([Buffer.from(`${requestLine}\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`, 'latin1'), Buffer.from(body)]);
}

/** Parses one complete HTTP/1.1 response from the start of `buf`, or undefined when more bytes are needed. */
export function parseResponse(buf: Buffer, ended: boolean): { response: Omit<RawResponse, 'raw'>; length: number } | undefined {
  let offset = 0;
  for (;;) {
    const headEnd = buf.indexOf('\r\n\r\n', offset, 'latin1');
    if (headEnd === -1) return undefined;
    const [statusLine = '', ...lines] = buf.subarray(offset, headEnd).toString('latin1').split('\r\n');
    const match = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(statusLine);
    if (!match) throw new Error(`not an HTTP response: ${JSON.stringify(statusLine)}`);
    const status = Number(match[1]);
    const headers = lines.map((line): [string, string] => {
      const colon = line.indexOf(':');
      return [line.slice(0, colon), line.slice(colon + 1).trim()];
    });
    const bodyStart = headEnd + 4;
    if (status >= 100 && status < 200) {
      offset = bodyStart;
      continue;
    }
    const reason = match[2] ?? '';
    const done = (body: Buffer, end: number) => ({ response: { status, reason, headers, body: body.toString('utf8') }, length: end });
    const te = headerOf({ headers }, 'transfer-encoding');
    const cl = headerOf({ headers }, 'content-length');
    if (status === 204 || status === 304) return done(Buffer.alloc(0), bodyStart);
    if (te && /chunked/i.test(te)) {
      const chunks: Buffer[] = [];
      let at = bodyStart;
      for (;;) {
        const lineEnd = buf.indexOf('\r\n', at, 'latin1');
        if (lineEnd === -1) return ended ? done(Buffer.concat(chunks), buf.length) : undefined;
        const size = Number.parseInt(buf.subarray(at, lineEnd).toString('latin1'), 16);
        if (size === 0) {
          const trailerEnd = buf.indexOf('\r\n\r\n', lineEnd, 'latin1');
          if (trailerEnd === -1 && !ended) return undefined;
          return done(Buffer.concat(chunks), trailerEnd === -1 ? buf.length : trailerEnd + 4);
        }
        if (buf.length < lineEnd + 2 + size + 2) return ended ? done(Buffer.concat([...chunks, buf.subarray(lineEnd + 2)]), buf.length) : undefined;
        chunks.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
        at = lineEnd + 2 + size + 2;
      }
    }
    if (cl !== undefined) {
      const length = Number(cl);
      if (buf.length - bodyStart < length) return ended ? done(buf.subarray(bodyStart), buf.length) : undefined;
      return done(buf.subarray(bodyStart, bodyStart + length), bodyStart + length);
    }
    // Delimited by the end of the connection.
    return ended ? done(buf.subarray(bodyStart), buf.length) : undefined;
  }
}

export interface RawConnection {
  socket: Socket;
  /** Writes bytes as given; resolves once they are handed to the kernel. */
  write(data: string | Buffer): Promise<void>;
  /** The first final response; rejects if the connection ends without one. */
  response: Promise<RawResponse>;
  /** Resolves (with the time, ms since epoch) when the server closes or the socket ends. */
  closed: Promise<number>;
  /** Everything received so far. */
  received(): Buffer;
  destroy(): void;
}

/** Opens a TCP connection to 127.0.0.1:`port` and watches for one response. */
export async function openRaw(port: number, host = '127.0.0.1'): Promise<RawConnection> {
  const socket = connect({ port, host });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  socket.on('error', () => undefined); // resets after a refusal are expected
  let buffer = Buffer.alloc(0);
  let settled = false;
  let resolveResponse!: (r: RawResponse) => void;
  let rejectResponse!: (e: Error) => void;
  const response = new Promise<RawResponse>((resolve, reject) => {
    resolveResponse = resolve;
    rejectResponse = reject;
  });
  response.catch(() => undefined); // callers that only watch `closed` need not handle it
  const tryParse = (ended: boolean) => {
    if (settled) return;
    let parsed;
    try {
      parsed = parseResponse(buffer, ended);
    } catch (err) {
      settled = true;
      rejectResponse(err as Error);
      return;
    }
    if (parsed) {
      settled = true;
      resolveResponse({ ...parsed.response, raw: buffer.subarray(0, parsed.length) });
    } else if (ended) {
      settled = true;
      rejectResponse(new Error(`connection closed without a complete response (${buffer.length} bytes: ${JSON.stringify(buffer.toString('latin1').slice(0, 200))})`));
    }
  };
  socket.on('data', (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    tryParse(false);
  });
  const closed = new Promise<number>((resolve) => {
    socket.once('close', () => {
      tryParse(true);
      resolve(Date.now());
    });
  });
  return {
    socket,
    write: (data) =>
      new Promise<void>((resolve, reject) => {
        if (socket.destroyed || !socket.writable) return reject(new Error('socket is closed'));
        socket.write(data, (err) => (err ? reject(err) : resolve()));
      }),
    response,
    closed,
    received: () => buffer,
    destroy: () => socket.destroy(),
  };
}

/** Sends `request` in one write and resolves with the first final response (or rejects after `timeoutMs`). */
export async function rawRequest(port: number, request: string | Buffer, timeoutMs = 5_000): Promise<RawResponse> {
  const conn = await openRaw(port);
  const timer = setTimeout(() => conn.destroy(), timeoutMs);
  try {
    await conn.write(request).catch(() => undefined); // the server may answer and close before reading it all
    return await conn.response;
  } finally {
    clearTimeout(timer);
    conn.destroy();
  }
}

export interface RequestParts {
  method?: string;
  /** The request target exactly as sent (default `/`). */
  target?: string;
  /** Host header value; null: send none (the parts' own headers may carry one). */
  host?: string | null;
  headers?: ReadonlyArray<readonly [string, string]>;
  /** Appended verbatim after the headers (each line with its own line ending). */
  rawHeaderBytes?: Buffer;
  body?: string | Buffer;
  /** Content-Type sent with a body (default application/json). */
  contentType?: string;
  /** false: keep the connection open (default: `Connection: close`). */
  close?: boolean;
}

/**
 * A request message: request line, Host, then Content-Type / Content-Length when there is a body,
 * `Connection: close`, the given headers and raw bytes, and the body.
 */
export function buildRequest(parts: RequestParts): Buffer {
  const body = parts.body === undefined ? Buffer.alloc(0) : Buffer.from(parts.body);
  const lines: string[] = [`${parts.method ?? 'GET'} ${parts.target ?? '/'} HTTP/1.1`];
  if (parts.host !== null) lines.push(`Host: ${parts.host ?? 'localhost'}`);
  if (body.length > 0) lines.push(`Content-Type: ${parts.contentType ?? 'application/json'}`, `Content-Length: ${body.length}`);
  if (parts.close !== false) lines.push('Connection: close');
  for (const [name, value] of parts.headers ?? []) lines.push(`${name}: ${value}`);
  return Buffer.concat([
    Buffer.from(`${lines.join('\r\n')}\r\n`, 'latin1'),
    parts.rawHeaderBytes ?? Buffer.alloc(0),
    Buffer.from('\r\n'),
    body,
  ]);
}

/** Bytes from a corpus string with `\r`, `\n` and `\xNN` escapes written out literally. */
export function unescapeBytes(text: string): Buffer {
  return Buffer.from(
    text
      .replace(/\\x([0-9a-fA-F]{2})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)))
      .replaceAll('\\r', '\r')
      .replaceAll('\\n', '\n'),
    'latin1',
  );
}
