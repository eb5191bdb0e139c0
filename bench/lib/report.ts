// Turns results into what people read: the goals of issue 6 checked, a
// markdown summary for the README (bench/results/latest.md) and the chart.
import type { BenchResults, Goal, TargetName, TargetSummary } from './results.js';
import { TARGET_LABELS } from './results.js';
import { ratioSpread, type Spread } from './stats.js';
import { renderChart, type Panel } from './svg-chart.js';

const fmt = (value: number, digits = 0) => (Number.isFinite(value) ? value.toFixed(digits) : '–');
const fmtInt = (value: number) => (Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : '–');
const ratio = (s: Spread | undefined) => (s && Number.isFinite(s.median) ? `${s.median.toFixed(2)}× (${s.min.toFixed(2)}–${s.max.toFixed(2)})` : '–');
const range = (s: Spread, digits = 0) => (digits === 0 ? `${fmtInt(s.min)}–${fmtInt(s.max)}` : `${fmt(s.min, digits)}–${fmt(s.max, digits)}`);

export function checkGoals(results: BenchResults): Goal[] {
  const goals: Goal[] = [];
  const ratios = results.throughput?.ratios ?? {};
  const atLeast = (goal: string, key: string, min: number) => {
    const r = ratios[key];
    goals.push({ goal, measured: r ? ratio(r) : 'not measured', met: r ? r.median >= min : null });
  };
  if (results.throughput) {
    atLeast('gateway with full auth ≥ 1.2× http-proxy without auth', 'gateway / http-proxy', 1.2);
    atLeast('gateway with full auth ≥ 0.5× nginx without auth', 'gateway / nginx', 0.5);
    atLeast('auth on ≥ 0.95× auth off', 'gateway / gateway-auth-off', 0.95);
  }
  const sse = results.sse?.targets;
  if (sse?.gateway && sse.direct) {
    const later = sse.gateway.firstEventMs.median - sse.direct.firstEventMs.median;
    const heldP99 = sse.gateway.eventDelayMs.p99 - sse.direct.eventDelayMs.p99;
    goals.push({ goal: 'SSE first event ≤ 5 ms later than direct', measured: `${later.toFixed(2)} ms later`, met: later <= 5 });
    goals.push({
      goal: 'no SSE event held back',
      measured: `per-event delay p99 +${heldP99.toFixed(2)} ms vs direct, max ${sse.gateway.eventDelayMs.max.toFixed(1)} ms; ${sse.gateway.incomplete} incomplete streams; ${sse.gateway.readsPerEvent.toFixed(2)} reads/event (direct ${sse.direct.readsPerEvent.toFixed(2)})`,
      met: sse.gateway.incomplete === 0 && heldP99 <= 5,
    });
  }
  const idle = results.idleStreams;
  if (idle) {
    goals.push({
      goal: `≤ 30 KB of memory per idle SSE stream (${idle.requested.toLocaleString('en-US')} streams)`,
      measured: idle.stalled
        ? `not measurable: only ${idle.opened.toLocaleString('en-US')} of ${idle.attempted.toLocaleString('en-US')} streams opened, the others got no answer`
        : `${fmt(idle.gatewayKiBPerStream, 1)} KiB/stream with ${idle.opened.toLocaleString('en-US')} of ${idle.attempted.toLocaleString('en-US')} streams open` +
          (idle.attempted < idle.requested ? ` (open-files limit; ${idle.requested.toLocaleString('en-US')} extrapolated: ${fmt((idle.gatewayKiBPerStream * idle.requested) / 1024)} MiB)` : ''),
      met: idle.opened === idle.attempted && idle.gatewayKiBPerStream <= 30,
    });
  }
  const loaded = [results.throughput?.targets.gateway, results.throughput?.targets['gateway-cold'], results.latency?.targets.gateway].filter(
    (t): t is TargetSummary => t !== undefined,
  );
  if (loaded.length > 0) {
    const failures = loaded.reduce((n, t) => n + t.failures, 0);
    goals.push({ goal: 'zero non-2xx answers from the gateway under load', measured: `${failures}`, met: failures === 0 });
  }
  return goals;
}

