// Turns results into what people read: the goals of issues 13 and 23 checked, a
// markdown summary for docs/benchmark.md (bench/results/latest.md) and the chart.
import { LOADER_LIMIT_PCT } from './loader.js';
import { ROUTE_PHASES, type RoutePhase, type RoutePhaseResult } from './route-phases.js';
import type { BenchResults, Goal, ShapeSummary, TargetName, TargetSummary } from './results.js';
import { TARGET_LABELS } from './results.js';
import type { ShapeName } from './shapes.js';
import { ratioSpread, type Spread } from './stats.js';
import { renderChart, type Panel } from './svg-chart.js';
import { userOAuthGoal } from './user-oauth-summary.js';
import { aggregateGoal } from './aggregate-summary.js';

const fmt = (value: number, digits = 0) => (Number.isFinite(value) ? value.toFixed(digits) : '–');
const fmtInt = (value: number) => (Number.isFinite(value) ? Math.round(value).toLocaleString('en-US') : '–');
const ratio = (s: Spread | undefined) => (s && Number.isFinite(s.median) ? `${s.median.toFixed(2)}× (${s.min.toFixed(2)}–${s.max.toFixed(2)})` : '–');
const range = (s: Spread, digits = 0) => (digits === 0 ? `${fmtInt(s.min)}–${fmtInt(s.max)}` : `${fmt(s.min, digits)}–${fmt(s.max, digits)}`);

