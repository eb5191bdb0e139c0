/**
 * An upstream's GET stream through an aggregated route (issue 22, docs/aggregation.md): a TS SDK
 * server (the growing server) behind a recording hop, its client the TS SDK. When the upstream
 * ends its session's GET stream (the SDK's closeStandaloneSSEStream), the gateway opens it again,
 * so the list_changed the upstream sends later still reaches the client; when the upstream
 * restarts (its sessions forgotten), the gateway joins it afresh without the client asking
 * anything, tells the client its lists may have changed, and the new session's list_changed reach
 * the client too, all in the same client session.
 */
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGrowingServer } from '../helpers/growing-mcp-server.js';
import { connectClient, resultText, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startRecordingHop, type RecordingHop } from '../helpers/upstream.js';

const GROW = '/grow/mcp';
let growing: Awaited<ReturnType<typeof startGrowingServer>>;
let hop: RecordingHop;
let stage: StdioStage;

beforeAll(async () => {
  growing = await startGrowingServer();
  hop = await startRecordingHop(growing.url);
  stage = await startStdioStage({ [GROW]: { upstreams: { growing: { upstream: hop.url } } } });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([hop?.close(), growing?.close()]);
});

const seen = (method: string) => hop.requests.filter((r) => r.method === method);
const initializes = () => seen('POST').filter((r) => r.body.toString('utf8').includes('"initialize"')).length;

/** Grows a tool until the client is told (a reopened stream may be registered at the upstream a moment after its request). */
async function growUntilTold(client: Awaited<ReturnType<typeof connectClient>>['client'], told: () => number, before: number): Promise<string[]> {
  const grown: string[] = [];
  for (let attempt = 0; attempt < 3 && told() === before; attempt++) {
    grown.push(resultText(await client.callTool({ name: 'growing__grow', arguments: {} })));
    await waitFor(() => told() > before, 5_000, 'list_changed').catch(() => undefined);
  }
  return grown;
}

describe("an upstream's GET stream through an aggregated route", () => {
  it('ended by the upstream, it is opened again, and the list_changed sent on it later reach the client', async () => {
    const { client, transport } = await connectClient(stage.url(GROW), await stage.token(GROW));
    let told = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void told++);
    await client.listTools();
    const gets = seen('GET').length;
    for (let round = 1; round <= 2; round++) {
      expect(resultText(await client.callTool({ name: 'growing__hang_up', arguments: {} }))).toBe('hung up');
      await waitFor(() => seen('GET').length >= gets + round, 15_000, `GET stream reopened (round ${round})`);
      const before = told;
      const grown = await growUntilTold(client, () => told, before);
      expect(told, `round ${round}: grew ${grown.join(', ')}`).toBeGreaterThan(before);
      const names = (await client.listTools()).tools.map((t) => t.name);
      for (const name of grown) expect(names).toContain(`growing__${name}`);
    }
    // One GET per hang-up, not more: the reopening waits, it does not spin.
    expect(seen('GET').length).toBe(gets + 2);
    await transport.terminateSession();
    await client.close();
  });

  it('restarted (its sessions forgotten), it is joined afresh without the client asking: the client is told its tools changed, and hears the new session', async () => {
    const { client, transport } = await connectClient(stage.url(GROW), await stage.token(GROW));
    const sessionId = transport.sessionId;
    let told = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void told++);
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('growing__grow');
    const port = Number(new URL(growing.url).port);
    const initialized = initializes();
    await growing.close();
    growing = await startGrowingServer(port);
    // The gateway finds its upstream session forgotten (404 on the reopened GET) and opens a new one.
    await waitFor(() => told >= 1, 30_000, 'list_changed after the rejoin');
    expect(growing.sessions()).toBe(1);
    expect(initializes()).toBe(initialized + 1);
    const grown = await growUntilTold(client, () => told, told);
    expect(grown[0]).toBe('grown_1'); // the new server's first
    expect(told).toBeGreaterThanOrEqual(2);
    expect((await client.listTools()).tools.map((t) => t.name)).toContain('growing__grown_1');
    expect(transport.sessionId).toBe(sessionId);
    await transport.terminateSession();
    await client.close();
  });
});
