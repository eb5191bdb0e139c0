// Per-principal session caps (issue 14): stdio's max_processes_per_principal and
// the legacy SSE route's max_sessions / max_sessions_per_principal load with
// their defaults, and a cap over its route's is refused at load, at its line.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config/load.js';
import { ConfigError } from '../../src/config/config-error.js';

const GATEWAY = 'listen: { host: 127.0.0.1, port: 9000 }\npublic_url: http://127.0.0.1:9000\nauthorization_server:\n  enabled: true\n';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-config-caps-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function load(route: string) {
  await writeFile(join(dir, 'gateway.yaml'), GATEWAY);
  await writeFile(join(dir, 'a.yaml'), `path: /a/mcp\n${route}`);
  return loadConfig(dir, {});
}

async function errorsOf(route: string): Promise<string[]> {
  const err = await load(route).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ConfigError);
  return (err as ConfigError).message.split('\n').map((line) => line.replace(`${dir}/`, ''));
}

const stdio = (more: string) => `upstream:\n  stdio:\n    command: node\n${more}`;

describe('stdio: max_processes_per_principal', () => {
  it.each([
    ['', { maxProcesses: 20, maxProcessesPerPrincipal: 4 }],
    ['    max_processes: 2\n', { maxProcesses: 2, maxProcessesPerPrincipal: 2 }],
    ['    max_processes: 10\n    max_processes_per_principal: 10\n', { maxProcesses: 10, maxProcessesPerPrincipal: 10 }],
    ['    max_processes_per_principal: 1\n', { maxProcesses: 20, maxProcessesPerPrincipal: 1 }],
  ])('%j loads as %j (default 4, or max_processes when lower)', async (more, caps) => {
    expect((await load(stdio(more))).routes[0]?.stdio).toMatchObject(caps);
  });

  it.each([
    ['    max_processes: 3\n    max_processes_per_principal: 4\n', /^a\.yaml:6:\d+: upstream\.stdio\.max_processes_per_principal: must be at most max_processes \(3\)$/],
    ['    max_processes_per_principal: 21\n', /^a\.yaml:5:\d+: upstream\.stdio\.max_processes_per_principal: must be at most max_processes \(20\)$/],
    ['    max_processes_per_principal: 0\n', /^a\.yaml:5:\d+: upstream\.stdio\.max_processes_per_principal: /],
    ['    max_processes_per_principal: 1.5\n', /^a\.yaml:5:\d+: upstream\.stdio\.max_processes_per_principal: /],
    ['    max_processes_per_principal: two\n', /^a\.yaml:5:\d+: upstream\.stdio\.max_processes_per_principal: Invalid input: expected number/],
  ])('refuses %j at its line', async (more, message) => {
    const errors = await errorsOf(stdio(more));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(message);
  });
});

const sse = (more: string) => `upstream:\n  sse:\n    url: http://127.0.0.1:3001/sse\n${more}`;

describe('legacy SSE: max_sessions and max_sessions_per_principal', () => {
  it.each([
    ['upstream: { sse: http://127.0.0.1:3001/sse }\n', { maxSessions: 1000, maxSessionsPerPrincipal: 4 }],
    [sse(''), { maxSessions: 1000, maxSessionsPerPrincipal: 4 }],
    [sse('    max_sessions: 3\n'), { maxSessions: 3, maxSessionsPerPrincipal: 3 }],
    [sse('    max_sessions: 50\n    max_sessions_per_principal: 10\n'), { maxSessions: 50, maxSessionsPerPrincipal: 10 }],
  ])('%j loads as %j (default 1000 and 4, or max_sessions when lower)', async (route, caps) => {
    const config = await load(route);
    expect(config.routes[0]).toMatchObject({ upstream: 'http://127.0.0.1:3001/sse', sse: caps });
  });

  it.each([
    [sse('    max_sessions: 3\n    max_sessions_per_principal: 4\n'), /^a\.yaml:6:\d+: upstream\.sse\.max_sessions_per_principal: must be at most max_sessions \(3\)$/],
    [sse('    max_sessions_per_principal: 1001\n'), /^a\.yaml:5:\d+: upstream\.sse\.max_sessions_per_principal: must be at most max_sessions \(1000\)$/],
    [sse('    max_sessions: 0\n'), /^a\.yaml:5:\d+: upstream\.sse\.max_sessions: /],
    [sse('    max_sessions: many\n'), /^a\.yaml:5:\d+: upstream\.sse\.max_sessions: Invalid input: expected number/],
    [sse('    max_session: 3\n'), /^a\.yaml:5:\d+: upstream\.sse\.max_session: unknown key/],
    ['upstream:\n  sse:\n    url: ftp://127.0.0.1/sse\n', /^a\.yaml:4:\d+: upstream\.sse\.url: expected an http\(s\) URL/],
    ['upstream:\n  sse:\n    max_sessions: 3\n', /^a\.yaml:4:\d+: upstream\.sse: expected an http\(s\) URL or \{ url, max_sessions, max_sessions_per_principal \}/],
  ])('refuses %j at its line', async (route, message) => {
    const errors = await errorsOf(route);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(message);
  });
});