export function checkGoals(results: BenchResults): Goal[] {
  const goals: Goal[] = [];
  const shapes = results.throughput?.shapes ?? {};
  const atLeast = (goal: string, shape: ShapeName, key: string, min: number) => {
    const r = shapes[shape]?.ratios[key];
    goals.push({ goal, measured: r ? ratio(r) : 'not measured', met: r ? r.median >= min : null });
  };
  const atMost = (goal: string, shape: ShapeName, key: string, max: number) => {
    const r = shapes[shape]?.ratios[key];
    goals.push({ goal, measured: r ? ratio(r) : 'not measured', met: r ? r.median <= max : null });
  };
  if (results.throughput) {
    // Issue 23: the gateway's own steps cost little beside its proxy core (CPU per request, same rounds).
    atMost('(a) CPU per request: gateway with JWT ≤ 1.2× its proxy core', 'a', 'CPU gateway / proxy-core', 1.2);
    atMost('(b) 16 users: CPU per request, gateway with JWT ≤ 1.2× its proxy core', 'b16', 'CPU gateway / proxy-core', 1.2);
    // The shape the gateway sees behind an ingress: many users' tokens on each kept-alive connection.
    atLeast('(b) 16 users: gateway with full auth ≥ 1.3× http-proxy without auth', 'b16', 'gateway / http-proxy', 1.3);
    atLeast('(b) 16 users: gateway with full auth ≥ 0.5× nginx (1 worker) without auth', 'b16', 'gateway / nginx', 0.5);
    atLeast('(b) 16 users: auth on ≥ 0.9× auth off', 'b16', 'gateway / gateway-auth-off', 0.9);
    atLeast(`(c) a new ${results.settings.alg} token every request: gateway ≥ 0.6× http-proxy`, 'c', 'gateway / http-proxy', 0.6);
  }
  const sse = results.sse?.targets;
  if (sse?.gateway && sse.direct) {
    const later = sse.gateway.firstEventMs.median - sse.direct.firstEventMs.median;
    const heldP99 = sse.gateway.eventDelayMs.p99 - sse.direct.eventDelayMs.p99;
    goals.push({ goal: 'SSE first event ≤ 2 ms later than direct', measured: `${later.toFixed(2)} ms later`, met: later <= 2 });
    goals.push({
      goal: 'no SSE event held back',
      measured: `per-event delay p99 +${heldP99.toFixed(2)} ms vs direct, max ${sse.gateway.eventDelayMs.max.toFixed(1)} ms; ${sse.gateway.incomplete} incomplete streams; ${sse.gateway.readsPerEvent.toFixed(2)} reads/event (direct ${sse.direct.readsPerEvent.toFixed(2)})`,
      met: sse.gateway.incomplete === 0 && heldP99 <= 5,
    });
  }
  const idle = results.idleStreams;
  if (idle) {
    goals.push({
      goal: `≤ 25 KiB of memory per idle SSE stream (${idle.requested.toLocaleString('en-US')} streams)`,
      measured: idle.stalled
        ? `not measurable: only ${idle.opened.toLocaleString('en-US')} of ${idle.attempted.toLocaleString('en-US')} streams opened, the others got no answer`
        : `${fmt(idle.gatewayKiBPerStream, 1)} KiB/stream with ${idle.opened.toLocaleString('en-US')} of ${idle.attempted.toLocaleString('en-US')} streams open` +
          (idle.attempted < idle.requested ? ` (open-files limit; ${idle.requested.toLocaleString('en-US')} extrapolated: ${fmt((idle.gatewayKiBPerStream * idle.requested) / 1024)} MiB)` : ''),
      met: idle.opened === idle.attempted && idle.gatewayKiBPerStream <= 25,
    });
  }
  const stdio = results.routes?.stdio?.overheadP50Ms;
  if (stdio) {
    const overhead = Object.entries(stdio).find(([key]) => key.startsWith('1 session') && key.endsWith('/ gateway'))?.[1];
    goals.push({
      goal: 'stdio `tools/call` p50 ≤ 1 ms later than a direct stdio client (server-memory, one session)',
      measured: overhead === undefined ? 'not measured' : `${overhead.toFixed(2)} ms later`,
      met: overhead === undefined ? null : overhead <= 1,
    });
  }
  // Issue 23: each user's own upstream token costs next to nothing beside a shared one.
  if (results.userOAuth) goals.push(userOAuthGoal(results.userOAuth));
  // Issue 23: one route in front of three servers costs little beyond the slowest of them.
  if (results.aggregate) goals.push(aggregateGoal(results.aggregate));
  const loaded = [...Object.values(shapes).map((shape) => shape.targets.gateway), results.latency?.targets.gateway].filter(
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
    const { loader } = tp;
    push(
      `**Throughput**: POST \`tools/call\`, ${settings.connections} connections, ${settings.rounds} interleaved round${settings.rounds === 1 ? '' : 's'} of ${tp.runSeconds} s per target and shape.` +
        ` Loaded by ${loader.name} ${loader.version}` +
        (loader.name === 'wrk' ? ` (${loader.threads} threads, a process of its own)` : ' (in the harness process)') +
        `; its CPU use, in % of one core, is in the loader column (⚠ at ${LOADER_LIMIT_PCT} % or more: the loader may have been the limit).` +
        ' Median (min–max over rounds); ratios are per round, then the median. CPU µs/req is the target process\'s CPU time per request, whatever the loader.',
      '',
    );
    if (loader.note) push(`Note: ${loader.note}`, '');
    for (const [shapeName, shape] of Object.entries(tp.shapes) as [ShapeName, ShapeSummary][]) {
      push(...shapeTable(shapeName, shape, results), '');
    }
    const across = Object.entries(tp.ratios);
    if (across.length > 0) {
      push(`Across shapes, the gateway's requests/s: ${across.map(([key, r]) => `${key} ${ratio(r)}`).join('; ')}.`, '');
    }
    const limited = (Object.entries(tp.shapes) as [ShapeName, ShapeSummary][]).flatMap(([shapeName, shape]) =>
      (Object.entries(shape.targets) as [TargetName, TargetSummary][]).filter(([, t]) => t.loaderLimitedRounds > 0).map(([name, t]) => `${name} in ${shapeName} (${t.loaderLimitedRounds} of ${t.rounds.length} rounds)`),
    );
    if (limited.length > 0) {
      push(`The loader used ${LOADER_LIMIT_PCT} % of a core or more for ${limited.join(', ')}: those targets may have been held back by it, which understates them.`, '');
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
  for (const [phase, route] of Object.entries(results.routes ?? {}) as [RoutePhase, RoutePhaseResult][]) {
    push(`**${ROUTE_PHASES[phase].title}** (\`${route.script}\`, its own report):`, '', '```', route.output.trim(), '```', '');
  }
  if (results.goals.length > 0) {
    push('**Goals (issues 13 and 23)**', '', '| goal | measured | met |', '|---|---|:---:|');
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
    for (const [shapeName, shape] of Object.entries(tp.shapes) as [ShapeName, ShapeSummary][]) {
      const proxy = shape.targets['http-proxy']?.rounds.map((r) => r.requestsPerSec);
      const entries = Object.entries(shape.targets) as [TargetName, TargetSummary][];
      panels.push({
        title: `Throughput, ${shape.label}${shapeName === 'c' ? ` (${results.settings.alg}, a pool of ${shape.tokens.toLocaleString('en-US')})` : ''}`,
        unit: `requests/s, median and min–max of rounds; ${tp.loader.name}, ${results.settings.connections} connections`,
        bars: entries.map(([name, t]) => ({
          label: t.label,
          value: t.requestsPerSec.median,
          min: t.requestsPerSec.min,
          max: t.requestsPerSec.max,
          // The same per-round ratio as the table.
          ...(proxy && name !== 'http-proxy' ? { note: `${ratioSpread(t.rounds.map((r) => r.requestsPerSec), proxy).median.toFixed(2)}× http-proxy` } : {}),
          highlight: name.startsWith('gateway'),
        })),
      });
    }
    const gatewayCpu = Object.values(tp.shapes).flatMap((shape) => {
      const t = shape.targets.gateway;
      return t ? [{ label: `gateway, ${shape.label}`, value: t.cpuUsPerRequest.median, min: t.cpuUsPerRequest.min, max: t.cpuUsPerRequest.max, highlight: true }] : [];
    });
    const reference = tp.shapes.b16 ?? tp.shapes.a;
    const baselineCpu = (Object.entries(reference?.targets ?? {}) as [TargetName, TargetSummary][])
      .filter(([name]) => name !== 'gateway')
      .map(([, t]) => ({ label: t.label, value: t.cpuUsPerRequest.median, min: t.cpuUsPerRequest.min, max: t.cpuUsPerRequest.max }));
    panels.push({
      title: 'CPU time of the proxy process per request',
      unit: `µs, lower is better; the gateway in every shape, the others in ${reference?.label ?? '–'}; "direct" is the upstream alone`,
      bars: [...gatewayCpu, ...baselineCpu],
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

/** One shape's table and what to know about its tokens. */
function shapeTable(shapeName: ShapeName, shape: ShapeSummary, results: BenchResults): string[] {
  const lines = [
    `*${shape.label}*${shape.tokens > 1 ? `: ${shape.tokens.toLocaleString('en-US')} distinct tokens` : ''}`,
    '',
    '| target | req/s | spread | vs http-proxy | vs nginx | p50 ms | p99 ms | CPU µs/req | loader CPU | non-2xx |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  const proxy = shape.targets['http-proxy']?.rounds.map((r) => r.requestsPerSec);
  const nginx = shape.targets.nginx?.rounds.map((r) => r.requestsPerSec);
  for (const [name, t] of Object.entries(shape.targets) as [TargetName, TargetSummary][]) {
    const mine = t.rounds.map((r) => r.requestsPerSec);
    const vs = (other: number[] | undefined) => (other ? ratio(ratioSpread(mine, other)) : '–');
    const loader = `${fmt(t.loadGeneratorCpuPct.median)} %${t.loaderLimitedRounds > 0 ? ' ⚠' : ''}`;
    lines.push(
      `| ${t.label} | ${fmtInt(t.requestsPerSec.median)} | ${range(t.requestsPerSec)} | ${name === 'http-proxy' ? '1' : vs(proxy)} | ${name === 'nginx' ? '1' : vs(nginx)} |` +
        ` ${fmt(t.latencyP50Ms.median, 1)} | ${fmt(t.latencyP99Ms.median, 1)} | ${fmt(t.cpuUsPerRequest.median)} | ${loader} | ${t.failures} |`,
    );
  }
  const gateway = shape.targets.gateway;
  const facts: string[] = [];
  if (gateway?.tokenCacheMissRatio !== undefined) {
    facts.push(`${(gateway.tokenCacheMissRatio * 100).toFixed(1)} % of the gateway's token lookups missed its verified-token cache`);
  }
  if (shapeName === 'c') {
    facts.push(`tokens signed with ${results.settings.alg}, a pool of ${results.settings.coldTokens.toLocaleString('en-US')} walked once per target`);
    if (gateway?.tokensReused) facts.push(`**${gateway.tokensReused.toLocaleString('en-US')} of the gateway's requests reused a token** (the pool was too small: --cold-tokens)`);
  }
  if (facts.length > 0) lines.push('', `In this shape ${facts.join('; ')}.`);
  return lines;
}
