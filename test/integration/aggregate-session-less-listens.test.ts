/**
 * `subscriptions/listen` of 2026-07-28 clients without a session on an aggregated route (DESIGN
 * §8.2, §8.4), beyond list changes:
 * - A watched URI served by an upstream of a session-based revision (the unmodified
 *   server-everything, behind a recording hop) is honoured: `resources/subscribe` on the
 *   principal's upstream session there, once for all its listens watching it, its
 *   `notifications/resources/updated` passed into those listens (stamped with each one's id), and
 *   `resources/unsubscribe` when the last of them ends. Another principal's listen hears nothing
 *   of it.
 * - An upstream listen (the stateless 2026-07-28 fixture's) that ends while the client's listen
 *   lasts is opened again: the client is told its lists may have changed, and later changes reach
 *   it; an upstream that ends every listen at once is asked a bounded number of times (shortened
 *   waits: StartOptions.aggregateRecovery), then left, the client's listen still open.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStatelessServer, type StatelessServer } from '../helpers/stateless-mcp-server.js';
import { startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';
import { post2026 } from '../helpers/wire-2026.js';

const ROUTE = '/all/mcp';
const HANGING = '/hanging/mcp';
/** The 2026-07-28 fixture alone: server-everything's own list changes (sent as its tools are enabled) cannot reach the listen. */
const MODERN = '/modern/mcp';
const DOC = 'demo://resource/static/document/architecture.md';
/** Reopenings in a row before an upstream listen is given up (shortened with the waits). */
const MAX_REOPENS = 3;
let everything: UpstreamHandle;
let hop: RecordingHop;
let modern: StatelessServer;
let hanging: StatelessServer;
let stage: StdioStage;
const streams = new AbortController();

beforeAll(async () => {
  [everything, modern, hanging] = await Promise.all([startEverythingServer(), startStatelessServer({ keepAliveMs: 0 }), startStatelessServer({ keepAliveMs: 0, listenHangUp: true })]);
  hop = await startRecordingHop(everything.url);
  const recovery = { reopenFirstMs: 50, reopenMaxMs: 200, maxReopens: MAX_REOPENS, stableMs: 60_000 };
  stage = await startStdioStage({ [ROUTE]: { upstreams: { everything: { upstream: hop.url }, modern: { upstream: modern.url } } }, [HANGING]: { upstreams: { hanging: { upstream: hanging.url } } }, [MODERN]: { upstreams: { modern: { upstream: modern.url } } } }, {}, { aggregateRecovery: recovery });
}, 60_000);
afterAll(async () => {
  streams.abort();
  await stage?.close();
  await Promise.allSettled([hop?.close(), everything?.close(), modern?.close(), hanging?.close()]);
});

const tokenOf = (path: string, sub: string) => stage.issuer.token({ audience: stage.gw.config.routes.find((r) => r.path === path)!.resource, sub });

interface Frame {
  method: string;
  params: Record<string, unknown> & { _meta?: Record<string, unknown> };
}

