// SSE through the gateway vs straight to the upstream: the upstream streams
// N events M ms apart; each round opens the same number of streams to each
// target (direct, then gateway) and times every event.
import { timeStream, type StreamTiming } from './sse.js';
import { percentile, spread, type Spread } from './stats.js';
import type { Log } from './interleave.js';

export interface StreamTarget {
  name: string;
  url: string;
  headers: Record<string, string>;
}

export interface StreamSummary {
  streams: number;
  incomplete: number;
  /** Request start → first event, median per round. */
  firstEventMs: Spread;
  /** Request start → end of stream, median per round. */
  totalMs: Spread;
  /** Arrival − upstream send time over every event of every stream. */
  eventDelayMs: { p50: number; p99: number; max: number };
  /** Network reads per event: near 1 means events arrive one by one. */
  readsPerEvent: number;
}

export async function compareStreams(
  targets: readonly StreamTarget[],
  options: { rounds: number; streamsPerRound: number; events: number; intervalMs: number; warm: boolean },
  log: Log,
): Promise<Record<string, StreamSummary>> {
  const timings = new Map<string, StreamTiming[][]>(targets.map((t) => [t.name, []]));
  const timeoutMs = options.events * options.intervalMs + 30_000;
  // One stream each first, not recorded: the route's first token check and upstream connection are not the steady state.
  if (options.warm) for (const target of targets) await timeStream(target.url, target.headers, timeoutMs);
  for (let r = 1; r <= options.rounds; r++) {
    for (const target of targets) {
      const batch = await Promise.all(Array.from({ length: options.streamsPerRound }, () => timeStream(target.url, target.headers, timeoutMs)));
      timings.get(target.name)!.push(batch);
      const first = percentile(batch.map((t) => t.firstEventMs), 50);
      const delays = batch.flatMap((t) => t.delaysMs);
      log(
        `  round ${r} ${target.name.padEnd(10)} first event ${first.toFixed(2)} ms, per-event delay p50 ${percentile(delays, 50).toFixed(2)}` +
          ` p99 ${percentile(delays, 99).toFixed(2)} max ${percentile(delays, 100).toFixed(2)} ms, ${delays.length}/${batch.length * options.events} events`,
      );
    }
  }
  const summaries: Record<string, StreamSummary> = {};
  for (const [name, rounds] of timings) {
    const all = rounds.flat();
    const delays = all.flatMap((t) => t.delaysMs);
    const events = all.reduce((n, t) => n + t.events, 0);
    summaries[name] = {
      streams: all.length,
      incomplete: all.filter((t) => t.status !== 200 || t.events !== options.events).length,
      firstEventMs: spread(rounds.map((batch) => percentile(batch.map((t) => t.firstEventMs), 50))),
      totalMs: spread(rounds.map((batch) => percentile(batch.map((t) => t.totalMs), 50))),
      eventDelayMs: { p50: percentile(delays, 50), p99: percentile(delays, 99), max: percentile(delays, 100) },
      readsPerEvent: events > 0 ? all.reduce((n, t) => n + t.reads, 0) / events : NaN,
    };
  }
  return summaries;
}
