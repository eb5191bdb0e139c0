// An open-loop load at a fixed rate for latency: requests start evenly
// spaced (1/rate apart) over keep-alive connections, whatever the answers do.
// autocannon's `overallRate` is not used here because it sends each
// connection's quota for the second back to back and then pauses, so its
// "fixed rate" is a burst of full concurrency once a second.
import { Agent, request } from 'node:http';
import { performance } from 'node:perf_hooks';
import { MEASURED_BODY, type LoadSample, type LoadTarget } from './load.js';
import { cpuSeconds } from './processes.js';
import { latencySummary } from './stats.js';

export interface PacedSettings {
  rate: number;
  durationSec: number;
  /** Most connections the agent may open; requests queue on it when all are busy. */
  connections: number;
}

const body = Buffer.from(MEASURED_BODY);

export async function runPaced(target: LoadTarget, settings: PacedSettings): Promise<LoadSample> {
  const agent = new Agent({ keepAlive: true, maxSockets: settings.connections });
  const headers = { ...target.headers, 'content-length': String(body.length) };
  const durations: number[] = [];
  const statusCodes: Record<string, number> = {};
  let non2xx = 0;
  let errors = 0;
  let inFlight = 0;
  const total = Math.max(1, Math.round(settings.rate * settings.durationSec));
  const intervalMs = 1000 / settings.rate;

  const cpuBefore = cpuSeconds(target.pid);
  const loaderBefore = process.cpuUsage();
  const started = performance.now();
  let sent = 0;
  let finish!: () => void;
  const finished = new Promise<void>((resolve) => (finish = resolve));

  const send = () => {
    sent += 1;
    inFlight += 1;
    const begun = performance.now();
    const done = (status: number | undefined) => {
      const ms = performance.now() - begun;
      if (status === undefined) errors += 1;
      else {
        statusCodes[status] = (statusCodes[status] ?? 0) + 1;
        if (status >= 200 && status < 300) durations.push(ms);
        else non2xx += 1;
      }
      inFlight -= 1;
      if (sent === total && inFlight === 0) finish();
    };
    const req = request(target.url, { method: 'POST', agent, headers }, (res) => {
      res.resume();
      res.once('end', () => done(res.statusCode));
      res.once('error', () => done(undefined));
    });
    req.once('error', () => done(undefined));
    req.end(body);
  };
  // Every millisecond, start what is due: the schedule, not the timer, sets the rate.
  const ticker = setInterval(() => {
    const due = Math.min(total, Math.floor((performance.now() - started) / intervalMs) + 1);
    while (sent < due) send();
    if (sent === total) clearInterval(ticker);
  }, 1);
  await finished;
  const wallSec = (performance.now() - started) / 1000;
  agent.destroy();
  const loader = process.cpuUsage(loaderBefore);
  const cpuAfter = cpuSeconds(target.pid);
  const completed = durations.length + non2xx;
  return {
    requestsPerSec: completed / wallSec,
    requests: completed,
    latencyMs: latencySummary(durations),
    non2xx,
    errors,
    timeouts: 0,
    statusCodes,
    targetCpuUsPerRequest: cpuBefore !== undefined && cpuAfter !== undefined && completed > 0 ? ((cpuAfter - cpuBefore) * 1e6) / completed : undefined,
    loadGeneratorCpuPct: ((loader.user + loader.system) / 1e3 / (wallSec * 1000)) * 100,
  };
}
