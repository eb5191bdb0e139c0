/**
 * Review (round 3), aggregation branch: a merged list holds every page of every upstream in memory
 * at once (aggregate-methods.ts allPages: up to 100 pages, each up to max_body_bytes, parsed), then
 * serialises the whole merge. Measured here with 12 pages of ~3.9 MiB from one upstream: the heap
 * of the gateway's process (in-process here) during one tools/list; at the 100 pages the route
 * follows, the same growth is some eight times larger, per upstream, per concurrent list.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';

const PATH = '/all/mcp';
const PAGES = 12;
let up: ChildProcess;
let stage: StdioStage;

beforeAll(async () => {
  up = spawn(process.execPath, [join(import.meta.dirname, 'review/big-pages-upstream.mjs'), '110000', String(PAGES)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = String((await once(up.stdout!, 'data'))[0]).trim();
  stage = await startStdioStage({ [PATH]: { upstreams: { big: { upstream: url, limits: { upstream_timeout: '60s' } } } } });
}, 60_000);
afterAll(async () => {
  up?.kill('SIGKILL');
  await stage?.close();
});

describe('review: a merged list is held whole', () => {
  it(`one tools/list over ${PAGES} pages of ~3.9 MiB`, async () => {
    const token = await stage.token(PATH);
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await fetch(stage.url(PATH), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'r', version: '1' } } }) });
    const session = init.headers.get('mcp-session-id')!;
    await init.arrayBuffer();
    global.gc?.();
    const base = process.memoryUsage().heapUsed;
    let peak = base;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 20);
    const res = await fetch(stage.url(PATH), { method: 'POST', headers: { ...headers, 'mcp-session-id': session }, body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list' }) });
    const body = await res.arrayBuffer();
    clearInterval(sampler);
    const growthMb = Math.round((peak - base) / 1048576);
    console.log({ status: res.status, answerMb: Math.round(body.byteLength / 1048576), heapGrowthMb: growthMb });
    expect(growthMb).toBeLessThan(256);
  }, 120_000);
});
