/**
 * `mcp-auth-gateway demo` as a user runs it: a separate process (the CLI through tsx) in an empty
 * directory, on a free PORT; the SDK client connects to the printed URL, goes through consent and
 * the dev login, lists and calls tools, steps up to mcp:write when a tool needs it, and the process
 * stops cleanly on SIGTERM.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';
import { connectWithOAuth } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/net.js';
import { headlessUser, type HeadlessUserLog } from '../helpers/authorization-server.js';

const require = createRequire(import.meta.url);
const tsxLoader = require.resolve('tsx');
const cli = new URL('../../src/cli.ts', import.meta.url).pathname;

let child: ChildProcess;
let dir: string;
let mcpUrl: string;
let stdout = '';

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'mag-demo-'));
  const port = await freePort();
  child = spawn(process.execPath, ['--import', tsxLoader, '-e', `import(${JSON.stringify(cli)}).then((m) => m.main(['demo'])).then((c) => { if (typeof c === 'number') process.exit(c); })`], {
    cwd: dir,
    env: { ...process.env, PORT: String(port), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stderr!.resume();
  mcpUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`demo did not start:\n${stdout}`)), 30_000);
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
      const url = /MCP server URL:\s+(\S+)/.exec(stdout)?.[1];
      if (url) {
        clearTimeout(timer);
        resolve(url);
      }
    });
    child.once('exit', (code) => reject(new Error(`demo exited with ${code}:\n${stdout}`)));
  });
});

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe('mcp-auth-gateway demo', () => {
  it('prints the MCP URL and serves it behind the built-in AS with the dev login', async () => {
    expect(mcpUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/demo\/mcp$/);
    const log: HeadlessUserLog = { consentPages: [], loginPages: [] };
    // Without a refresh token the SDK's step-up starts a new authorization for the wider scope (with
    // one, SDK 1.32 refreshes instead, which cannot widen the scope, and gives up: ts-sdk-client.test.ts).
    // Nothing is registered ahead: the SDK registers with the first challenge's scope (SEP-835), which
    // bounds nothing (DESIGN §8.3).
    const conn = await connectWithOAuth(mcpUrl, { onPage: headlessUser('newcomer', { log }), clientMetadata: { grant_types: ['authorization_code'] } });
    try {
      expect(conn.provider.clientInformation()).toMatchObject({ scope: 'mcp:read' });
      expect(log.consentPages).toHaveLength(1);
      expect(log.loginPages).toHaveLength(1);
      // mcp:read only: the write tools and the denied one are filtered out of the list.
      const names = (await conn.client.listTools()).tools.map((t) => t.name).sort();
      expect(names).toEqual(['add', 'echo', 'list_notes']);
      expect(await conn.client.callTool({ name: 'add', arguments: { a: 2, b: 3 } })).toMatchObject({ content: [{ type: 'text', text: '5' }] });
      // add_note needs mcp:write: 403 with scope → the SDK starts a new authorization for the wider
      // scope (a new consent: wider scopes ask again), the app finishes it, the call then succeeds.
      await expect(conn.client.callTool({ name: 'add_note', arguments: { text: 'hello' } })).rejects.toThrow(UnauthorizedError);
      await conn.transport.finishAuth(conn.provider.takeAuthorizationCode());
      expect(conn.tokens()!.scope?.split(' ').sort()).toEqual(['mcp:read', 'mcp:write']);
      const added = await conn.client.callTool({ name: 'add_note', arguments: { text: 'hello' } });
      expect(added).toMatchObject({ content: [{ type: 'text', text: 'added note 1' }] });
      expect(log.consentPages).toHaveLength(2);
      expect(log.consentPages[1]).toContain('mcp:write');
    } finally {
      await conn.close();
    }
  });

  it("prints a stdio route too: server-memory, one process per session (sandboxed: bwrap is here), so bob never sees alice's graph", async () => {
    const memoryUrl = /stdio server URL:\s+(\S+)/.exec(stdout)?.[1];
    expect(memoryUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/memory\/mcp$/);
    expect(stdout).toContain('Each process runs in a bubblewrap sandbox');
    const connect = (user: string) => connectWithOAuth(memoryUrl!, { onPage: headlessUser(user), clientMetadata: { grant_types: ['authorization_code'] } });
    const alice = await connect('alice');
    const bob = await connect('bob');
    try {
      // mcp:read: only the reading tools are listed.
      expect((await bob.client.listTools()).tools.map((t) => t.name).sort()).toEqual(['open_nodes', 'read_graph', 'search_nodes']);
      const entity = { entities: [{ name: 'alice-only', entityType: 'note', observations: ['private'] }] };
      await expect(alice.client.callTool({ name: 'create_entities', arguments: entity })).rejects.toThrow(UnauthorizedError);
      await alice.transport.finishAuth(alice.provider.takeAuthorizationCode());
      await alice.client.callTool({ name: 'create_entities', arguments: entity });
      const text = (r: unknown) => JSON.stringify(r);
      expect(text(await alice.client.callTool({ name: 'read_graph', arguments: {} }))).toContain('alice-only');
      expect(text(await bob.client.callTool({ name: 'read_graph', arguments: {} }))).not.toContain('alice-only');
    } finally {
      await Promise.all([alice.close(), bob.close()]);
    }
  });

  it('keeps its dev signing key in .dev-keys under the working directory, mode 0600', async () => {
    const info = await stat(join(dir, '.dev-keys', 'signing.jwk.json'));
    expect(info.mode & 0o777).toBe(0o600);
  });

  it('stops cleanly on SIGTERM', async () => {
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
