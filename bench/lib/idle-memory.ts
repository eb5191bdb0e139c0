// Memory per idle SSE stream: a fresh gateway process (no garbage from the
// load runs), warmed with a few streams, then N streams opened through it by
// a client process and held open; the gateway's RSS growth divided by the
// streams that are really open (first event received). The upstream's growth
// for the same streams is kept too, as what plain node:http pays per stream.
import type { BenchEnvironment } from './environment.js';
import { GATEWAY_PATHS } from './gateway.js';
import type { Log } from './interleave.js';
import { openFilesLimit, readyPort, rssBytes, spawnReady } from './processes.js';

export interface IdleStreamsResult {
  requested: number;
  attempted: number;
  opened: number;
  failed: number;
  /** Streams the client asked for whose first event never came (queued somewhere). */
  pending: number;
  stalled: boolean;
  failures: Record<string, number>;
  openSeconds: number;
  gatewayRssMiB: { before: number; after: number };
  gatewayKiBPerStream: number;
  upstreamKiBPerStream: number;
  openFilesLimit: { gateway?: number; upstream?: number };
  notes: string[];
}

interface ClientReport extends Pick<IdleStreamsResult, 'opened' | 'failed' | 'pending' | 'stalled' | 'failures' | 'openSeconds'> {
  done: true;
}

/** Descriptors a process keeps for itself (listeners, pipes, libraries, the JWKS fetch...). */
const RESERVED_FDS = 64;
const MiB = 2 ** 20;

export async function measureIdleStreams(
  env: BenchEnvironment,
  requested: number,
  timing: { stallSec: number; settleSec: number },
  log: Log,
): Promise<IdleStreamsResult> {
  const settleMs = timing.settleSec * 1000;
  const notes: string[] = [];
  const gateway = await env.startGateway('gateway (idle streams)');
  try {
    const authorization = `Bearer ${await env.tokenFor(GATEWAY_PATHS.idle)}`;
    const url = `${gateway.url}${GATEWAY_PATHS.idle}`;
    const limits = { gateway: openFilesLimit(gateway.pid), upstream: openFilesLimit(env.upstream.pid) };
    // The gateway holds two sockets per stream (client and upstream side), the upstream one.
    const fdCap = Math.min(((limits.gateway ?? Infinity) - RESERVED_FDS) / 2, (limits.upstream ?? Infinity) - RESERVED_FDS);
    const attempted = Math.max(1, Math.min(requested, Math.floor(fdCap)));
    if (attempted < requested) {
      notes.push(`open-files limits (gateway ${limits.gateway}, upstream ${limits.upstream}) allow ${attempted} of ${requested} streams; the per-stream figure is measured on those.`);
    }

    const hold = async (count: number) =>
      spawnReady('idle-stream client', process.execPath, ['--import', 'tsx', 'bench/clients/idle-streams.ts'], {
        env: { ...process.env, BENCH_URL: url, BENCH_STREAMS: String(count), BENCH_AUTHORIZATION: authorization, BENCH_STALL_MS: String(timing.stallSec * 1000) },
        ready: (line) => (line.includes('"done":true') ? (JSON.parse(line) as ClientReport) : readyPort(line)),
        readyTimeoutMs: 120_000 + count * 10,
      });

    // Warm the route (JIT, pool, token cache) so the delta is the streams' own.
    const warm = await hold(Math.min(20, attempted));
    await warm.stop();
    await sleep(settleMs);
    const before = { gateway: rssBytes(gateway.pid), upstream: rssBytes(env.upstream.pid) };

    const client = await hold(attempted);
    const report = client.readyValue as ClientReport;
    try {
      log(`  ${report.opened} of ${attempted} streams open in ${report.openSeconds.toFixed(1)} s` + (report.stalled ? ` (opening stalled: ${report.pending} queued, never answered)` : ''));
      if (report.failed > 0) log(`  failed: ${JSON.stringify(report.failures)}`);
      await sleep(settleMs);
      const after = { gateway: rssBytes(gateway.pid), upstream: rssBytes(env.upstream.pid) };
      const perStream = (a: number | undefined, b: number | undefined) =>
        a !== undefined && b !== undefined && report.opened > 0 ? (a - b) / 1024 / report.opened : NaN;
      return {
        requested,
        attempted,
        opened: report.opened,
        failed: report.failed,
        pending: report.pending,
        stalled: report.stalled,
        failures: report.failures,
        openSeconds: report.openSeconds,
        gatewayRssMiB: { before: (before.gateway ?? NaN) / MiB, after: (after.gateway ?? NaN) / MiB },
        gatewayKiBPerStream: perStream(after.gateway, before.gateway),
        upstreamKiBPerStream: perStream(after.upstream, before.upstream),
        openFilesLimit: limits,
        notes,
      };
    } finally {
      await client.stop();
    }
  } finally {
    await gateway.stop();
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
