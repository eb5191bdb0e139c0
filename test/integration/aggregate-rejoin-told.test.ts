/**
 * What an aggregated session's client is told when an upstream comes back (issue 22; docs/aggregation.md
 * "An upstream down for long"), with unmodified server-everything instances, one behind a recording
 * hop that is killed and started again at its port, on shortened waits (StartOptions.aggregateRecovery):
 * - a client with no GET stream (raw POSTs) is told the rejoin's list changes on the event stream
 *   of its next POST that is answered, before the answer, and once;
 * - a session opened while the upstream was down (its initialize left it out) is probed with the
 *   route's other waiting sessions: when the upstream answers, the session joins it and its client
 *   is told its lists changed, without a request of its own, and then finds the upstream's tools.
 */
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readPostAnswer, type RpcMessage } from '../helpers/post-answer.js';
import { connectClient, resultText, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const ROUTE = '/told/mcp';
const FAST = { reopenFirstMs: 100, reopenMaxMs: 200, maxReopens: 3, stableMs: 5_000, probeMs: 1_000, wakeAtOnce: 2 };
const LIST_CHANGES = ['notifications/tools/list_changed', 'notifications/prompts/list_changed', 'notifications/resources/list_changed'];

let away: UpstreamHandle;
let steady: UpstreamHandle;
let hop: RecordingHop;
let stage: StdioStage;

beforeAll(async () => {
  [away, steady] = await Promise.all([startEverythingServer(), startEverythingServer()]);
  hop = await startRecordingHop(away.url);
  stage = await startStdioStage({ [ROUTE]: { upstreams: { a: { upstream: hop.url }, b: { upstream: steady.url } } } }, {}, { aggregateRecovery: FAST });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([hop?.close(), away?.close(), steady?.close()]);
});

/** Upstream sessions opened (an initialize answered: the notifications/initialized after it); a probe's initialize the hop answered 502 is not one. */
const joins = (from: number) => hop.requests.slice(from).filter((r) => r.method === 'POST' && r.body.toString('utf8').includes('"method":"notifications/initialized"')).length;

async function stopAway(): Promise<number> {
  const port = Number(new URL(away.url).port);
  await away.close();
  return port;
}

/** A raw client's POST of one message on its session (no GET stream is ever opened). */
async function post(token: string, session: string | undefined, message: Record<string, unknown>): Promise<Response> {
  return fetch(stage.url(ROUTE), {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25', ...(session && { 'mcp-session-id': session }) },
    body: JSON.stringify({ jsonrpc: '2.0', ...message }),
  });
}

describe('an upstream back after an outage is told to every client', () => {
  it('a client without a GET stream is told on the stream of its next answered POST, before the answer, once', async () => {
    const token = await stage.token(ROUTE, 'no-get');
    const opened = await post(token, undefined, { id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
    const session = opened.headers.get('mcp-session-id')!;
    expect(opened.status).toBe(200);
    await opened.text();
    expect((await post(token, session, { method: 'notifications/initialized' })).status).toBe(202);
    const port = await stopAway();
    const mark = hop.requests.length;
    away = await startEverythingServer('streamableHttp', port);
    // No request of the client's: its session joins the restarted upstream afresh (its GET stream found the session forgotten).
    await waitFor(() => joins(mark) >= 1, 20_000, 'the session joined afresh');
    await new Promise((resolve) => setTimeout(resolve, 500)); // the rejoin told once notifications/initialized is answered
    const before: RpcMessage[] = [];
    const answer = (await readPostAnswer(await post(token, session, { id: 2, method: 'ping' }), before)) as RpcMessage;
    expect(answer).toMatchObject({ id: 2, result: {} });
    expect(before.map((m) => m.method).sort()).toEqual([...LIST_CHANGES].sort());
    // Told once: the next POST is a plain answer.
    const next = await post(token, session, { id: 3, method: 'ping' });
    expect(next.headers.get('content-type')).toContain('application/json');
    expect(await next.json()).toMatchObject({ id: 3, result: {} });
    await fetch(stage.url(ROUTE), { method: 'DELETE', headers: { authorization: `Bearer ${token}`, 'mcp-session-id': session } });
  }, 60_000);

  it("a session opened while the upstream was down joins it when it answers a probe, and its client is told, without a request of its own", async () => {
    const port = await stopAway();
    const { client, transport } = await connectClient(stage.url(ROUTE), await stage.token(ROUTE, 'late'));
    let told = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void told++);
    // Opened without `a`: its tools are not listed.
    const without = (await client.listTools()).tools.map((t) => t.name);
    expect(without.some((n) => n.startsWith('a__'))).toBe(false);
    expect(without).toContain('b__echo');
    const mark = hop.requests.length;
    away = await startEverythingServer('streamableHttp', port);
    await waitFor(() => told >= 1, 20_000, 'list_changed after the upstream came back');
    expect(joins(mark)).toBe(1);
    const posted = hop.requests.slice(mark).filter((r) => r.method === 'POST' && r.body.length > 0).map((r) => (JSON.parse(r.body.toString('utf8')) as RpcMessage).method);
    expect(posted).not.toContain('tools/list'); // joined by the probe, not by a request of the client's
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('a__echo');
    expect(resultText(await client.callTool({ name: 'a__echo', arguments: { message: 'back' } }))).toContain('back');
    expect(joins(mark)).toBe(1);
    await transport.terminateSession();
    await client.close();
  }, 60_000);
});
