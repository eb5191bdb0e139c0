// Opens BENCH_STREAMS idle event streams to BENCH_URL and holds them until it
// is stopped. Its own process, so its sockets count against its own
// open-files limit, not the harness's. A stream counts as open once its first
// event arrived. Prints `{"done":true,...}` when every stream is open or
// failed, or when opening stalled (a hop that queues streams past a limit).
import { request, type ClientRequest } from 'node:http';

const url = process.env.BENCH_URL;
const count = Number(process.env.BENCH_STREAMS ?? 0);
const authorization = process.env.BENCH_AUTHORIZATION;
const stallMs = Number(process.env.BENCH_STALL_MS ?? 10_000);
/** Streams being opened at once: enough to be quick, few enough not to trip accept queues. */
const OPENING_AT_ONCE = 256;

if (!url || !(count > 0)) throw new Error('BENCH_URL and BENCH_STREAMS are required');

const held: ClientRequest[] = [];
const failures: Record<string, number> = {};
let started = 0;
let opened = 0;
let failed = 0;
let lastProgress = Date.now();
const begun = Date.now();

function fail(reason: string): void {
  failed += 1;
  failures[reason] = (failures[reason] ?? 0) + 1;
  lastProgress = Date.now();
  openMore();
}

function openOne(): void {
  started += 1;
  let settled = false;
  const settle = (outcome: 'opened' | string) => {
    if (settled) return;
    settled = true;
    if (outcome === 'opened') {
      opened += 1;
      lastProgress = Date.now();
      openMore();
    } else fail(outcome);
  };
  const req = request(url!, {
    method: 'GET',
    agent: false,
    headers: { accept: 'text/event-stream', ...(authorization ? { authorization } : {}) },
  });
  req.once('response', (res) => {
    if (res.statusCode !== 200) {
      res.resume();
      return settle(`status ${res.statusCode}`);
    }
    res.once('data', () => settle('opened'));
    res.once('end', () => settle('ended early'));
  });
  req.once('error', (err: NodeJS.ErrnoException) => settle(err.code ?? err.message));
  req.end();
  held.push(req);
}

function openMore(): void {
  while (started < count && started - opened - failed < OPENING_AT_ONCE) openOne();
  if (opened + failed === count) report(false);
}

let reported = false;
function report(stalled: boolean): void {
  if (reported) return;
  reported = true;
  clearInterval(watchdog);
  console.log(JSON.stringify({ done: true, requested: count, opened, failed, pending: started - opened - failed, stalled, failures, openSeconds: (Date.now() - begun) / 1000 }));
}

const watchdog = setInterval(() => {
  if (Date.now() - lastProgress > stallMs) report(true);
}, 250);

process.on('SIGTERM', () => process.exit(0));
openMore();
