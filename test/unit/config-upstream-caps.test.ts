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
