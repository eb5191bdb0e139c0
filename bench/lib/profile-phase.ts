// `--profile`: fresh processes run with --cpu-prof under the throughput load:
// the gateway's proxy core alone (no auth), and the gateway in the traffic
// shapes of bench/lib/shapes.ts: one token per connection (a), 16 users'
// tokens rotating on every connection (b16), a new token per request (c). Each profile is written when
// its process exits and summarised over the load run only; the difference
// between the gateway and its proxy core, per area, shows where the gateway's
// own layers spend their time.
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchEnvironment } from './environment.js';
import { GATEWAY_PATHS } from './gateway.js';
import type { Log, Runner } from './interleave.js';
import { MCP_HEADERS, type LoadSettings } from './load.js';
import { TokenFeed } from './token-feed.js';
import { profileMarkdown, summariseProfile, type ProfileSummary } from './cpu-profile.js';
import { readyPort, spawnReady } from './processes.js';

const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

export interface ProfileResult {
  scenario: string;
  file: string;
  requestsPerSec: number;
  requests: number;
  summary: ProfileSummary;
}

interface Profiled {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

interface Scenario {
  scenario: string;
  start(profileDir: string): Promise<Profiled>;
  headers: Record<string, string>;
  tokens?: TokenFeed;
}

export async function profileGateway(
  env: BenchEnvironment,
  settings: LoadSettings,
  tokens: { users16: readonly string[]; pool: readonly string[] },
  outDir: string,
  stamp: string,
  log: Log,
  runLoad: Runner<LoadSettings>,
): Promise<{ results: ProfileResult[]; markdown: string }> {
  const bearer = { ...MCP_HEADERS, authorization: `Bearer ${await env.tokenFor(GATEWAY_PATHS.mcp)}` };
  const startGateway = (name: string, authOff = false) => async (dir: string) => {
    const gateway = await env.startGateway(name, dir, authOff);
    return { url: gateway.url, pid: gateway.pid, stop: () => gateway.stop() };
  };
  const scenarios: Scenario[] = [
    {
      scenario: 'proxy-core',
      start: async (dir) => {
        const core = await spawnReady('proxy core (profile)', process.execPath, ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--import', 'tsx', 'bench/servers/proxy-core.ts'], {
          env: { ...process.env, BENCH_TARGET: env.upstream.url },
          ready: readyPort,
        });
        return { url: `http://127.0.0.1:${core.readyValue as number}`, pid: core.pid, stop: () => core.stop() };
      },
      // The gateway's request bytes, token included (dropped unread), as in the throughput runs.
      headers: bearer,
    },
    // The same gateway process with no token looked at: what the gateway's own steps cost besides authentication.
    { scenario: 'auth-off', start: startGateway('gateway (profile, auth off)', true), headers: bearer },
    { scenario: 'cached-token', start: startGateway('gateway (profile, cached token)'), headers: bearer },
    { scenario: 'users-16', start: startGateway('gateway (profile, 16 users per connection)'), headers: bearer, tokens: new TokenFeed('rotate', tokens.users16) },
    { scenario: 'cold-token', start: startGateway('gateway (profile, cold tokens)'), headers: bearer, tokens: new TokenFeed('once', tokens.pool) },
  ];

  const results: ProfileResult[] = [];
  for (const { scenario, start, headers, tokens } of scenarios) {
    const dir = await mkdtemp(join(tmpdir(), 'mag-bench-prof-'));
    try {
      const target = await start(dir);
      const window = { startUs: 0, endUs: 0 };
      let sample;
      try {
        window.startUs = monotonicUs();
        sample = await runLoad({ name: scenario, url: `${target.url}${GATEWAY_PATHS.mcp}`, headers, pid: target.pid, ...(tokens ? { tokens } : {}) }, settings);
        window.endUs = monotonicUs();
      } finally {
        // The profile is written as the process exits.
        await target.stop();
      }
      const written = (await readdir(dir)).find((name) => name.endsWith('.cpuprofile'));
      if (!written) throw new Error(`${scenario}: no CPU profile was written into ${dir}`);
      const file = join(outDir, `profile-${stamp}-${scenario}.cpuprofile`);
      // Copied, not renamed: the temporary directory may be on another file system.
      await copyFile(join(dir, written), file);
      const summary = summariseProfile(file, window);
      log(`  ${scenario}: ${Math.round(sample.requestsPerSec)} req/s while profiled → ${file}`);
      results.push({ scenario, file, requestsPerSec: sample.requestsPerSec, requests: sample.requests, summary });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }

  const core = results.find((r) => r.scenario === 'proxy-core');
  const compared = [
    { scenario: 'auth-off', title: 'auth off, one token per connection' },
    { scenario: 'cached-token', title: 'one token per connection' },
    { scenario: 'users-16', title: '16 users per connection' },
  ].flatMap(({ scenario, title }) => {
    const gateway = results.find((r) => r.scenario === scenario);
    return core && gateway ? [differenceMarkdown(gateway, core, title), ''] : [];
  });
  const markdown = [
    '# CPU profiles: the gateway and its proxy core',
    '',
    'Open the .cpuprofile files in https://www.speedscope.app or Chrome DevTools (Performance → Load profile) for flame graphs.',
    '',
    ...compared,
    ...results.map((r) => profileMarkdown(r.summary, `${r.scenario} (${Math.round(r.requestsPerSec)} req/s while profiled)`, r.requests)),
  ].join('\n');
  return { results, markdown };
}

/** µs per request by area: the gateway minus its proxy core, largest differences first. */
function differenceMarkdown(gateway: ProfileResult, core: ProfileResult, title: string): string {
  const perRequest = (r: ProfileResult) => new Map(Object.entries(r.summary.areaUs).map(([area, us]) => [area, us / r.requests]));
  const [g, c] = [perRequest(gateway), perRequest(core)];
  const busy = (r: ProfileResult) => (r.summary.busyMs * 1000) / r.requests;
  const rows = [...new Set([...g.keys(), ...c.keys()])]
    .filter((area) => area !== '(idle)')
    .map((area) => ({ area, gateway: g.get(area) ?? 0, core: c.get(area) ?? 0 }))
    .map((row) => ({ ...row, diff: row.gateway - row.core }))
    .sort((a, b) => b.diff - a.diff)
    .slice(0, 25);
  return [
    `## Where the gateway spends more than its proxy core (${title})`,
    '',
    `Busy JavaScript-thread time per request: gateway ${busy(gateway).toFixed(1)} µs, proxy core ${busy(core).toFixed(1)} µs.`,
    '',
    '| area | gateway µs/req | proxy core µs/req | difference |',
    '|---|---:|---:|---:|',
    ...rows.map((r) => `| \`${r.area}\` | ${r.gateway.toFixed(1)} | ${r.core.toFixed(1)} | ${r.diff >= 0 ? '+' : ''}${r.diff.toFixed(1)} |`),
  ].join('\n');
}
