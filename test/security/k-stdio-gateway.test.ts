/**
 * The gateway process and its configuration against hostile stdio children (DESIGN.md §8.3;
 * SECURITY-CASES K64, K65): a daemon a child double-forked and setsid'ed does not survive the
 * gateway's SIGTERM; `check` says which route nothing can contain on a host (run where no cgroup
 * v2 can be made), and says nothing where something does; sandbox paths that would show a
 * sandboxed process the temporary directory (every session's directory) are refused at load with
 * file:line — a corpus of such paths (the directory itself, its parents, a link to it, a root of
 * process directories and a path inside one) beside those that stay allowed.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config/config-error.js';
import { loadConfig } from '../../src/config/load.js';
import { cgroupsUsable } from '../../src/proxy/stdio/containment.js';
import { buildGatewayCli, spawnGateway, writeConfigDir, type GatewayCli } from '../helpers/gateway-process.js';
import { gatewayYaml } from '../helpers/gateway-config.js';
import { startLocalIssuer } from '../helpers/local-issuer.js';
import { waitFor } from '../helpers/stdio-stage.js';

const HOSTILE = join(import.meta.dirname, 'fixtures', 'hostile-stdio-server.mjs');
const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };
const DAEMON = { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'daemon', arguments: {} } };

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const c of cleanups.reverse()) await c().catch(() => undefined);
});

function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

const post = (url: string, token: string, body: unknown, sessionId?: string) =>
  fetch(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json', ...(sessionId && { 'mcp-session-id': sessionId }) },
    body: JSON.stringify(body),
  });

const stdioRoute = (issuer: { issuer: string; jwksUri: string }, stdio: Record<string, unknown>) => ({
  path: '/mcp',
  upstream: { stdio: { command: process.execPath, args: [HOSTILE], ...stdio } },
  authorization_servers: [issuer.issuer],
  token: { jwt: { issuer: issuer.issuer, jwks_uri: issuer.jwksUri, algorithms: ['ES256'] } },
});

describe('[K64] the gateway process: SIGTERM, and what check says', () => {
  let cli: GatewayCli;
  beforeAll(async () => {
    cli = await buildGatewayCli();
  }, 300_000);

  it.each([{}, { sandbox: { kind: 'bubblewrap', readable: [dirname(HOSTILE), dirname(process.execPath)] } }])(
    'SIGTERM of the gateway with a double-forked setsid daemon left by a child (%j): the gateway exits 0 and the daemon is gone',
    async (stdio) => {
      const issuer = await startLocalIssuer();
      cleanups.push(() => issuer.close());
      const configDir = await writeConfigDir({
        'gateway.yaml': gatewayYaml({ listen: { host: '127.0.0.1', port: 0 }, public_url: 'http://127.0.0.1:1', shutdown_grace: '2s', drain_delay: '100ms', log_level: 'info' }),
        'hostile.yaml': stdioRoute(issuer, stdio),
      });
      cleanups.push(() => rm(configDir, { recursive: true, force: true }));
      const gateway = await spawnGateway(cli, { configDir });
      cleanups.push(() => gateway.stop());
      const token = await issuer.token({ audience: 'http://127.0.0.1:1/mcp' });
      const url = `${gateway.url}/mcp`;
      const before = new Set(readdirPids());
      const id = (await post(url, token, INITIALIZE)).headers.get('mcp-session-id')!;
      expect((await post(url, token, DAEMON, id)).status).toBe(200);
      // Every process that appeared: the server and its daemon, or the whole sandbox.
      const started = readdirPids().filter((pid) => !before.has(pid) && pid !== gateway.child.pid && isNodeOrBwrap(pid));
      expect(started.length).toBeGreaterThanOrEqual(2);
      gateway.child.kill('SIGTERM');
      expect((await gateway.exited).code).toBe(0);
      await waitFor(() => started.every((pid) => !running(pid)), 10_000, 'every process the session started to be gone');
    },
    60_000,
  );

  /** `check` of a config with one unsandboxed and one sandboxed route; `contained`: run as it is, else where no cgroup can be made. */
  async function check(contained: boolean): Promise<string> {
    const issuer = { issuer: 'https://issuer.example', jwksUri: 'https://issuer.example/jwks' };
    const configDir = await writeConfigDir({
      'gateway.yaml': gatewayYaml({ listen: { host: '127.0.0.1', port: 0 }, public_url: 'http://127.0.0.1:1' }),
      'plain.yaml': stdioRoute(issuer, {}),
      'boxed.yaml': { ...stdioRoute(issuer, { sandbox: { kind: 'bubblewrap', readable: [dirname(HOSTILE), dirname(process.execPath)] } }), path: '/boxed/mcp' },
      ...(process.geteuid?.() === 0 && { 'other.yaml': { ...stdioRoute(issuer, { user: { uid: 65534, gid: 65534 } }), path: '/other/mcp' } }),
    });
    cleanups.push(() => rm(configDir, { recursive: true, force: true }));
    const command = ['bin/mcp-auth-gateway.js', 'check', '--config', configDir];
    // Without a cgroup v2 to make one in: the cgroup hierarchy hidden under an empty tmpfs.
    const [file, args] = contained
      ? [process.execPath, command]
      : ['bwrap', ['--bind', '/', '/', '--tmpfs', '/sys/fs/cgroup', '--dev-bind', '/dev', '/dev', '--proc', '/proc', '--unshare-pid', '--', process.execPath, ...command]];
    return new Promise((resolve, reject) => {
      execFile(file as string, args as string[], { cwd: cli.root, env: { PATH: process.env.PATH ?? '' }, timeout: 60_000 }, (err, stdout, stderr) =>
        err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
      );
    });
  }

  it("check names an unsandboxed route where no cgroup can be made (exit 0: a warning), never a sandboxed one; where a cgroup works, only a route whose processes run as the gateway's own user (they can leave their cgroup)", async () => {
    const uncontained = await check(false);
    expect(uncontained).toMatch(/^warning: \/mcp: upstream\.stdio: processes a server starts that leave its process group .* can outlive their session/m);
    expect(uncontained).not.toMatch(/warning: \/boxed\/mcp: upstream\.stdio: processes/);
    // A sandboxed process has no cell: its resources are bounded by rlimits at most, said once (resource-limits.ts).
    expect(uncontained.match(/^warning: \/boxed\/mcp: upstream\.stdio\.resources: .*CPU not at all/gm)).toHaveLength(1);
    const withCgroups = await check(true);
    if (cgroupsUsable()) expect(withCgroups).toMatch(/^warning: \/mcp: upstream\.stdio: .*gateway's own user, who may move a process out of its cgroup/m);
    expect(withCgroups).not.toMatch(/warning: \/(boxed|other)\/mcp: upstream\.stdio: processes/);
  }, 120_000);
});

