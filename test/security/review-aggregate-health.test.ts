/**
 * Review (round 3), aggregation branch: an upstream's health (upstream-health.ts) is one per route,
 * shared by every client session, and any failure of any caller's request marks it down for 5 s
 * (aggregate-methods.ts `call` → health.failed): a timeout of mallory's own slow tool call (or her
 * missing user_oauth grant, a 4xx for her alone) takes the upstream away from bob too: left out of
 * his lists, his calls answered "unavailable". Repeated every 5 s, it is down for good.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';

const PATH = '/all/mcp';
let up: ChildProcess;
let stage: StdioStage;

beforeAll(async () => {
  up = spawn(process.execPath, [join(import.meta.dirname, 'review/slow-tool-upstream.mjs')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = String((await once(up.stdout!, 'data'))[0]).trim();
  stage = await startStdioStage({ [PATH]: { upstreams: { one: { upstream: url, limits: { upstream_timeout: '1s' } } } } });
}, 60_000);
afterAll(async () => {
  up?.kill('SIGKILL');
  await stage?.close();
});

async function session(sub: string): Promise<(body: unknown) => Promise<unknown>> {
  const token = await stage.token(PATH, sub);
  const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  const init = await fetch(stage.url(PATH), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'r', version: '1' } } }) });
  const id = init.headers.get('mcp-session-id')!;
  await init.arrayBuffer();
  return async (body) => (await fetch(stage.url(PATH), { method: 'POST', headers: { ...headers, 'mcp-session-id': id }, body: JSON.stringify(body) })).json();
}

describe('review: one caller marks a shared upstream down for every caller', () => {
  it("mallory's slow tool times out; bob's echo right after", async () => {
    const [mallory, bob] = await Promise.all([session('mallory'), session('bob')]);
    const before = await bob({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'one__echo', arguments: {} } });
    const slow = await mallory({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'one__slow', arguments: {} } });
    const after = await bob({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'one__echo', arguments: {} } });
    const list = await bob({ jsonrpc: '2.0', id: 5, method: 'tools/list' });
    console.log(JSON.stringify({ before, slow, after, list }));
    expect(after).toMatchObject({ result: { content: [{ text: 'echo' }] } });
  }, 30_000);

  it("mallory's call that the upstream refuses for her alone (403); bob's echo right after", async () => {
    const [mallory, bob] = await Promise.all([session('mallory'), session('bob')]);
    await new Promise((r) => setTimeout(r, 5_500)); // any earlier down window over
    const before = await bob({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'one__echo', arguments: {} } });
    const refused = await mallory({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'one__forbidden', arguments: {} } });
    const after = await bob({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'one__echo', arguments: {} } });
    console.log(JSON.stringify({ before, refused, after }));
    expect(after).toMatchObject({ result: { content: [{ text: 'echo' }] } });
  }, 30_000);
});
