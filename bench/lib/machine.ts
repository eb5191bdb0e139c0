// What the numbers were measured on: they mean nothing without it.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';

export interface MachineInfo {
  os: string;
  kernel: string;
  cpuModel: string;
  cpus: number;
  memoryGiB: number;
  node: string;
  gateway: string;
  nginx: string | null;
  versions: Record<string, string>;
  git: { commit: string; dirty: boolean } | null;
  /** 1-minute load average when the run started and ended: a busy machine shows here. */
  loadAverage: { start: number; end?: number };
}

/** Read from the files: some packages do not export their package.json. */
export function packageVersion(relativeToRepo: string): string {
  try {
    return (JSON.parse(readFileSync(new URL(`../../${relativeToRepo}package.json`, import.meta.url), 'utf8')) as { version: string }).version;
  } catch {
    return 'unknown';
  }
}

function osName(): string {
  try {
    const pretty = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(readFileSync('/etc/os-release', 'utf8'));
    if (pretty) return pretty[1]!;
  } catch {
    // not Linux, or no os-release
  }
  return `${os.type()} ${os.release()}`;
}

function gitState(): MachineInfo['git'] {
  try {
    const commit = execFileSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const status = execFileSync('git', ['status', '--porcelain', '--', 'src'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
    return { commit, dirty: status.trim() !== '' };
  } catch {
    return null;
  }
}

export function machineInfo(nginxVersion: string | null): MachineInfo {
  return {
    os: osName(),
    kernel: `${os.type()} ${os.release()} ${os.arch()}`,
    cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
    cpus: os.cpus().length,
    memoryGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    gateway: packageVersion(''),
    nginx: nginxVersion,
    versions: Object.fromEntries(
      ['autocannon', 'http-proxy', 'undici', 'jose', 'hono', '@hono/node-server'].map((name) => [name, packageVersion(`node_modules/${name}/`)]),
    ),
    git: gitState(),
    loadAverage: { start: os.loadavg()[0]! },
  };
}
