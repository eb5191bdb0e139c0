/**
 * A hostile upstream against the streams of an aggregated route (DESIGN §8.2–8.3, issue 22), beside
 * an unmodified server-everything, with the hostile fixture of test/helpers/hostile-upstream.ts:
 * - it ends its GET stream as soon as it is opened, or answers it 404 (session forgotten) so the
 *   gateway joins it afresh, again and again: the gateway reopens with a wait that doubles, a
 *   handful of times in seconds (bounded in all by MAX_REOPENS, upstream-listener's unit test), at
 *   no measurable CPU, and server-everything is served throughout;
 * - it floods a call's stream with 32 MiB of progress while the client reads nothing: the client
 *   still gets its answer, after what the session's bound let through (far from all of it);
 * - it sends resources/updated for a URI the client subscribed to through server-everything, and
 *   for one nobody subscribed to: neither reaches the client, while its logging messages do;
 * - its answer streams are read as they come, never kept whole: a 32 MiB flood leaves the
 *   gateway's buffers far below it; an answer followed by a stream it never ends is the call's
 *   answer at once (the gateway ends that stream); a stream of events that never answers ends at
 *   upstream_timeout, and one event larger than max_body_bytes cuts the call: in both the caller
 *   gets an error and server-everything is served on the same session.
 */
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { LoggingMessageNotificationSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHostileUpstream, type HostileUpstream } from '../helpers/hostile-upstream.js';
import { readPostAnswer, sseData, type RpcMessage } from '../helpers/post-answer.js';
import { connectClient, resultText, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';

const FLOOD_BYTES = 32 * 1024 * 1024;
// A full collection on demand, without starting node with --expose-gc.
v8.setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;
let everything: UpstreamHandle;
const hostile: Record<'loop' | 'forget' | 'flood' | 'updates' | 'answers', HostileUpstream> = {} as never;
const updatedUris: string[] = [];
let stage: StdioStage;

beforeAll(async () => {
  everything = await startEverythingServer();
  [hostile.loop, hostile.forget, hostile.flood, hostile.updates, hostile.answers] = await Promise.all([
    startHostileUpstream({ get: 'hang-up' }),
    startHostileUpstream({ get: 'forget' }),
    startHostileUpstream({}),
    startHostileUpstream({ get: 'updates', uris: updatedUris }),
    startHostileUpstream({}),
  ]);
  const beside = (name: keyof typeof hostile) => ({ upstreams: { [name]: { upstream: hostile[name].url }, everything: { upstream: everything.url } } });
  stage = await startStdioStage({
    '/loop/mcp': beside('loop'),
    '/forget/mcp': beside('forget'),
    '/flood/mcp': { ...beside('flood'), limits: { max_body_bytes: FLOOD_BYTES + 8 * 1024 * 1024 } },
    '/updates/mcp': { upstreams: { everything: { upstream: everything.url }, updates: { upstream: hostile.updates.url } } },
    // Its calls are given 3 s: a stream that never answers ends there.
    '/answers/mcp': { upstreams: { answers: { upstream: hostile.answers.url, limits: { upstream_timeout: '3s' } }, everything: { upstream: everything.url } } },
  });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([everything?.close(), ...Object.values(hostile).map((h) => h.close())]);
});

/** A raw session of `path` (no GET stream unless asked), initialized. */
async function rawSession(path: string) {
  const headers = { authorization: `Bearer ${await stage.token(path)}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
  const init = await fetch(stage.url(path), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }) });
  expect(init.status).toBe(200);
  await init.body?.cancel();
  const session = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')! };
  const post = (body: unknown) => fetch(stage.url(path), { method: 'POST', headers: session, body: JSON.stringify(body) });
  expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
  return { post, end: () => fetch(stage.url(path), { method: 'DELETE', headers: session }) };
}

/** CPU time of this process (gateway and test alike) over `run`, and its wall time, in ms. */
async function cpuOver(run: () => Promise<void>): Promise<{ cpuMs: number; wallMs: number }> {
  const start = process.cpuUsage();
  const at = performance.now();
  await run();
  const used = process.cpuUsage(start);
  return { cpuMs: (used.user + used.system) / 1000, wallMs: performance.now() - at };
}

describe('[K63] an upstream that ends its GET stream in a loop cannot make the gateway spin', () => {
  it.each(['loop', 'forget'] as const)('%s: a few reopenings in 4 s, each after a longer wait, little CPU; server-everything served throughout', async (name) => {
    const path = `/${name}/mcp`;
    const upstream = hostile[name];
    const before = { gets: upstream.gets, initializes: upstream.initializes };
    const since = performance.now();
    const s = await rawSession(path);
    const { cpuMs, wallMs } = await cpuOver(async () => {
      for (let i = 0; i < 8; i++) {
        const answer = (await readPostAnswer(await s.post({ jsonrpc: '2.0', id: 10 + i, method: 'tools/call', params: { name: 'everything__echo', arguments: { message: `still ${i}` } } }), [])) as RpcMessage;
        expect(JSON.stringify(answer.result)).toContain(`still ${i}`);
        await new Promise((r) => setTimeout(r, 500));
      }
    });
    const gets = upstream.gets - before.gets;
    // Waits of 0.5, 1, 2, 4 s: within T of the session's start, the first GET and log2(T / 0.5 s + 1) more at most.
    expect(gets).toBeGreaterThanOrEqual(2);
    expect(gets).toBeLessThanOrEqual(1 + Math.ceil(Math.log2((performance.now() - since) / 500 + 1)));
    if (name === 'forget') expect(upstream.initializes - before.initializes).toBeLessThanOrEqual(gets);
    // A spin would burn the whole wall time on the one core it runs on.
    expect(cpuMs).toBeLessThan(wallMs / 2);
    expect((await s.end()).status).toBe(200);
  }, 60_000);
});

describe('[K63] an upstream flooding a call with progress while the client reads nothing', () => {
  it(`32 MiB of progress: the client gets the answer last, after a part of the progress far below the flood; the gateway held no more than the session's bound`, async () => {
    const s = await rawSession('/flood/mcp');
    const res = await s.post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'flood__progress-flood', arguments: { bytes: FLOOD_BYTES }, _meta: { progressToken: 'p' } } });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    // The client reads nothing while the upstream floods and answers.
    // What the process holds (after a collection, so garbage does not count) is sampled while it
    // floods: the answer stream is read as it comes, never kept whole (the old reader kept ~30 MB).
    const held = () => (collect(), process.memoryUsage().arrayBuffers);
    const base = held();
    let peak = base;
    const sampler = setInterval(() => (peak = Math.max(peak, held())), 500);
    await waitFor(() => hostile.flood.flood.answered, 60_000, 'the flood sent');
    clearInterval(sampler);
    expect(peak - base).toBeLessThan(FLOOD_BYTES / 4);
    await new Promise((r) => setTimeout(r, 1_000));
    let bytes = 0;
    let text = '';
    const messages: RpcMessage[] = [];
    for await (const chunk of res.body!) {
      bytes += chunk.length;
      const read = sseData(text + Buffer.from(chunk).toString('utf8'));
      text = read.rest;
      messages.push(...read.data.map((d) => JSON.parse(d) as RpcMessage));
    }
    const progress = messages.filter((m) => m.method === 'notifications/progress');
    expect(progress.length).toBeGreaterThan(0);
    expect(bytes).toBeLessThan(FLOOD_BYTES / 2); // what the kernel's socket buffers took, and the session's 1 MiB
    expect(messages.at(-1)).toMatchObject({ id: 2, result: { content: [{ type: 'text', text: 'flooded' }] } });
    // The session serves on.
    expect(JSON.stringify(await readPostAnswer(await s.post({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'everything__echo', arguments: { message: 'after' } } }), []))).toContain('after');
    expect((await s.end()).status).toBe(200);
  }, 120_000);
});

