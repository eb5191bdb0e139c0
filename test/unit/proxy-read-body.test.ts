import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { readBody } from '../../src/proxy/read-body.js';
import { writeError } from '../../src/errors/write-error.js';
import { toGatewayError } from '../../src/errors/translate.js';

const MAX = 1024;
let server: http.Server;
let port: number;
const outcomes: Array<{ ok: boolean; status?: number }> = [];

beforeAll(async () => {
  server = http.createServer((req, res) => {
    // `/later`: read once the whole request has been parsed, as after an asynchronous token check.
    const ready = req.url === '/later' ? new Promise((resolve) => setImmediate(resolve)) : Promise.resolve();
    ready.then(() => readBody(req, MAX)).then(
      (body) => {
        outcomes.push({ ok: true });
        const text = `${body.length}:${body.toString('latin1').slice(0, 16)}`;
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': text.length }).end(text);
      },
      (err: unknown) => {
        const error = toGatewayError(err);
        outcomes.push({ ok: false, status: error.status });
        writeError(res, error);
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
});

/** Sends raw bytes and resolves with everything the server sent back until it closed or `until` matched. */
function raw(bytes: string | Buffer, until = /\r\n\r\n[\s\S]*\}|\r\n\r\n\d+:/): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (d) => {
      received += d.toString('latin1');
      if (until.test(received)) {
        socket.destroy();
        resolve(received);
      }
    });
    socket.on('error', (err) => (received ? resolve(received) : reject(err)));
    socket.on('close', () => resolve(received));
    socket.write(bytes);
  });
}

describe('readBody', () => {
  it('returns the body', async () => {
    const body = 'x'.repeat(MAX);
    const res = await raw(`POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    expect(res).toMatch(/^HTTP\/1\.1 200/);
    expect(res).toContain(`\r\n\r\n${MAX}:xxxx`);
  });

  it('returns an empty buffer without a body', async () => {
    const res = await raw('GET / HTTP/1.1\r\nHost: a\r\n\r\n');
    expect(res).toContain('\r\n\r\n0:');
  });

  it('reads a chunked body', async () => {
    const res = await raw('POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n');
    expect(res).toContain('\r\n\r\n5:abcde');
  });

  it('reads a body that arrives after its headers, in pieces', async () => {
    const socket = net.connect(port, '127.0.0.1');
    let received = '';
    socket.on('data', (d: Buffer) => (received += d.toString('latin1')));
    socket.write('POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 30));
    socket.write('abc');
    await new Promise((resolve) => setTimeout(resolve, 30));
    socket.write('def');
    await expect.poll(() => received).toContain('\r\n\r\n6:abcdef');
    socket.destroy();
  });

  it('answers 413 for a chunked body over the limit that arrives whole with its headers', async () => {
    const before = outcomes.length;
    const chunk = 'z'.repeat(MAX + 1);
    const res = await raw(`POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n${chunk.length.toString(16)}\r\n${chunk}\r\n0\r\n\r\n`, /payload_too_large"[^}]*\}/);
    expect(res).toMatch(/^HTTP\/1\.1 413/);
    expect(outcomes[before]).toEqual({ ok: false, status: 413 });
  });

  it('takes a body parsed before it is asked for, and still holds it to the limit', async () => {
    const before = outcomes.length;
    const ok = await raw(`POST /later HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello`);
    expect(ok).toContain('\r\n\r\n5:hello');
    const chunk = 'w'.repeat(MAX + 1);
    const tooLarge = await raw(`POST /later HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n${chunk.length.toString(16)}\r\n${chunk}\r\n0\r\n\r\n`, /payload_too_large"[^}]*\}/);
    expect(tooLarge).toMatch(/^HTTP\/1\.1 413/);
    expect(outcomes.slice(before)).toEqual([{ ok: true }, { ok: false, status: 413 }]);
  });

  it('answers 413 from Content-Length alone, before any body byte is sent', async () => {
    const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request({ port, host: '127.0.0.1', method: 'POST', headers: { 'content-length': String(10 * 1024 * 1024) } });
      req.on('response', resolve).on('error', reject);
      req.flushHeaders();
    });
    expect(response.statusCode).toBe(413);
    expect(response.headers.connection).toBe('close');
    const text = await new Promise<string>((resolve) => {
      let all = '';
      response.on('data', (d: Buffer) => (all += d.toString())).on('end', () => resolve(all));
    });
    expect(JSON.parse(text)).toEqual({ error: 'payload_too_large', error_description: `Request body exceeds ${MAX} bytes` });
    response.destroy();
  });

  it('answers 413 once a streamed body goes over the limit, and closes the connection', async () => {
    const before = outcomes.length;
    const chunk = 'y'.repeat(600);
    const head = 'POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n';
    const res = await raw(`${head}258\r\n${chunk}\r\n258\r\n${chunk}\r\n`, /payload_too_large"[^}]*\}/);
    expect(res).toMatch(/^HTTP\/1\.1 413/);
    expect(res.toLowerCase()).toContain('connection: close');
    expect(outcomes[before]).toEqual({ ok: false, status: 413 });
  });

  it('rejects when the client leaves mid-body', async () => {
    const before = outcomes.length;
    const socket = net.connect(port, '127.0.0.1');
    socket.write('POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc');
    await new Promise((resolve) => setTimeout(resolve, 50));
    socket.destroy();
    await expect.poll(() => outcomes.length).toBe(before + 1);
    expect(outcomes[before]!.ok).toBe(false);
  });
});
