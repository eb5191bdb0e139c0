// Preloaded into a proxy or the gateway (node --import) by bench/sse-first-event.ts and
// bench/stdio-call-steps.ts: stamps, on the wall clock the upstream stamps its events with and
// the client reads, each step of a request through the process — parsed, its upstream request
// created and its head written (undici), the upstream's head received, a line written to a
// stdio child and its answer read back, the head flushed and the first and last bytes written to
// the client — and writes them as JSON lines to BENCH_PROBE_FILE on SIGUSR2. Only requests whose
// path starts with BENCH_PROBE_PATH are stamped. Requests are taken to come one at a time (the
// scripts send them so): a step outside a request's own objects (undici, the child's pipes) is
// given to the latest request still without it. Measuring only: the wrapped functions read the
// clock, then run as they were.
import childProcess from 'node:child_process';
import dc from 'node:diagnostics_channel';
import { writeFileSync } from 'node:fs';
import { ServerResponse } from 'node:http';
import { syncBuiltinESMExports } from 'node:module';
import { performance } from 'node:perf_hooks';

const path = process.env.BENCH_PROBE_PATH ?? '/';
const file = process.env.BENCH_PROBE_FILE;
const now = () => performance.timeOrigin + performance.now();
/** One record per stamped request, in arrival order; each step once (the first time it happens). */
const records = [];
const PROBE = Symbol('step-probe');
const stamp = (record, step) => {
  if (record !== undefined && record[step] === undefined) record[step] = now();
};
/** The latest request (of `method`, when given) that has `after` (when given) and not yet `step`. */
const latestWithout = (step, after, method) => {
  const record = method === undefined ? records.at(-1) : records.findLast((r) => r.method === method);
  return record !== undefined && record[step] === undefined && (after === undefined || record[after] !== undefined) ? record : undefined;
};

dc.subscribe('http.server.request.start', ({ request, response }) => {
  if (!request.url?.startsWith(path)) return;
  const record = { method: request.method, request: now() };
  records.push(record);
  response[PROBE] = record;
});

const upstreamRecords = new WeakMap();
dc.subscribe('undici:request:create', ({ request }) => {
  if (!String(request.path).startsWith(path)) return;
  const record = latestWithout('upstreamCreate');
  if (record === undefined) return;
  upstreamRecords.set(request, record);
  stamp(record, 'upstreamCreate');
});
dc.subscribe('undici:client:sendHeaders', ({ request }) => stamp(upstreamRecords.get(request), 'upstreamHeadSent'));
dc.subscribe('undici:request:headers', ({ request }) => stamp(upstreamRecords.get(request), 'upstreamHeadReceived'));

// A stdio child: the line of a request written to its stdin, and the next bytes read from its stdout.
const spawn = childProcess.spawn;
childProcess.spawn = function probedSpawn(...args) {
  const child = spawn.apply(this, args);
  const stdin = child.stdin;
  if (stdin) {
    const write = stdin.write;
    stdin.write = function probedStdinWrite(chunk, ...rest) {
      if (typeof chunk === 'string' && chunk.includes('"id":')) stamp(latestWithout('childWrite', 'request', 'POST'), 'childWrite');
      return write.call(this, chunk, ...rest);
    };
  }
  child.stdout?.prependListener('data', () => stamp(latestWithout('childRead', 'childWrite', 'POST'), 'childRead'));
  return child;
};
syncBuiltinESMExports();

const write = ServerResponse.prototype.write;
ServerResponse.prototype.write = function probedWrite(...args) {
  stamp(this[PROBE], 'firstWrite');
  return write.apply(this, args);
};
const end = ServerResponse.prototype.end;
ServerResponse.prototype.end = function probedEnd(...args) {
  stamp(this[PROBE], 'end');
  return end.apply(this, args);
};
const flushHeaders = ServerResponse.prototype.flushHeaders;
ServerResponse.prototype.flushHeaders = function probedFlush(...args) {
  stamp(this[PROBE], 'headFlushed');
  return flushHeaders.apply(this, args);
};

process.on('SIGUSR2', () => {
  if (file) writeFileSync(file, records.map((r) => JSON.stringify(r)).join('\n') + '\n');
});
