// Times one server-sent event stream: when the first event arrives after the
// request started, how late each event arrives after the upstream stamped it
// (same host, so the clocks agree to well under a millisecond), and how many
// network reads carried the events (far fewer reads than events would mean
// that a hop buffers and releases them in bursts).
import { request } from 'node:http';
import { performance } from 'node:perf_hooks';

export interface StreamTiming {
  status: number;
  events: number;
  /** Request start → first event received. */
  firstEventMs: number;
  /** Request start → stream end. */
  totalMs: number;
  /** Per event: arrival − upstream send time. */
  delaysMs: number[];
  reads: number;
}

const wallClock = () => performance.timeOrigin + performance.now();

export function timeStream(url: string, headers: Record<string, string>, timeoutMs: number): Promise<StreamTiming> {
  return new Promise((resolve, reject) => {
    const started = wallClock();
    const delaysMs: number[] = [];
    let firstEventMs = NaN;
    let reads = 0;
    let pending = '';
    const req = request(url, { method: 'GET', headers: { accept: 'text/event-stream', ...headers }, agent: false }, (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        const arrived = wallClock();
        reads += 1;
        pending += chunk;
        let end;
        while ((end = pending.indexOf('\n\n')) !== -1) {
          const block = pending.slice(0, end);
          pending = pending.slice(end + 2);
          const data = block.split('\n').find((line) => line.startsWith('data: '));
          if (!data) continue;
          const sentAt = (JSON.parse(data.slice(6)) as { params?: { t?: number } }).params?.t;
          if (Number.isNaN(firstEventMs)) firstEventMs = arrived - started;
          if (typeof sentAt === 'number') delaysMs.push(arrived - sentAt);
        }
      });
      res.once('end', () => {
        clearTimeout(timer);
        resolve({ status: res.statusCode ?? 0, events: delaysMs.length, firstEventMs, totalMs: wallClock() - started, delaysMs, reads });
      });
      res.once('error', reject);
    });
    const timer = setTimeout(() => req.destroy(new Error(`stream ${url} did not end within ${timeoutMs} ms`)), timeoutMs);
    req.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.end();
  });
}