/** Opens a listen and reads it up to its acknowledgement; `until` reads on. */
async function openListen(path: string, token: string, id: string, notifications: Record<string, unknown>) {
  const aborted = new AbortController();
  streams.signal.addEventListener('abort', () => aborted.abort());
  const res = await post2026(`${stage.gw.url}${path}`, 'subscriptions/listen', { notifications }, { token, id, signal: aborted.signal });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let seen = '';
  let over = false;
  const frames = (): Frame[] =>
    seen
      .split('\n')
      .filter((line) => line.startsWith('data: '))
      .map((line) => JSON.parse(line.slice(6)) as Frame);
  const until = async (check: (frames: Frame[]) => boolean) => {
    while (!check(frames())) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the listen ended before the condition held:\n${seen}`);
      seen += decoder.decode(value, { stream: true });
    }
  };
  // Reads in the background once asked, so `over` tells whether the gateway ended it.
  const drain = () => void (async () => { for (;;) { const { value, done } = await reader.read(); if (done) return void (over = true); seen += decoder.decode(value, { stream: true }); } })().catch(() => (over = true));
  await until((f) => f.some((x) => x.method === 'notifications/subscriptions/acknowledged'));
  return { frames, until, drain, ended: () => over, close: () => aborted.abort() };
}

/** The JSON-RPC requests the hop saw POSTed to server-everything, by method. */
const postedOf = (method: string) =>
  hop.requests
    .filter((r) => r.method === 'POST' && r.body.length > 0)
    .map((r) => JSON.parse(r.body.toString('utf8')) as { method?: string; params?: { uri?: string } })
    .filter((m) => m.method === method);

const callTool = async (token: string, name: string, args: Record<string, unknown> = {}, path = ROUTE) => {
  const res = await post2026(`${stage.gw.url}${path}`, 'tools/call', { name, arguments: args }, { token });
  expect(res.status).toBe(200);
  await res.arrayBuffer();
};

describe('a watched URI served by an upstream of a session-based revision', () => {
  it("is subscribed on the principal's session there, once for all its listens; its updates reach them; the last one's end unsubscribes", async () => {
    const [alice, bob] = await Promise.all([tokenOf(ROUTE, 'alice'), tokenOf(ROUTE, 'bob')]);
    const subscribesBefore = postedOf('resources/subscribe').length;
    const first = await openListen(ROUTE, alice, 'A-1', { resourceSubscriptions: [DOC, 'demo://nowhere'] });
    expect(first.frames()[0]!.params).toMatchObject({ notifications: { resourceSubscriptions: [DOC] }, _meta: { 'io.modelcontextprotocol/subscriptionId': 'A-1' } });
    const second = await openListen(ROUTE, alice, 'A-2', { resourceSubscriptions: [DOC] });
    const bobs = await openListen(ROUTE, bob, 'B-1', { toolsListChanged: true });
    expect(postedOf('resources/subscribe').slice(subscribesBefore).map((m) => m.params?.uri)).toEqual([DOC]);
    // server-everything tells a session of its subscribed resources' updates once asked to (at once, then every 5 s).
    await callTool(alice, 'everything__toggle-subscriber-updates');
    const updated = (f: Frame[]) => f.filter((x) => x.method === 'notifications/resources/updated');
    await first.until((f) => updated(f).length >= 1);
    await second.until((f) => updated(f).length >= 1);
    expect(updated(first.frames())[0]!.params).toEqual({ uri: DOC, _meta: { 'io.modelcontextprotocol/subscriptionId': 'A-1' } });
    expect(updated(second.frames())[0]!.params).toEqual({ uri: DOC, _meta: { 'io.modelcontextprotocol/subscriptionId': 'A-2' } });
    await callTool(alice, 'everything__toggle-subscriber-updates');
    first.close();
    const unsubscribesBefore = postedOf('resources/unsubscribe').length;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(postedOf('resources/unsubscribe').length).toBe(unsubscribesBefore);
    second.close();
    await waitFor(() => postedOf('resources/unsubscribe').some((m) => m.params?.uri === DOC), 10_000, 'unsubscribed when the last listen ended');
    // Nothing of alice's reaches bob. server-everything's own tools/list_changed for bob's upstream
    // session (it adds tools once initialized) may come after his acknowledgement: his, and asked for.
    expect(bobs.frames().map((f) => f.method).filter((m) => m !== 'notifications/tools/list_changed')).toEqual(['notifications/subscriptions/acknowledged']);
    bobs.close();
  }, 30_000);
});

describe('an upstream listen that ends while the client listens', () => {
  it('is opened again: the client is told its lists may have changed, and later changes reach it', async () => {
    const token = await tokenOf(MODERN, 'carol');
    const listen = await openListen(MODERN, token, 'C-1', { toolsListChanged: true });
    const opened = modern.listens.length;
    const changed = (f: Frame[]) => f.filter((x) => x.method === 'notifications/tools/list_changed').length;
    modern.endListens();
    await waitFor(() => modern.listens.length > opened, 10_000, 'the upstream listen opened again');
    await listen.until((f) => changed(f) === 1);
    await callTool(token, 'modern__test_trigger_tool_change', {}, MODERN);
    await listen.until((f) => changed(f) === 2);
    for (const frame of listen.frames()) expect(frame.params._meta).toEqual({ 'io.modelcontextprotocol/subscriptionId': 'C-1' });
    listen.close();
  });

  it(`an upstream that ends every listen at once is asked ${MAX_REOPENS} times more, then left; the client's listen lasts`, async () => {
    const listen = await openListen(HANGING, await tokenOf(HANGING, 'dave'), 'D-1', { toolsListChanged: true });
    listen.drain();
    await waitFor(() => hanging.listens.length >= 1 + MAX_REOPENS, 10_000, 'the listen reopened');
    // Well past the longest wait (200 ms): no more.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(hanging.listens.length).toBe(1 + MAX_REOPENS);
    expect(listen.ended()).toBe(false);
    listen.close();
  });
});
