// One load run with autocannon's programmatic API against one target, with
// the target process's CPU time per request (less sensitive to a busy shared
// machine than requests per second) and the load generator's own CPU use
// (near 100 % means autocannon, not the target, was the limit). autocannon is
// the fallback loader: it runs inside the harness, on the cores it measures;
// bench/lib/wrk.ts is used when wrk is installed.
import autocannon from 'autocannon';
import { cpuSeconds } from './processes.js';
import { latencySummary, type LatencySummary } from './stats.js';
import type { TokenFeed } from './token-feed.js';

export interface LoadTarget {
  name: string;
  /** Full URL, path included. */
  url: string;
  headers: Record<string, string>;
  /** The process whose CPU time is charged to this target (the proxy; the upstream for "direct"). */
  pid: number;
  /** Every request takes the next token of this feed (shapes b and c); otherwise the headers' token throughout (shape a). */
  tokens?: TokenFeed;
}

export interface LoadSettings {
  connections: number;
  durationSec: number;
}

export interface LoadSample {
  requestsPerSec: number;
  requests: number;
  latencyMs: LatencySummary;
  non2xx: number;
  errors: number;
  timeouts: number;
  statusCodes: Record<string, number>;
  /** CPU time of the target process per completed request. */
  targetCpuUsPerRequest?: number;
  /** CPU use of the load generator over the run, in % of one core. */
  loadGeneratorCpuPct: number;
  /** Requests that carried a token already sent in an earlier request, when every request should have had a new one. */
  tokensReused?: number;
}

/**
 * What every measured request sends: a tools/call, the request an MCP client
 * sends most (tools/list comes once per session). The gateway reads every
 * tools/list answer to learn the tools' Mcp-Param headers, so a benchmark of
 * nothing but tools/list would charge each request what a session pays once.
 */
export const MEASURED_BODY = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { message: 'hello' } } });

export const MCP_HEADERS: Readonly<Record<string, string>> = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
  'mcp-protocol-version': '2025-06-18',
};

export async function runLoad(target: LoadTarget, settings: LoadSettings): Promise<LoadSample> {
  const cpuBefore = cpuSeconds(target.pid);
  const loaderBefore = process.cpuUsage();
  const wallBefore = performance.now();
  const feed = target.tokens;
  const reusedBefore = feed?.reused ?? 0;
  const options: autocannon.Options = {
    url: target.url,
    connections: settings.connections,
    duration: settings.durationSec,
    // autocannon checks for the end of the run once per sample: every 100 ms, not every second.
    sampleInt: 100,
    method: 'POST',
    headers: target.headers,
    body: MEASURED_BODY,
    ...(feed
      ? {
          requests: [
            {
              method: 'POST',
              body: MEASURED_BODY,
              setupRequest: (request) => ({ ...request, headers: { ...target.headers, authorization: `Bearer ${feed.take()}` } }),
            },
          ],
        }
      : {}),
  };
  const durations: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(options, (err: unknown, res) => (err ? reject(err as Error) : resolve(res)));
    // Every response's own time: autocannon's histogram has 1 ms steps.
    instance.on('response', (_client, statusCode, _bytes, ms) => {
      if (statusCode >= 200 && statusCode < 300) durations.push(ms);
    });
  });
  const wallSec = (performance.now() - wallBefore) / 1000;
  const loader = process.cpuUsage(loaderBefore);
  const cpuAfter = cpuSeconds(target.pid);
  const statusCodes: Record<string, number> = {};
  for (const [code, stats] of Object.entries(result.statusCodeStats ?? {})) statusCodes[code] = stats.count ?? 0;
  const requests = result.requests.total;
  return {
    requestsPerSec: requests / result.duration,
    requests,
    latencyMs: latencySummary(durations),
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
    statusCodes,
    targetCpuUsPerRequest:
      cpuBefore !== undefined && cpuAfter !== undefined && requests > 0 ? ((cpuAfter - cpuBefore) * 1e6) / requests : undefined,
    loadGeneratorCpuPct: ((loader.user + loader.system) / 1e3 / (wallSec * 1000)) * 100,
    ...(feed?.kind === 'once' ? { tokensReused: feed.reused - reusedBefore } : {}),
  };
}