const readdirPids = (): number[] =>
  readdirSync('/proc')
    .filter((name) => /^[0-9]+$/.test(name))
    .map(Number);

function isNodeOrBwrap(pid: number): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    // The server (bwrap's command line names it too) and the fixture's daemon: nothing of other tests.
    return cmdline.includes(HOSTILE) || cmdline.includes('process.on("SIGTERM", () => {}); setInterval');
  } catch {
    return false;
  }
}

describe('[K65] sandbox paths that would show other sessions\' directories are refused at load, with file:line', () => {
  let dir: string;
  let tmpLink: string;
  let root: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'mag-k65-'));
    tmpLink = join(dir, 'tmp-link');
    symlinkSync(tmpdir(), tmpLink);
    // A root of process directories, as the gateway makes one.
    root = await mkdtemp(join(tmpdir(), 'mag-stdio-'));
    mkdirSync(join(root, 's-x'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
    await rm(root, { recursive: true, force: true });
  });

  async function load(sandbox: string): Promise<unknown> {
    await writeFile(join(dir, 'gateway.yaml'), 'listen: { host: 127.0.0.1, port: 9000 }\npublic_url: http://127.0.0.1:9000\nauthorization_server:\n  enabled: true\n');
    await writeFile(join(dir, 'a.yaml'), `path: /a/mcp\nupstream:\n  stdio:\n    command: node\n    sandbox: ${sandbox}\n`);
    return loadConfig(dir, {}).then(
      () => undefined,
      (err: unknown) => err,
    );
  }

  const refused = () => [
    ['writable: [/tmp]', 'writable[0]'],
    [`readable: ["${tmpdir()}"]`, 'readable[0]'],
    // `/` shows the host's temporary directory only where the private /tmp is not over it.
    ...(tmpdir().startsWith('/tmp') ? [] : ([['writable: [/]', 'writable[0]']] as const)),
    [`readable: [/usr, "${tmpLink}"]`, 'readable[1]'],
    [`writable: ["${root}"]`, 'writable[0]'],
    [`readable: ["${join(root, 's-x')}"]`, 'readable[0]'],
  ] as const;

  it('refuses each at its line: the temporary directory, a link to it, a root of process directories and a directory in it', async () => {
    for (const [paths, at] of refused()) {
      const err = await load(`{ kind: bubblewrap, ${paths} }`);
      expect(err, paths).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).message).toMatch(new RegExp(`a\\.yaml:5:\\d+: upstream\\.stdio\\.sandbox\\.${at.replace(/[[\]]/g, '\\$&')}: .*(holds the temporary directory|inside the gateway's directory of session directories)`));
    }
  });

  it('allows what shows no session: / (the private /tmp is mounted over the host one), system paths, a directory of its own under the temporary directory', async () => {
    const allowed = ['readable: [/usr/share, /etc]', `writable: ["${dir}"]`, ...(tmpdir().startsWith('/tmp') ? ['readable: [/]'] : [])];
    for (const paths of allowed) expect(await load(`{ kind: bubblewrap, ${paths} }`), paths).toBeUndefined();
  });
});
