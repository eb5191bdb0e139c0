/**
 * One client request must not multiply an aggregated route's merged lists (DESIGN §8.2): a merged
 * list reads every page of every upstream and may hold 16 MiB, so a batch of 100 `tools/list`
 * (the most a body may hold) read 100 times would cost the upstreams 100 lists each and the
 * gateway up to 1.6 GiB for one POST. Concurrent requests of one session for one list share one
 * reading. Two unmodified server-everything processes behind recording hops count what reached
 * them (counted, not timed).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const PATH = '/all/mcp';
const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
let servers: UpstreamHandle[] = [];
let hops: RecordingHop[] = [];
let stage: StdioStage;

beforeAll(async () => {
  servers = await Promise.all([startEverythingServer(), startEverythingServer()]);
  hops = await Promise.all(servers.map((s) => startRecordingHop(s.url)));
  stage = await startStdioStage({ [PATH]: { upstreams: { a: { upstream: hops[0]!.url }, b: { upstream: hops[1]!.url } } } });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([...hops.map((h) => h.close()), ...servers.map((s) => s.close())]);
});

const listsAt = (hop: RecordingHop) => hop.requests.filter((r) => r.method === 'POST' && r.body.toString('utf8').includes('"tools/list"')).length;

describe('merged lists of one aggregated session', () => {
  it('a batch of 100 tools/list reads each upstream list once, and every message is answered with the whole list', async () => {
    const auth = { ...HEADERS, authorization: `Bearer ${await stage.token(PATH, 'alice')}` };
    const init = await fetch(stage.url(PATH), { method: 'POST', headers: auth, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }) });
    expect(init.status).toBe(200);
    const headers = { ...auth, 'mcp-session-id': init.headers.get('mcp-session-id')! };
    const before = hops.map(listsAt);
    const batch = Array.from({ length: 100 }, (_, i) => ({ jsonrpc: '2.0', id: i + 1, method: 'tools/list' }));
    const res = await fetch(stage.url(PATH), { method: 'POST', headers, body: JSON.stringify(batch) });
    expect(res.status).toBe(200);
    const answers = (await res.json()) as { id: number; result: { tools: { name: string }[] } }[];
    expect(answers.map((a) => a.id)).toEqual(batch.map((m) => m.id));
    const names = answers[0]!.result.tools.map((t) => t.name);
    expect(names.some((n) => n.startsWith('a__')) && names.some((n) => n.startsWith('b__'))).toBe(true);
    for (const a of answers) expect(a.result.tools.map((t) => t.name)).toEqual(names);
    expect(hops.map(listsAt).map((n, i) => n - before[i]!)).toEqual([1, 1]);
    // Once answered, the next list is read afresh (nothing is cached past the requests that shared it).
    await fetch(stage.url(PATH), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 200, method: 'tools/list' }) });
    expect(hops.map(listsAt).map((n, i) => n - before[i]!)).toEqual([2, 2]);
  }, 60_000);
});
