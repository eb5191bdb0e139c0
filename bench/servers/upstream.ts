// The benchmark's MCP upstream: plain node:http, so every hop in front of it
// pays for itself. POST /mcp answers tools/call with a fixed result; GET
// /stream sends BENCH_SSE_EVENTS events BENCH_SSE_INTERVAL_MS apart, each
// stamped with its send time; GET /idle sends one event, then stays silent.
// A request carrying an Authorization header other than the gateway's static
// credential gets 403, so a leaked client token shows up as non-2xx.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';

const credential = process.env.BENCH_UPSTREAM_CREDENTIAL;
const eventCount = Number(process.env.BENCH_SSE_EVENTS ?? 200);
const intervalMs = Number(process.env.BENCH_SSE_INTERVAL_MS ?? 5);

// About 360 bytes (the tools/list answer measured until 2026-11-26 was about 330).
const TOOL_RESULT = Buffer.from(
  JSON.stringify({
    jsonrpc: '2.0',
    id: 1,
    result: {
      content: [{ type: 'text', text: `Echo: hello. ${'The benchmark upstream answers every call with these same bytes. '.repeat(4)}` }],
      isError: false,
    },
  }),
);
const JSON_HEADERS = { 'content-type': 'application/json', 'content-length': String(TOOL_RESULT.length) };
const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };

/** Wall-clock milliseconds with sub-millisecond precision, comparable across processes on one host. */
const now = () => performance.timeOrigin + performance.now();

function answerToolCall(req: IncomingMessage, res: ServerResponse): void {
  // The body is drained but not parsed: the upstream's own cost stays minimal.
  req.resume();
  req.once('end', () => res.writeHead(200, JSON_HEADERS).end(TOOL_RESULT));
}

function streamEvents(res: ServerResponse): void {
  res.writeHead(200, SSE_HEADERS);
  const start = now();
  let sent = 0;
  // Scheduled against the start time, so timer lateness does not accumulate.
  const sendNext = () => {
    if (res.destroyed) return;
    res.write(`id: ${sent}\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{"k":${sent},"t":${now()}}}\n\n`);
    sent += 1;
    if (sent === eventCount) return void res.end();
    setTimeout(sendNext, Math.max(0, start + sent * intervalMs - now()));
  };
  sendNext();
}

function openIdleStream(res: ServerResponse): void {
  res.writeHead(200, SSE_HEADERS);
  res.write('data: {"jsonrpc":"2.0","method":"notifications/message","params":{"ready":true}}\n\n');
}

const server = createServer((req, res) => {
  const authorization = req.headers.authorization;
  if (authorization !== undefined && authorization !== credential) {
    res.writeHead(403, { 'content-type': 'text/plain' }).end('unexpected Authorization header');
    return;
  }
  if (req.method === 'POST' && req.url === '/mcp') return answerToolCall(req, res);
  if (req.method === 'GET' && req.url === '/stream') return streamEvents(res);
  if (req.method === 'GET' && req.url === '/idle') return openIdleStream(res);
  res.writeHead(404).end();
});

// bench/instructions.ts: a target slowed down by valgrind must not find its kept-alive connections closed under it.
if (process.env.BENCH_UPSTREAM_KEEP_ALIVE_MS) server.keepAliveTimeout = Number(process.env.BENCH_UPSTREAM_KEEP_ALIVE_MS);

server.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ ready: true, port: (server.address() as AddressInfo).port }));
});
process.on('SIGTERM', () => process.exit(0));
