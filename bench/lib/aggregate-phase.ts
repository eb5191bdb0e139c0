// The `aggregate` phase of `npm run bench` (issue 22, issue 23's goal): tools/list
// through an aggregated route of three real upstreams (server-everything over
// Streamable HTTP, server-memory and server-filesystem over stdio) against each
// of them alone on a route of its own, one gateway process (the build), in
// interleaved rounds: each round measures every target in turn (the order
// rotated), sequential requests on one open session each, and takes each
// target's p50. The merged list's cost is its p50 minus the slowest alone's.
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../test/helpers/net.js';
import { startLocalIssuer } from '../../test/helpers/local-issuer.js';
import { serverBin } from '../../test/helpers/stdio-stage.js';
import { startEverythingServer } from '../../test/helpers/upstream.js';
import { aggregateSummary, type AggregatePhaseResult, type AggregateRound } from './aggregate-summary.js';
import type { Log } from './interleave.js';
import { MCP_HEADERS } from './load.js';
import { spawnReady } from './processes.js';
import { percentile } from './stats.js';

export interface AggregatePhaseOptions {
  /** The node arguments that run `mcp-auth-gateway` (the build, or the sources through tsx). */
  gatewayArgs: string[];
  rounds: number;
  /** tools/list requests per target per round. */
  calls: number;
}

const ALL = '/all/mcp';

export async function measureAggregate(o: AggregatePhaseOptions, log: Log): Promise<AggregatePhaseResult> {
  const [everything, issuer, port, root] = await Promise.all([startEverythingServer(), startLocalIssuer(), freePort(), mkdtemp(join(tmpdir(), 'mag-bench-agg-root-'))]);
  const origin = `http://127.0.0.1:${port}`;
  const upstreams: Record<string, unknown> = {
    everything: { upstream: everything.url },
    memory: { upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } },
    files: { upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-filesystem'), root] } } },
  };
  const dir = await writeConfig(port, issuer.issuer, issuer.jwksUri, upstreams);
  const gateway = await spawnReady('gateway-aggregate', process.execPath, [...o.gatewayArgs, 'serve', '--config', dir], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME },
    ready: (line) => (line.includes('"gateway listening"') ? true : undefined),
    readyTimeoutMs: 60_000,
  });
  try {
    const paths = [ALL, ...Object.keys(upstreams).map((name) => `/${name}/mcp`)];
    const sessions = await Promise.all(paths.map(async (path) => openSession(`${origin}${path}`, await issuer.token({ audience: `${origin}${path}`, sub: 'bench-aggregate', scope: 'mcp:read' }))));
    const rounds: AggregateRound[] = [];
    for (let round = 0; round < o.rounds; round++) {
      const p50: Record<string, number> = {};
      let failures = 0;
      for (let k = 0; k < sessions.length; k++) {
        const i = (k + round) % sessions.length;
        const measured = await listTimes(sessions[i]!, o.calls);
        p50[paths[i]!] = percentile(measured.ms, 50);
        failures += measured.failures;
      }
      const together = await listTimesAtOnce(sessions.slice(1), o.calls);
      failures += together.failures;
      const alone = Object.fromEntries(Object.keys(upstreams).map((name) => [name, p50[`/${name}/mcp`]!]));
      rounds.push({ merged: p50[ALL]!, alone, together: percentile(together.ms, 50), failures });
      log(`  round ${round + 1}: merged ${p50[ALL]!.toFixed(2)} ms; alone ${Object.entries(alone).map(([n, v]) => `${n} ${v.toFixed(2)}`).join(', ')} ms; the three routes at once ${percentile(together.ms, 50).toFixed(2)} ms (p50 of ${o.calls} tools/list each)`);
    }
    return aggregateSummary(rounds);
  } finally {
    await gateway.stop();
    await Promise.allSettled([everything.close(), issuer.close(), rm(dir, { recursive: true, force: true }), rm(root, { recursive: true, force: true })]);
  }
}

/** gateway.yaml, one aggregated route of the three upstreams and a route of its own for each. */
async function writeConfig(port: number, issuer: string, jwksUri: string, upstreams: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'mag-bench-agg-'));
  const json = (value: unknown) => JSON.stringify(value) + '\n'; // YAML is a superset of JSON
  await writeFile(join(dir, 'gateway.yaml'), json({ listen: { host: '127.0.0.1', port }, public_url: `http://127.0.0.1:${port}`, audit: { sink: 'none' }, log_level: 'info' }));
  const common = { authorization_servers: [issuer], token: { jwt: { issuer, jwks_uri: jwksUri, algorithms: ['ES256'] } }, scopes_supported: ['mcp:read'], required_scopes: ['mcp:read'] };
  await writeFile(join(dir, 'all.yaml'), json({ path: ALL, upstreams, ...common }));
  for (const [name, entry] of Object.entries(upstreams)) await writeFile(join(dir, `${name}.yaml`), json({ path: `/${name}/mcp`, ...(entry as object), ...common }));
  return dir;
}

interface Session {
  url: string;
  headers: Record<string, string>;
}

/** initialize and notifications/initialized: the session every tools/list of this target then uses. */
async function openSession(url: string, token: string): Promise<Session> {
  const headers: Record<string, string> = { ...MCP_HEADERS, authorization: `Bearer ${token}` };
  const init = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'bench', version: '1' } } }) });
  await init.text();
  const id = init.headers.get('mcp-session-id');
  if (!init.ok || !id) throw new Error(`aggregate phase: initialize on ${url} answered ${init.status}`);
  const session = { url, headers: { ...headers, 'mcp-session-id': id, 'mcp-protocol-version': '2025-06-18' } };
  await (await fetch(url, { method: 'POST', headers: session.headers, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();
  return session;
}

/** One tools/list on one session: whether its answer was a result. */
async function listed(session: Session, id: number): Promise<boolean> {
  const res = await fetch(session.url, { method: 'POST', headers: session.headers, body: JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/list' }) });
  const body = await res.text();
  return res.ok && body.includes('"tools"');
}

/** `calls` sequential tools/list on one session: each one's time, and the answers that were not a result. */
async function listTimes(session: Session, calls: number): Promise<{ ms: number[]; failures: number }> {
  return listTimesAtOnce([session], calls);
}

/**
 * `calls` times, one tools/list on each session at once (the client's own parallel fan-out, what the
 * merged list does inside the gateway): the time until the last answered, and the failed answers.
 */
async function listTimesAtOnce(sessions: readonly Session[], calls: number): Promise<{ ms: number[]; failures: number }> {
  const ms: number[] = [];
  let failures = 0;
  for (let i = 1; i <= calls; i++) {
    const started = performance.now();
    const ok = await Promise.all(sessions.map((s) => listed(s, i)));
    ms.push(performance.now() - started);
    failures += ok.filter((x) => !x).length;
  }
  return { ms, failures };
}
