/**
 * stdio isolation (upstream.stdio.sandbox and upstream.stdio.user): a server that runs
 * client-chosen code (the fixture's `attack` tool) reads the gateway's environment, opens its
 * memory, signals it, and reads another process's directory and the gateway user's files when it
 * runs as the gateway's user; in a bubblewrap sandbox, as another user, or both, every one of
 * those fails. The real server-memory works in the sandbox end to end, and the sandboxed tree
 * dies with its session and with the gateway.
 *
 * Needs: bubblewrap (`bwrap`, Debian package `bubblewrap`; .ci/run installs it), a gateway
 * running as root (to switch users; the tests that need it say so and are skipped otherwise),
 * and the user `nobody`.
 */
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { randomUUID } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findBubblewrap, sandboxIssues } from '../../src/proxy/stdio/bubblewrap-check.js';
import { ConfigError } from '../../src/config/config-error.js';
import { connectClient, FIXTURE_SERVER, isAlive, resultText, serverBin, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { descendantsOf } from '../helpers/process-tree.js';

if (findBubblewrap() === undefined) throw new Error('these tests need bubblewrap: apt-get install bubblewrap (.ci/run installs it)');
const root = process.geteuid?.() === 0;

const OPEN = '/open/mcp';
const SANDBOXED = '/sandboxed/mcp';
const AS_NOBODY = '/nobody/mcp';
const BOTH = '/both/mcp';
const MEMORY = '/memory/mcp';

/** What the fixture and node need to be seen in a sandbox: the fixture's folder and node's own. */
const FIXTURE_READABLE = [dirname(FIXTURE_SERVER), dirname(process.execPath)];
const memoryScript = serverBin('@modelcontextprotocol/server-memory');
/** The node_modules folder server-memory and its dependencies are in. */
const nodeModules = memoryScript.slice(0, memoryScript.lastIndexOf('/node_modules/') + '/node_modules'.length);

const fixture = (more: Record<string, unknown> = {}) => ({ upstream: { stdio: { command: process.execPath, args: [FIXTURE_SERVER, 'probe'], ...more } } });
const sandbox = { kind: 'bubblewrap', readable: FIXTURE_READABLE };

let stage: StdioStage;
/** A file only the gateway's user may read (as a signing key is). */
let secretDir: string;
let secretFile: string;

beforeAll(async () => {
  secretDir = mkdtempSync(join(tmpdir(), 'mag-gateway-secrets-'));
  chmodSync(secretDir, 0o755);
  secretFile = join(secretDir, 'signing.jwk.json');
  writeFileSync(secretFile, 'the gateway signing key', { mode: 0o600 });
  stage = await startStdioStage({
    [OPEN]: fixture(),
    [SANDBOXED]: fixture({ sandbox }),
    ...(root && { [AS_NOBODY]: fixture({ user: { uid: 'nobody' } }), [BOTH]: fixture({ sandbox, user: { uid: 'nobody' } }) }),
    [MEMORY]: {
      upstream: { stdio: { command: process.execPath, args: [memoryScript], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' }, sandbox: { kind: 'bubblewrap', readable: [nodeModules, dirname(process.execPath)] } } },
      scopes_supported: ['mcp:read', 'mcp:write'],
    },
  });
}, 60_000);

afterAll(async () => {
  await stage?.close();
  rmSync(secretDir, { recursive: true, force: true });
});

interface Attempt<T> {
  ok?: T;
  error?: string;
}

interface AttackReport {
  uid: number;
  gatewayEnviron: Attempt<string>;
  gatewayMemory: Attempt<string>;
  signalGateway: Attempt<boolean>;
  otherDir: Attempt<string[]>;
  otherFile: Attempt<string>;
  file: Attempt<string>;
  visiblePids: number;
  signalable: number[];
  writes: Attempt<string>[];
}

const open: { client: Client }[] = [];
afterAll(async () => {
  await Promise.all(open.map((c) => c.client.close().catch(() => undefined)));
});

async function connect(path: string, sub = 'mallory'): Promise<Client> {
  const connected = await connectClient(stage.url(path), await stage.token(path, sub));
  open.push(connected);
  return connected.client;
}

/** A session's own process directory (its cwd), with a secret of its own written into it. */
async function victimDir(path: string): Promise<{ dir: string; secret: string }> {
  const client = await connect(path, 'victim');
  const dir = (JSON.parse(resultText(await client.callTool({ name: 'report', arguments: {} }))) as { cwd: string }).cwd;
  const secret = `victim-secret-${randomUUID()}`;
  writeFileSync(join(dir, 'secret.txt'), secret);
  return { dir, secret };
}

async function attack(path: string, otherDir: string): Promise<AttackReport> {
  const client = await connect(path);
  const result = await client.callTool({ name: 'attack', arguments: { gatewayPid: process.pid, otherDir, file: secretFile } });
  return JSON.parse(resultText(result)) as AttackReport;
}

describe('without isolation: the attack of the review works (the limit the options remove)', () => {
  it("a child reads the gateway's environment, opens its memory, signals it, reads a sibling's directory and the gateway's 0600 files", async () => {
    const victim = await victimDir(OPEN);
    const seen = await attack(OPEN, victim.dir);
    // The gateway is this test process: the child read exactly its environment.
    expect(seen.gatewayEnviron.ok).toBe(readFileSync('/proc/self/environ', 'latin1'));
    expect(seen.gatewayMemory.ok).toBe('opened');
    expect(seen.signalGateway.ok).toBe(true);
    expect(seen.otherDir.ok).toContain('secret.txt');
    expect(seen.otherFile.ok).toBe(victim.secret);
    expect(seen.file.ok).toBe('the gateway signing key');
    expect(seen.signalable).toContain(process.pid);
  });
});

describe('sandbox: { kind: bubblewrap }', () => {
  it("the gateway is not in the child's /proc, a sibling session's directory and the gateway's files are not in its filesystem", async () => {
    const victim = await victimDir(SANDBOXED);
    const seen = await attack(SANDBOXED, victim.dir);
    expect(seen.gatewayEnviron.error).toBe('ENOENT');
    expect(seen.gatewayMemory.error).toBe('ENOENT');
    expect(seen.signalGateway.error).toBe('ESRCH');
    expect(seen.otherDir.error).toBe('ENOENT');
    expect(seen.otherFile.error).toBe('ENOENT');
    expect(seen.file.error).toBe('ENOENT');
    // Its own PID namespace: bwrap's init (pid 1) and itself.
    expect(seen.visiblePids).toBeLessThanOrEqual(2);
    expect(seen.signalable.every((pid) => pid === 1)).toBe(true);
  });

  it('its own directory is writable, the rest of its filesystem is not, and /tmp is its own', async () => {
    const client = await connect(SANDBOXED);
    const { cwd } = JSON.parse(resultText(await client.callTool({ name: 'report', arguments: {} }))) as { cwd: string };
    expect(statSync(cwd).mode & 0o777).toBe(0o700);
    const hostTmp = readdirSync(tmpdir());
    const writeTo = [join(cwd, 'mine.txt'), join(dirname(FIXTURE_SERVER), 'planted.mjs'), '/usr/planted', '/etc/planted'];
    const seen = await client.callTool({ name: 'attack', arguments: { gatewayPid: process.pid, otherDir: tmpdir(), file: FIXTURE_SERVER, writeTo } });
    const report = JSON.parse(resultText(seen)) as AttackReport;
    // Its directory takes a file (seen on the host); a readable folder and the system set refuse one.
    expect(report.writes).toEqual([{ ok: 'written' }, { error: 'EROFS' }, { error: 'EROFS' }, { error: 'EROFS' }]);
    expect(readFileSync(join(cwd, 'mine.txt'), 'utf8')).toBe('written');
    expect(existsSync(join(dirname(FIXTURE_SERVER), 'planted.mjs'))).toBe(false);
    // The fixture's folder is readable (so it can run) ...
    expect(report.file.ok).toContain('tiny MCP server');
    // ... and the sandbox's /tmp holds only the way to its own directory (the gateway's root of
    // process directories, holding only its own) and the mount points of what it may read (when the
    // checkout lies under the temporary directory), none of the host's other entries.
    const mountPoints = FIXTURE_READABLE.filter((path) => path.startsWith(`${tmpdir()}/`)).map((path) => path.slice(tmpdir().length + 1).split('/')[0]!);
    expect([...report.otherDir.ok!].sort()).toEqual([...new Set([cwd.slice(tmpdir().length + 1).split('/')[0]!, ...mountPoints])].sort());
    expect(hostTmp.length).toBeGreaterThan(1);
  });
});

describe.runIf(root)('user: { uid: nobody } (the gateway runs as root)', () => {
  it("the kernel refuses the gateway's environment, memory and signals, another user's process directory and the gateway's 0600 files", async () => {
    const victim = await victimDir(OPEN);
    const seen = await attack(AS_NOBODY, victim.dir);
    expect(seen.uid).toBe(65534);
    expect(seen.gatewayEnviron.error).toBe('EACCES');
    expect(seen.gatewayMemory.error).toBe('EACCES');
    expect(seen.signalGateway.error).toBe('EPERM');
    expect(seen.otherDir.error).toBe('EACCES');
    expect(seen.file.error).toBe('EACCES');
    expect(seen.signalable).not.toContain(process.pid);
  });

  it('the limit user alone keeps: sessions of one route share the user, so they reach each other (the sandbox closes this)', async () => {
    const victim = await victimDir(AS_NOBODY);
    const seen = await attack(AS_NOBODY, victim.dir);
    expect(seen.otherFile.ok).toBe(victim.secret);
    const sandboxed = await attack(BOTH, (await victimDir(BOTH)).dir);
    expect(sandboxed.otherFile.error).toBe('ENOENT');
  });

  it('sandbox and user together: every attempt fails, and the process runs as nobody in its own namespaces', async () => {
    const seen = await attack(BOTH, (await victimDir(OPEN)).dir);
    expect(seen.uid).toBe(65534);
    expect(seen.gatewayEnviron.error).toBe('ENOENT');
    expect(seen.signalGateway.error).toBe('ESRCH');
    expect(seen.otherDir.error).toBe('ENOENT');
    expect(seen.file.error).toBe('ENOENT');
    expect(seen.visiblePids).toBeLessThanOrEqual(2);
  });
});

describe('the real server-memory in the sandbox, end to end through the gateway', () => {
  it("alice's graph is kept in her PROCESS_DIR, bob's process cannot see it, and DELETE takes the sandboxed tree and the directory", async () => {
    const marker = `alice-secret-${randomUUID()}`;
    const bwrapsBefore = new Set(descendantsOf(process.pid));
    const { client: alice, transport: aliceTransport } = await connectClient(stage.url(MEMORY), await stage.token(MEMORY, 'alice'));
    const { client: bob, transport: bobTransport } = await connectClient(stage.url(MEMORY), await stage.token(MEMORY, 'bob'));
    await alice.callTool({ name: 'create_entities', arguments: { entities: [{ name: marker, entityType: 'note', observations: ['only alice'] }] } });
    expect(resultText(await alice.callTool({ name: 'read_graph', arguments: {} }))).toContain(marker);
    expect(resultText(await bob.callTool({ name: 'read_graph', arguments: {} }))).not.toContain(marker);
    // Each gateway's root of process directories, each holding one directory per process.
    const files = readdirSync(tmpdir())
      .filter((d) => d.startsWith('mag-stdio-'))
      .flatMap((root) => (existsSync(join(tmpdir(), root)) ? readdirSync(join(tmpdir(), root)).map((d) => join(tmpdir(), root, d, 'memory.jsonl')) : []))
      .filter((f) => existsSync(f) && readFileSync(f, 'utf8').includes(marker));
    expect(files).toHaveLength(1);
    // The tree of this session: bwrap, its init and the server, all on the host.
    const tree = descendantsOf(process.pid).filter((pid) => !bwrapsBefore.has(pid));
    expect(tree.length).toBeGreaterThanOrEqual(3);
    await aliceTransport.terminateSession();
    await waitFor(() => !existsSync(files[0]!), 5_000, "alice's directory to go");
    await bobTransport.terminateSession();
    await Promise.all([alice.close(), bob.close()]);
    await waitFor(() => tree.every((pid) => !isAlive(pid)), 5_000, 'every process of both sandboxes to be gone');
  });
});

describe('bubblewrap missing', () => {
  it('check, start and reload say which package to install: no route starts, a reload keeps the last good table', async () => {
    const empty = mkdtempSync(join(tmpdir(), 'mag-no-bwrap-'));
    try {
      const issues = await sandboxIssues(stage.gw.config.routes, empty);
      expect(issues.map((i) => i.file)).toContain(stage.gw.config.routes.find((r) => r.path === SANDBOXED)!.file);
      for (const issue of issues) expect(issue.message).toMatch(/upstream\.stdio\.sandbox: bubblewrap is not installed .*apt-get install bubblewrap/);
      const path = process.env.PATH;
      process.env.PATH = empty;
      try {
        // A reload is refused and the last good table goes on serving (its processes already started).
        await expect(stage.gw.reload(stage.gw.config)).rejects.toThrow(/install the package bubblewrap/);
        await expect(startStdioStage({ [SANDBOXED]: fixture({ sandbox }) })).rejects.toThrow(ConfigError);
        await expect(startStdioStage({ [SANDBOXED]: fixture({ sandbox }) })).rejects.toThrow(/install the package bubblewrap/);
      } finally {
        process.env.PATH = path;
      }
      const client = await connect(SANDBOXED);
      expect(resultText(await client.callTool({ name: 'report', arguments: {} }))).toContain('"pid":2');
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
