/**
 * Review (round 3), [K64]-shaped: containment without a sandbox is a cgroup cell per process
 * (containment.ts), but the child runs as the gateway's own user (no `user:` configured, the image's
 * default), who may write the gateway's own cgroup.procs: a daemon moves itself out of its cell
 * before the session ends, and cgroup.kill of the cell no longer reaches it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cgroupsUsable } from '../../src/proxy/stdio/containment.js';
import { startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';

const CHILD = join(import.meta.dirname, 'review/cgroup-escape-child.mjs');
const cgroups = cgroupsUsable();
let stage: StdioStage;
let daemon = 0;

beforeAll(async () => {
  stage = await startStdioStage({ '/esc/mcp': { upstream: { stdio: { command: process.execPath, args: [CHILD] } } } });
}, 60_000);
afterAll(async () => {
  if (daemon) process.kill(daemon, 'SIGKILL');
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

describe('review: a daemon that leaves its cgroup cell', () => {
  it.skipIf(!cgroups)('outlives its session (DELETE)', async () => {
    const token = await stage.token('/esc/mcp');
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json' };
    const init = await fetch(stage.url('/esc/mcp'), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'r', version: '1' } } }) });
    const session = init.headers.get('mcp-session-id')!;
    const res = await fetch(stage.url('/esc/mcp'), { method: 'POST', headers: { ...headers, 'mcp-session-id': session }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'escape', arguments: {} } }) });
    const info = JSON.parse(((await res.json()) as { result: { content: { text: string }[] } }).result.content[0]!.text) as { pid: number; from: string; moved: string };
    console.log(info);
    daemon = info.pid;
    expect((await fetch(stage.url('/esc/mcp'), { method: 'DELETE', headers: { authorization: `Bearer ${token}`, 'mcp-session-id': session } })).status).toBe(200);
    const gone = await waitFor(() => !running(daemon), 8_000, 'the daemon to be gone').then(() => true, () => false);
    console.log({ daemonStillRunning: running(daemon) });
    expect(gone).toBe(true);
  }, 30_000);
});
