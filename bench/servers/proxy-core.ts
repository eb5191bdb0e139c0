// Baseline: the gateway's proxy core alone — node:http in, undici Pool
// dispatch out, no authentication, no policy, no metrics, minimal header
// handling. Not a product: the floor the gateway's own layers add to, and
// the nearest thing to "the gateway with auth off" without adding that
// switch to the product.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool } from 'undici';

const target = process.env.BENCH_TARGET;
if (!target) throw new Error('BENCH_TARGET (the upstream origin) is required');

const pool = new Pool(target, { connections: 128, pipelining: 1 });
const host = new URL(target).host;
const DROPPED = new Set(['host', 'connection', 'keep-alive', 'content-length', 'transfer-encoding', 'authorization']);

const server = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.once('end', () => {
    const headers = ['host', host];
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i]!.toLowerCase();
      if (!DROPPED.has(name)) headers.push(name, req.rawHeaders[i + 1]!);
    }
    // As the gateway's forwarder: the last bytes of a body of declared length go out with end(), one write instead of two.
    let untilEnd = -1;
    let lastChunk: Buffer | undefined;
    pool.dispatch(
      { path: req.url ?? '/', method: req.method as 'GET' | 'POST', headers, body: chunks.length > 0 ? Buffer.concat(chunks) : null },
      {
        // Its presence tells undici this is a new-style (controller) handler.
        onRequestStart() {},
        onResponseStart(_controller, statusCode, responseHeaders) {
          delete responseHeaders.connection;
          delete responseHeaders['keep-alive'];
          delete responseHeaders['transfer-encoding'];
          const length = responseHeaders['content-length'];
          if (typeof length === 'string') untilEnd = Number(length);
          res.writeHead(statusCode, responseHeaders as Record<string, string | string[]>);
        },
        onResponseData(_controller, chunk) {
          if (chunk.length === untilEnd) lastChunk = chunk;
          else {
            untilEnd -= chunk.length;
            res.write(chunk);
          }
        },
        onResponseEnd() {
          res.end(lastChunk);
        },
        onResponseError() {
          if (!res.headersSent) res.writeHead(502);
          res.end();
        },
      },
    );
  });
});

server.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ ready: true, port: (server.address() as AddressInfo).port }));
});
process.on('SIGTERM', () => process.exit(0));
