/**
 * The gateway as a real process, started by its own command line
 * (`node bin/mcp-auth-gateway.js serve --config <dir>`), for what only a
 * process shows: signals, drain, exit codes, several replicas.
 *
 * The CLI is compiled from the current src/ into a private directory keyed by
 * a hash of the sources (bin/, dist/, package.json, node_modules linked), so
 * tests never race other builds writing ./dist and never run stale code.
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, readFile, readdir, rename, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';

const REPO = resolve(import.meta.dirname, '../..');
const INPUTS = ['src', 'bin', 'package.json', 'tsconfig.json', 'tsconfig.build.json'];

export interface GatewayCli {
  /** Holds bin/mcp-auth-gateway.js, dist/, package.json and node_modules: the image's /app. */
  root: string;
}

let built: Promise<GatewayCli> | undefined;

/** Compiles the CLI once per source state (shared by test files through the directory name). */
export function buildGatewayCli(): Promise<GatewayCli> {
  built ??= build();
  return built;
}

async function build(): Promise<GatewayCli> {
  const hash = createHash('sha256');
  for (const file of (await Promise.all(INPUTS.map((p) => filesUnder(join(REPO, p))))).flat().sort()) {
    hash.update(file).update(await readFile(file));
  }
  const root = join(tmpdir(), `mag-cli-${hash.digest('hex').slice(0, 16)}`);
  // Test files run in parallel: one builds, the others wait for its result.
  const lock = `${root}.lock`;
  for (;;) {
    if (existsSync(join(root, 'dist', 'cli.js'))) return { root };
    try {
      await mkdir(lock);
      break;
    } catch {
      const since = await stat(lock).then((s) => Date.now() - s.mtimeMs, () => 0);
      if (since > BUILD_LOCK_STALE_MS) await rm(lock, { recursive: true, force: true });
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    await compileInto(root);
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
  await removeOldBuilds(root);
  return { root };
}

const BUILD_LOCK_STALE_MS = 120_000;
const OLD_BUILD_MS = 60 * 60 * 1000;

async function compileInto(root: string): Promise<void> {
  const staging = `${root}.${process.pid}.${Date.now()}`;
  await mkdir(join(staging, 'bin'), { recursive: true });
  try {
    await promisify(execFile)(process.execPath, [join(REPO, 'node_modules/typescript/bin/tsc'), '-p', join(REPO, 'tsconfig.build.json'), '--outDir', join(staging, 'dist')], {
      cwd: REPO,
    });
  } catch (err) {
    // Type errors still emit JavaScript; only a build that produced nothing is fatal.
    if (!existsSync(join(staging, 'dist', 'cli.js'))) throw err;
  }
  await cp(join(REPO, 'bin'), join(staging, 'bin'), { recursive: true });
  await cp(join(REPO, 'package.json'), join(staging, 'package.json'));
  await symlink(join(REPO, 'node_modules'), join(staging, 'node_modules'), 'dir');
  await rename(staging, root);
}

/** Builds of sources long since changed (every edit makes a new one). */
async function removeOldBuilds(current: string): Promise<void> {
  for (const entry of await readdir(tmpdir())) {
    const path = join(tmpdir(), entry);
    if (!entry.startsWith('mag-cli-') || path === current) continue;
    const age = await stat(path).then((s) => Date.now() - s.mtimeMs, () => 0);
    if (age > OLD_BUILD_MS) await rm(path, { recursive: true, force: true });
  }
}

async function filesUnder(path: string): Promise<string[]> {
  const info = await stat(path);
  if (!info.isDirectory()) return [path];
  const entries = await readdir(path, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

export interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** performance.now() when it exited. */
  at: number;
}

export interface GatewayProcess {
  child: ChildProcess;
  /** From the `gateway listening` log line. */
  url: string;
  port: number;
  /** Parsed JSON log lines (stdout), in order. */
  logs: LogLine[];
  stderr(): string;
  exited: Promise<Exit>;
  /** SIGKILL unless it has exited already; resolves on exit. */
  stop(): Promise<void>;
}

export interface SpawnOptions {
  /** Arguments after `node`; default `bin/mcp-auth-gateway.js serve --config <configDir>`. */
  args?: string[];
  configDir?: string;
  /** The whole environment, apart from PATH: nothing leaks in from the test runner (PORT, REDIS_URL...). */
  env?: Record<string, string>;
  /** Working directory; default the CLI root, as WORKDIR in the image. */
  cwd?: string;
  startTimeoutMs?: number;
}

const live = new Set<ChildProcess>();
process.once('exit', () => live.forEach((p) => p.kill('SIGKILL')));

export async function spawnGateway(cli: GatewayCli, options: SpawnOptions): Promise<GatewayProcess> {
  const args = options.args ?? ['bin/mcp-auth-gateway.js', 'serve', '--config', options.configDir ?? 'policies'];
  const child = spawn(process.execPath, args, {
    cwd: options.cwd ?? cli.root,
    env: { PATH: process.env.PATH ?? '', ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  const logs: LogLine[] = [];
  let stderr = '';
  let pending = '';
  const listeners = new Set<(line: LogLine) => void>();
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop() ?? '';
    for (const text of lines) {
      if (!text.trim()) continue;
      try {
        const line = JSON.parse(text) as LogLine;
        logs.push(line);
        listeners.forEach((l) => l(line));
      } catch {
        stderr += `${text}\n`;
      }
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  // 'close', not 'exit': by then every line it wrote has been read.
  const exited = new Promise<Exit>((resolve) =>
    child.once('close', (code, signal) => {
      live.delete(child);
      resolve({ code, signal, at: performance.now() });
    }),
  );

  const listening = await new Promise<LogLine>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`gateway did not start in time:\n${stderr}`)), options.startTimeoutMs ?? 15_000);
    const onLine = (line: LogLine) => {
      if (line.msg !== 'gateway listening') return;
      clearTimeout(timer);
      resolve(line);
    };
    listeners.add(onLine);
    void exited.then((exit) => {
      clearTimeout(timer);
      reject(new Error(`gateway exited (${exit.code ?? exit.signal}) before listening:\n${stderr}`));
    });
  });
  const url = String(listening.url);
  return {
    child,
    url,
    port: Number(new URL(url).port),
    logs,
    stderr: () => stderr,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Writes a config directory (name → YAML object, stringified, or text) into a fresh temp dir. */
export async function writeConfigDir(files: Record<string, unknown>): Promise<string> {
  const dir = join(tmpdir(), `mag-config-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`);
  for (const [name, content] of Object.entries(files)) {
    await mkdir(join(dir, name, '..'), { recursive: true });
    await writeFile(join(dir, name), typeof content === 'string' ? content : stringify(content));
  }
  return dir;
}

/** A route file for `/mcp` → `upstream` that accepts ES256 JWTs from `issuer` (a local issuer). */
export function jwtRouteYaml(upstream: string, issuer: { issuer: string; jwksUri: string }): string {
  return [
    'path: /mcp',
    `upstream: ${upstream}`,
    `authorization_servers: [${issuer.issuer}]`,
    `token: { jwt: { issuer: "${issuer.issuer}", jwks_uri: "${issuer.jwksUri}", algorithms: [ES256] } }`,
  ].join('\n');
}
