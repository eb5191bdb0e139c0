/**
 * Review (round 3), aggregation branch: a resources/read of a URI no upstream listed makes the
 * aggregated route list every page (up to 100) of every upstream again (aggregate-methods.ts
 * byUri → merged), for each such read. One client request (a batch of reads of made-up URIs)
 * costs the upstreams thousands of requests; nothing rate-limits what the gateway sends.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';

const PATH = '/all/mcp';
let up: ChildProcess;
let upUrl = '';
let stage: StdioStage;

beforeAll(async () => {
  up = spawn(process.execPath, [join(import.meta.dirname, 'review/paged-upstream.mjs')], { stdio: ['ignore', 'pipe', 'inherit'] });
  upUrl = String((await once(up.stdout!, 'data'))[0]).trim();
  stage = await startStdioStage({ [PATH]: { upstreams: { paged: { upstream: upUrl } } } });
}, 60_000);
afterAll(async () => {
  up?.kill('SIGKILL');
  await stage?.close();
});

describe('review: aggregated resource reads amplify', () => {
  it('one POST of 20 reads of unknown URIs: how many resources/list reach the upstream', async () => {
    const token = await stage.token(PATH);
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const init = await fetch(stage.url(PATH), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'r', version: '1' } } }) });
    const session = init.headers.get('mcp-session-id')!;
    await init.arrayBuffer();
    const count = async () => Number(await (await fetch(upUrl.replace('/mcp', '/count'))).text());
    const before = await count();
    const batch = Array.from({ length: 20 }, (_, i) => ({ jsonrpc: '2.0', id: 10 + i, method: 'resources/read', params: { uri: `mem://nope-${i}` } }));
    const res = await fetch(stage.url(PATH), { method: 'POST', headers: { ...headers, 'mcp-session-id': session }, body: JSON.stringify(batch) });
    await res.arrayBuffer();
    const sent = (await count()) - before;
    console.log({ status: res.status, resourcesListSentUpstream: sent });
    expect(sent).toBeLessThanOrEqual(100);
  }, 60_000);
});
