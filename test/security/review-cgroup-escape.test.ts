/**
 * Review (round 3), [K64]: containment without a sandbox is a cgroup cell per process
 * (containment.ts), but a child running as the gateway's own user (no `user:` configured) may write
 * every cgroup.procs the gateway may, its own cgroup's included: a daemon moves itself out of its
 * cell before the session ends, and cgroup.kill of the cell no longer reaches it. That cannot be
 * stopped for a same-user child without a sandbox (chmod does not bind the file's owner; a cgroup
 * namespace needs privilege), so `check` and the start's log name such a route, and SECURITY.md
 * says so. A child of another user (`user: nobody`, where the gateway runs as root) cannot write the
 * gateway's cgroup.procs: its daemon stays in its cell and is gone after DELETE.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RouteConfig } from '../../src/config/types.js';
import { cgroupsUsable, uncontainedRoutes } from '../../src/proxy/stdio/containment.js';
import { startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';

const CHILD = join(import.meta.dirname, 'review/cgroup-escape-child.mjs');
const cgroups = cgroupsUsable();
const root = process.geteuid?.() === 0;
let stage: StdioStage;
const daemons: number[] = [];

beforeAll(async () => {
  stage = await startStdioStage({
    '/esc/mcp': { upstream: { stdio: { command: process.execPath, args: [CHILD] } } },
    ...(root && { '/nobody/mcp': { upstream: { stdio: { command: process.execPath, args: [CHILD], user: { uid: 'nobody' } } } } }),
  });
}, 60_000);
afterAll(async () => {
  for (const pid of daemons) if (running(pid)) process.kill(pid, 'SIGKILL');
  await stage?.close();
});

function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Opens a session on `path`, has its child start a daemon that tries to leave its cell, DELETEs the session; whether the daemon outlived it. */
async function escapeAndDelete(path: string): Promise<{ moved: string; outlived: boolean }> {
  const token = await stage.token(path);
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' };
  const init = await fetch(stage.url(path), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'r', version: '1' } } }) });
  const session = init.headers.get('mcp-session-id')!;
  const res = await fetch(stage.url(path), { method: 'POST', headers: { ...headers, 'mcp-session-id': session }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'escape', arguments: {} } }) });
  const info = JSON.parse(((await res.json()) as { result: { content: { text: string }[] } }).result.content[0]!.text) as { pid: number; moved: string };
  daemons.push(info.pid);
  expect((await fetch(stage.url(path), { method: 'DELETE', headers: { authorization: `Bearer ${token}`, 'mcp-session-id': session } })).status).toBe(200);
  const gone = await waitFor(() => !running(info.pid), 5_000, 'the daemon to be gone').then(() => true, () => false);
  return { moved: info.moved, outlived: !gone };
}

const route = (path: string, stdio: Record<string, unknown>) => ({ path, stdio: { command: 'x', args: [], ...stdio } }) as unknown as RouteConfig;

describe('[K64] a daemon that leaves its cgroup cell', () => {
  it.skipIf(!cgroups)("as the gateway's own user it can (documented): check names exactly the same-user routes, never a sandboxed or other-user one", () => {
    const warnings = uncontainedRoutes([
      route('/same/mcp', {}),
      route('/same-uid/mcp', { user: { uid: process.getuid!(), gid: process.getgid!() } }),
      route('/other/mcp', { user: { uid: process.getuid!() + 1, gid: 65534 } }),
      route('/boxed/mcp', { sandbox: { kind: 'bubblewrap', readable: [], writable: [], network: false } }),
    ]);
    expect(warnings.map((w) => w.slice(0, w.indexOf(':')))).toEqual(['/same/mcp', '/same-uid/mcp']);
    for (const w of warnings) expect(w).toMatch(/gateway's own user, who may move a process out of its cgroup/);
  });

  it.skipIf(!cgroups)("as the gateway's own user the move succeeds: the behaviour check warns of", async () => {
    const { moved, outlived } = await escapeAndDelete('/esc/mcp');
    expect(moved).toMatch(/cgroup\.procs$/);
    expect(outlived).toBe(true);
  }, 30_000);

  it.skipIf(!cgroups || !root)('as another user (nobody) the move is refused and the daemon is gone after DELETE', async () => {
    const { moved, outlived } = await escapeAndDelete('/nobody/mcp');
    expect(moved).toMatch(/^failed: .*(EACCES|EPERM)/);
    expect(outlived).toBe(false);
  }, 30_000);
});