export function markdownReport(results: BenchResults): string {
  const { machine, settings } = results;
  const lines: string[] = [];
  const push = (...more: string[]) => lines.push(...more);
  push(
    `Measured ${results.date.slice(0, 10)} on ${machine.cpuModel} (${machine.cpus} cores), ${machine.os}, Node ${machine.node}` +
      `${machine.nginx ? `, nginx ${machine.nginx}` : ''}; gateway ${machine.gateway}${machine.git ? ` @ ${machine.git.commit.slice(0, 8)}${machine.git.dirty ? ' (modified src/)' : ''}` : ''}.` +
      ` Load average ${machine.loadAverage.start.toFixed(2)} at the start, ${machine.loadAverage.end?.toFixed(2) ?? '?'} at the end.` +
      (results.smoke ? ' **Smoke run: too short for conclusions.**' : ''),
    '',
  );
  const tp = results.throughput;
  if (tp) {
    push(
      `**Throughput**: POST \`tools/list\`, ${settings.connections} connections, ${settings.rounds} interleaved rounds of ${settings.durationSec} s per target (autocannon).` +
        ' Median (min–max over rounds); ratios are per round, then the median.',
      '',
      '| target | req/s | spread | vs http-proxy | vs nginx | p50 ms | p99 ms | CPU µs/req | non-2xx |',
      '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    );
    const proxy = tp.targets['http-proxy']?.rounds.map((r) => r.requestsPerSec);
    const nginx = tp.targets.nginx?.rounds.map((r) => r.requestsPerSec);
    for (const [name, t] of Object.entries(tp.targets) as [TargetName, TargetSummary][]) {
      const mine = t.rounds.map((r) => r.requestsPerSec);
      const vs = (other: number[] | undefined) => (other ? ratio(ratioSpread(mine, other)) : '–');
      push(
        `| ${t.label} | ${fmtInt(t.requestsPerSec.median)} | ${range(t.requestsPerSec)} | ${name === 'http-proxy' ? '1' : vs(proxy)} | ${name === 'nginx' ? '1' : vs(nginx)} |` +
          ` ${fmt(t.latencyP50Ms.median, 1)} | ${fmt(t.latencyP99Ms.median, 1)} | ${fmt(t.cpuUsPerRequest.median)} | ${t.failures} |`,
      );
    }
    const cold = tp.targets['gateway-cold'];
    push('');
    if (cold?.tokenCacheMissRatio !== undefined) {
      push(`The cold-token run rotated through ${settings.coldTokens.toLocaleString('en-US')} tokens (${settings.alg}); ${(cold.tokenCacheMissRatio * 100).toFixed(1)} % of its requests missed the verified-token cache.`, '');
    }
    const loader = Math.max(...Object.values(tp.targets).map((t) => t.loadGeneratorCpuPct.median));
    if (loader > 85) {
      push(`The load generator (autocannon, one core) ran at up to ${fmt(loader)} % CPU: the fastest targets may be limited by it, which understates their lead.`, '');
    }
  }
  const lat = results.latency;
  if (lat) {
    push(
      `**Latency at a fixed ${lat.rate} req/s**: open loop, one request every ${fmt(1000 / lat.rate, 2)} ms over up to ${settings.connections} keep-alive connections, ${settings.latencyRounds ?? settings.rounds} rounds of ${settings.rateDurationSec} s; every response timed.`,
      '',
      '| target | p50 ms | p99 ms | max ms |',
      '|---|---:|---:|---:|',
    );
    for (const t of Object.values(lat.targets)) {
      push(`| ${t.label} | ${fmt(t.latencyP50Ms.median, 2)} | ${fmt(t.latencyP99Ms.median, 2)} | ${fmt(Math.max(...t.rounds.map((r) => r.latencyMs.max)), 1)} |`);
    }
    push('', `Against direct, the gateway adds ${fmt(lat.addedMs.p50.median, 2)} ms at p50 (${range(lat.addedMs.p50, 2)}) and ${fmt(lat.addedMs.p99.median, 2)} ms at p99 (${range(lat.addedMs.p99, 2)}).`, '');
  }
  const sse = results.sse;
  if (sse) {
    push(
      `**SSE**: ${sse.events} events ${sse.intervalMs} ms apart; per-event delay = arrival − upstream send time.`,
      '',
      '| target | first event ms | stream total ms | event delay p50 / p99 / max ms | reads per event | incomplete |',
      '|---|---:|---:|---:|---:|---:|',
    );
    for (const [name, s] of Object.entries(sse.targets)) {
      push(
        `| ${name === 'gateway' ? TARGET_LABELS.gateway : TARGET_LABELS.direct} | ${fmt(s.firstEventMs.median, 2)} | ${fmt(s.totalMs.median, 0)} |` +
          ` ${fmt(s.eventDelayMs.p50, 2)} / ${fmt(s.eventDelayMs.p99, 2)} / ${fmt(s.eventDelayMs.max, 1)} | ${fmt(s.readsPerEvent, 2)} | ${s.incomplete} of ${s.streams} |`,
      );
    }
    push('');
  }
  const idle = results.idleStreams;
  if (idle?.stalled) {
    push(
      `**Idle SSE streams**: only ${idle.opened.toLocaleString('en-US')} of ${idle.attempted.toLocaleString('en-US')} streams opened through the gateway;` +
        ` the next ${idle.pending.toLocaleString('en-US')} waited without an answer until the harness gave up, so memory per stream was not measured.`,
      ...idle.notes.map((n) => `Note: ${n}`),
      '',
    );
  } else if (idle) {
    push(
      `**Idle SSE streams**: ${idle.opened.toLocaleString('en-US')} of ${idle.attempted.toLocaleString('en-US')} streams open through a fresh gateway` +
        ` (${idle.requested.toLocaleString('en-US')} asked for): its RSS grew ${fmt(idle.gatewayRssMiB.before)} → ${fmt(idle.gatewayRssMiB.after)} MiB,` +
        ` **${fmt(idle.gatewayKiBPerStream, 1)} KiB per stream** (the plain node:http upstream: ${fmt(idle.upstreamKiBPerStream, 1)} KiB per stream).`,
      ...idle.notes.map((n) => `Note: ${n}`),
      '',
    );
  }
  if (results.goals.length > 0) {
    push('**Goals (issue 6)**', '', '| goal | measured | met |', '|---|---|:---:|');
    for (const g of results.goals) push(`| ${g.goal} | ${g.measured} | ${g.met === null ? 'n/a' : g.met ? 'yes' : '**no**'} |`);
    push('');
  }
  for (const note of results.notes) push(`Note: ${note}`);
  return lines.join('\n').trimEnd() + '\n';
}

export function chartSvg(results: BenchResults): string {
  const panels: Panel[] = [];
  const tp = results.throughput;
  if (tp) {
    const proxy = tp.targets['http-proxy']?.rounds.map((r) => r.requestsPerSec);
    const entries = Object.entries(tp.targets) as [TargetName, TargetSummary][];
    panels.push({
      title: `Throughput, POST tools/list, ${results.settings.connections} connections`,
      unit: 'requests/s, median and min–max of rounds',
      bars: entries.map(([name, t]) => ({
        label: t.label,
        value: t.requestsPerSec.median,
        min: t.requestsPerSec.min,
        max: t.requestsPerSec.max,
        // The same per-round ratio as the table.
        ...(proxy && name !== 'http-proxy'
          ? { note: `${ratioSpread(t.rounds.map((r) => r.requestsPerSec), proxy).median.toFixed(2)}× http-proxy` }
          : {}),
        highlight: name.startsWith('gateway'),
      })),
    });
    panels.push({
      title: 'CPU time of the proxy process per request',
      unit: 'µs, lower is better; "direct" is the upstream alone',
      bars: entries.map(([name, t]) => ({ label: t.label, value: t.cpuUsPerRequest.median, min: t.cpuUsPerRequest.min, max: t.cpuUsPerRequest.max, highlight: name.startsWith('gateway') })),
    });
  }
  const lat = results.latency;
  if (lat) {
    panels.push({
      title: `Latency at a fixed ${lat.rate} req/s`,
      unit: 'ms, p50 / p99',
      bars: (Object.entries(lat.targets) as [TargetName, TargetSummary][]).flatMap(([name, t]) => [
        { label: `${t.label} p50`, value: t.latencyP50Ms.median, min: t.latencyP50Ms.min, max: t.latencyP50Ms.max, highlight: name.startsWith('gateway') },
        { label: `${t.label} p99`, value: t.latencyP99Ms.median, min: t.latencyP99Ms.min, max: t.latencyP99Ms.max, highlight: name.startsWith('gateway') },
      ]),
    });
  }
  const m = results.machine;
  return renderChart(
    'mcp-auth-gateway benchmark' + (results.smoke ? ' (smoke run)' : ''),
    `${results.date.slice(0, 10)} · ${m.cpuModel}, ${m.cpus} cores · Node ${m.node}${m.nginx ? ` · nginx ${m.nginx}` : ''} · load avg ${m.loadAverage.start.toFixed(1)}`,
    panels,
  );
}