describe("an upstream's resources/updated reaches the client only for what the client subscribed to through it", () => {
  it('updates of a URI subscribed through server-everything, and of one nobody subscribed to, sent by the other upstream: none reaches the client; its logging messages do', async () => {
    const { client, transport } = await connectClient(stage.url('/updates/mcp'), await stage.token('/updates/mcp'));
    const updated: string[] = [];
    let logged = 0;
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => void updated.push(n.params.uri));
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => void (String(n.params.data).startsWith('hostile') && logged++));
    const uri = (await client.listResources()).resources[0]!.uri;
    await client.subscribeResource({ uri });
    updatedUris.push(uri, 'file:///nobody-subscribed');
    logged = 0; // from here on, each of its events is preceded by the two updates
    await waitFor(() => logged >= 20, 15_000, "the hostile upstream's logging messages");
    expect(updated).toEqual([]);
    // server-everything's own update of it does reach the client.
    expect(resultText(await client.callTool({ name: 'everything__toggle-subscriber-updates', arguments: {} }))).toBeTruthy();
    await waitFor(() => updated.includes(uri), 10_000, "server-everything's update");
    expect(updated.every((u) => u === uri)).toBe(true);
    await transport.terminateSession();
    await client.close();
  }, 60_000);
});

describe("[K63] a hostile upstream's answer streams are read as they come, and bounded", () => {
  const call = (id: number, name: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {}, _meta: { progressToken: `p${id}` } } });
  const errorOf = async (res: Response) => (await readPostAnswer(res, [])) as RpcMessage;

  it('an answer followed by a stream it never ends: the call has its answer at once, and the gateway ends that stream', async () => {
    const s = await rawSession('/answers/mcp');
    const before: RpcMessage[] = [];
    const answer = (await readPostAnswer(await s.post(call(2, 'answers__answer-then-hold')), before)) as RpcMessage;
    expect(before.map((m) => m.method)).toEqual(['notifications/progress']);
    expect(JSON.stringify(answer.result)).toContain('answered, stream held open');
    // Read whole before the upstream_timeout of 3 s could end it: the gateway closed it at the answer.
    await waitFor(() => hostile.answers.held.closed === hostile.answers.held.answered, 10_000, 'the held stream closed by the gateway');
    expect((await s.end()).status).toBe(200);
  }, 30_000);

  it('events that never answer end at upstream_timeout, an event larger than max_body_bytes cuts the call: an error each, the session serves on', async () => {
    const s = await rawSession('/answers/mcp');
    for (const [id, name] of [[3, 'answers__endless-events'], [4, 'answers__huge-event']] as const) {
      const answer = await errorOf(await s.post(call(id, name)));
      expect(answer).toMatchObject({ id, error: { code: -32603 } });
      expect(JSON.stringify(await readPostAnswer(await s.post({ jsonrpc: '2.0', id: id + 10, method: 'tools/call', params: { name: 'everything__echo', arguments: { message: `after ${name}` } } }), []))).toContain(`after ${name}`);
    }
    expect((await s.end()).status).toBe(200);
  }, 60_000);
});
