/**
 * An upstream down for longer than the fast reopening of its GET streams (issue 22 item 5,
 * docs/aggregation.md "An upstream down for long"), with an unmodified server-everything behind a
 * recording hop and TS SDK clients, on shortened waits (StartOptions.aggregateRecovery: 3
 * reopenings of 0.1–0.2 s instead of 12 up to 30 s, probes every 2 s ± 25 % instead of 30 s):
 * - killed: every session's stream gives up its fast reopenings, then the route probes the
 *   upstream for all of them, one GET per probe interval, not one per session;
 * - started again at its port: with no request of any client, every session is joined afresh
 *   (a new upstream session each, told again the client's level and subscription) and each client
 *   is told its tools changed; their calls then work, in the same client sessions;
 * - with probing too slow to help (a second gateway), a call made right after the restart reaches
 *   the forgotten upstream session, which server-everything answers 400: the gateway asks `ping`
 *   on that session (400 too), joins the upstream afresh and sends the call again: it succeeds.
 */
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RpcMessage } from '../helpers/post-answer.js';
import { connectClient, resultText, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const ROUTE = '/long/mcp';
const FAST = { reopenFirstMs: 100, reopenMaxMs: 200, maxReopens: 3, stableMs: 5_000 };
const PROBE_MS = 2_000;
const SESSIONS = 3;

let server: UpstreamHandle;
let hop: RecordingHop;
let probing: StdioStage;
let notProbing: StdioStage;

beforeAll(async () => {
  server = await startEverythingServer();
  hop = await startRecordingHop(server.url);
  const route = { [ROUTE]: { upstreams: { a: { upstream: hop.url } } } };
  probing = await startStdioStage(route, {}, { aggregateRecovery: { ...FAST, probeMs: PROBE_MS, wakeAtOnce: 2 } });
  // Probes ten minutes apart: within the test only a client's request can find the upstream back.
  notProbing = await startStdioStage(route, {}, { aggregateRecovery: { ...FAST, probeMs: 600_000 } });
}, 60_000);
afterAll(async () => {
  await Promise.allSettled([probing?.close(), notProbing?.close()]);
  await Promise.allSettled([hop?.close(), server?.close()]);
});

const gets = () => hop.requests.filter((r) => r.method === 'GET').length;
const posted = (from = 0) => hop.requests.slice(from).filter((r) => r.method === 'POST' && r.body.length > 0).map((r) => JSON.parse(r.body.toString('utf8')) as RpcMessage);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function restart(): Promise<void> {
  const port = Number(new URL(server.url).port);
  await server.close();
  server = await startEverythingServer('streamableHttp', port);
}

describe('an upstream down for longer than the fast reopening', () => {
  it('is probed once per interval for all sessions, and when it is back every session is joined afresh without a client request', async () => {
    const clients = await Promise.all(Array.from({ length: SESSIONS }, async (_, i) => connectClient(probing.url(ROUTE), await probing.token(ROUTE, `user-${i}`))));
    const told = clients.map(() => 0);
    for (const [i, { client }] of clients.entries()) {
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => void told[i]!++);
      await client.setLoggingLevel('info');
      const uri = (await client.listResources()).resources[0]!.uri;
      await client.subscribeResource({ uri });
    }
    const port = Number(new URL(server.url).port);
    await server.close();
    // The fast reopenings (0.1 + 0.2 + 0.2 s per session) are long over after 3 s: each session's stream is parked.
    await sleep(3_000);
    expect(probing.gw.logs.join('')).toContain('probed slowly from now on');
    const parkedAt = gets();
    const windowMs = 7_000;
    await sleep(windowMs);
    const probes = gets() - parkedAt;
    // One GET per probe (2 s ± 25 %) for the three sessions together: per session it would be three times as many.
    expect(probes).toBeGreaterThanOrEqual(2);
    expect(probes).toBeLessThanOrEqual(Math.floor(windowMs / (PROBE_MS * 0.75)) + 1);
    const mark = hop.requests.length;
    server = await startEverythingServer('streamableHttp', port);
    // No request of any client: the next probe finds the upstream back and every session is joined afresh.
    await waitFor(() => told.every((n) => n >= 1), 20_000, 'list_changed to every client');
    const after = posted(mark).map((m) => m.method);
    expect(after.filter((m) => m === 'initialize')).toHaveLength(SESSIONS);
    await waitFor(() => posted(mark).filter((m) => m.method === 'resources/subscribe').length === SESSIONS, 10_000, 'each subscription told again');
    expect(posted(mark).filter((m) => m.method === 'logging/setLevel')).toHaveLength(SESSIONS);
    expect(posted(mark).filter((m) => m.method === 'tools/call')).toHaveLength(0);
    for (const [i, { client }] of clients.entries()) expect(resultText(await client.callTool({ name: 'a__echo', arguments: { message: `back ${i}` } }))).toContain(`back ${i}`);
    // Joined afresh once each: the calls opened nothing more.
    expect(posted(mark).filter((m) => m.method === 'initialize')).toHaveLength(SESSIONS);
    await Promise.allSettled(clients.map(async ({ client, transport }) => (await transport.terminateSession(), await client.close())));
  }, 90_000);

  it("a call on the session the restarted upstream forgot (400 from server-everything) is told from a bad request by a ping, and succeeds on a session joined afresh", async () => {
    const { client, transport } = await connectClient(notProbing.url(ROUTE), await notProbing.token(ROUTE, 'caller'));
    const sessionId = transport.sessionId;
    let told = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void told++);
    expect(resultText(await client.callTool({ name: 'a__echo', arguments: { message: 'before' } }))).toContain('before');
    await sleep(1_000); // let the GET streams of the previous test's sessions settle
    const mark = hop.requests.length;
    await restart();
    await sleep(2_000); // the stream's fast reopenings are spent: parked, and the next probe is minutes away
    expect(posted(mark).map((m) => m.method)).not.toContain('initialize');
    expect(resultText(await client.callTool({ name: 'a__echo', arguments: { message: 'after' } }))).toContain('after');
    const methods = posted(mark).map((m) => m.method).filter((m) => m !== undefined && !m.startsWith('notifications/'));
    // The call on the forgotten session (400), the ping that confirms it (400), the new session, the call again.
    expect(methods.slice(0, 3)).toEqual(['tools/call', 'ping', 'initialize']);
    expect(methods.filter((m) => m === 'tools/call')).toHaveLength(2);
    expect(methods.lastIndexOf('tools/call')).toBeGreaterThan(methods.indexOf('initialize'));
    await waitFor(() => told >= 1, 10_000, 'list_changed after the rejoin');
    expect(transport.sessionId).toBe(sessionId);
    await transport.terminateSession();
    await client.close();
  }, 60_000);
});
