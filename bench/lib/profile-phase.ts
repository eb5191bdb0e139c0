// `--profile`: a fresh gateway per scenario run with --cpu-prof under the same
// load as the throughput runs (cached token, then a new token per request);
// the profile is written when the gateway exits, then summarised.
import { copyFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchEnvironment } from './environment.js';
import { GATEWAY_PATHS } from './gateway.js';
import type { Log } from './interleave.js';
import { MCP_HEADERS, runLoad, type LoadSettings, type TokenRotation } from './load.js';
import { profileMarkdown, summariseProfile, type ProfileSummary } from './cpu-profile.js';

const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

export interface ProfileResult {
  scenario: string;
  file: string;
  requestsPerSec: number;
  requests: number;
  summary: ProfileSummary;
}

export async function profileGateway(
  env: BenchEnvironment,
  settings: LoadSettings,
  coldTokens: TokenRotation,
  outDir: string,
  stamp: string,
  log: Log,
): Promise<{ results: ProfileResult[]; markdown: string }> {
  const results: ProfileResult[] = [];
  const token = await env.tokenFor(GATEWAY_PATHS.mcp);
  const scenarios = [
    { scenario: 'cached-token', tokens: undefined },
    { scenario: 'cold-token', tokens: coldTokens },
  ];
  for (const { scenario, tokens } of scenarios) {
    const dir = await mkdtemp(join(tmpdir(), 'mag-bench-prof-'));
    try {
      const gateway = await env.startGateway(`gateway (profile ${scenario})`, dir);
      let requestsPerSec: number;
      let requests: number;
      const window = { startUs: 0, endUs: 0 };
      try {
        window.startUs = monotonicUs();
        const sample = await runLoad(
          {
            name: scenario,
            url: `${gateway.url}${GATEWAY_PATHS.mcp}`,
            headers: { ...MCP_HEADERS, authorization: `Bearer ${token}` },
            pid: gateway.pid,
            ...(tokens ? { tokens } : {}),
          },
          settings,
        );
        window.endUs = monotonicUs();
        requestsPerSec = sample.requestsPerSec;
        requests = sample.requests;
      } finally {
        await gateway.stop();
      }
      const written = (await readdir(dir)).find((name) => name.endsWith('.cpuprofile'));
      if (!written) throw new Error(`the gateway wrote no CPU profile into ${dir}`);
      const file = join(outDir, `profile-${stamp}-${scenario}.cpuprofile`);
      // Copied, not renamed: the temporary directory may be on another file system.
      await copyFile(join(dir, written), file);
      const summary = summariseProfile(file, window);
      log(`  ${scenario}: ${Math.round(requestsPerSec)} req/s while profiled → ${file}`);
      results.push({ scenario, file, requestsPerSec, requests, summary });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
  const markdown = [
    '# Gateway CPU profiles',
    '',
    `Open the .cpuprofile files in Chrome DevTools (Performance → Load profile) or https://www.speedscope.app for flame graphs.`,
    '',
    ...results.map((r) => profileMarkdown(r.summary, `${r.scenario} (${Math.round(r.requestsPerSec)} req/s while profiled)`, r.requests)),
  ].join('\n');
  return { results, markdown };
}
