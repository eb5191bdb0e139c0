/**
 * An upstream's `notifications/tools/list_changed` reaches the client of an
 * aggregated route (issue 22 item 3): a TS SDK server whose tool adds a tool
 * sends it on its session's GET stream; the gateway holds that stream for
 * the client's session and tells the client on the client's own GET stream;
 * the client's next tools/list (the TS SDK client) is read afresh from every
 * upstream and shows the new tool under its shown name. Only the session
 * whose upstream session changed is told; a second GET stream is 409.
 */
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGrowingServer } from '../helpers/growing-mcp-server.js';
import { connectClient, resultText, serverBin, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';

const GROW = '/grow/mcp';
let growing: Awaited<ReturnType<typeof startGrowingServer>>;
let stage: StdioStage;

beforeAll(async () => {
  growing = await startGrowingServer();
  const memory = { upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } };
  stage = await startStdioStage({ [GROW]: { upstreams: { growing: { upstream: growing.url }, memory } } });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await growing?.close();
});

describe('list_changed through an aggregated route', () => {
  it('each tool an upstream adds is announced to its session only, and the next merged list has it', async () => {
    const token = await stage.token(GROW);
    const told = { alice: 0, bystander: 0 };
    const { client } = await connectClient(stage.url(GROW), token);
    const { client: bystander } = await connectClient(stage.url(GROW), token);
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void told.alice++);
    bystander.setNotificationHandler(ToolListChangedNotificationSchema, () => void told.bystander++);
    expect(client.getServerCapabilities()?.tools).toEqual({ listChanged: true });
    const before = (await client.listTools()).tools.map((t) => t.name);
    expect(before).toContain('growing__grow');
    for (let n = 1; n <= 3; n++) {
      expect(resultText(await client.callTool({ name: 'growing__grow', arguments: {} }))).toBe(`grown_${n}`);
      await waitFor(() => told.alice >= n, 10_000, `list_changed #${n}`);
      const after = (await client.listTools()).tools.map((t) => t.name);
      expect(after.filter((name) => !before.includes(name)).sort()).toEqual(Array.from({ length: n }, (_, i) => `growing__grown_${i + 1}`));
      expect(resultText(await client.callTool({ name: `growing__grown_${n}`, arguments: {} }))).toBe(`grown_${n}`);
    }
    expect(told.bystander).toBe(0);
    expect((await bystander.listTools()).tools.map((t) => t.name)).toEqual(before);
    await client.close();
    await bystander.close();
  });

  it('a second GET stream of one session is refused', async () => {
    const token = await stage.token(GROW);
    const { client, transport } = await connectClient(stage.url(GROW), token);
    await client.listTools();
    const res = await fetch(stage.url(GROW), { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream', 'mcp-session-id': transport.sessionId!, 'mcp-protocol-version': '2025-11-25' } });
    expect(res.status).toBe(409);
    await res.body?.cancel();
    await client.close();
  });
});
