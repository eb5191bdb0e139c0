/**
 * Progress and cancellation through an aggregated route (issue 22 item 3),
 * with the unmodified server-everything behind a recording hop and
 * server-memory over stdio, driven by the TS SDK client: the client's
 * progress token reaches the upstream that serves the call, whose progress
 * notifications reach the client as they come (before the answer); the
 * client's notifications/cancelled reaches that upstream with the id the
 * gateway gave the request there, and the upstream stays in service (a
 * cancelled call does not mark it down).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectClient, resultText, serverBin, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';

const ALL = '/all/mcp';
const LONG = 'everything__trigger-long-running-operation';
let everything: UpstreamHandle;
let hop: RecordingHop;
let stage: StdioStage;

beforeAll(async () => {
  everything = await startEverythingServer();
  hop = await startRecordingHop(everything.url);
  const memory = { upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } };
  stage = await startStdioStage({ [ALL]: { upstreams: { everything: { upstream: hop.url }, memory } } });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([hop?.close(), everything?.close()]);
});

/** The JSON-RPC messages the hop saw POSTed to server-everything. */
const posted = () => hop.requests.filter((r) => r.method === 'POST').map((r) => JSON.parse(r.body.toString('utf8')) as { id?: number; method?: string; params?: Record<string, unknown> });

describe('progress and cancellation through an aggregated route', () => {
  it('every progress notification of the serving upstream reaches the client, as it comes, before the answer', async () => {
    const { client } = await connectClient(stage.url(ALL), await stage.token(ALL));
    await client.listTools();
    for (const steps of [2, 4]) {
      const events: string[] = [];
      const result = client.callTool({ name: LONG, arguments: { duration: steps * 0.2, steps } }, undefined, { onprogress: (p) => void events.push(`progress ${p.progress}/${p.total}`) });
      await waitFor(() => events.length > 0, 10_000, 'first progress');
      expect(events.length).toBeLessThan(steps); // the first came while the call ran
      expect(resultText(await result)).toContain(`Steps: ${steps}.`);
      expect(events).toEqual(Array.from({ length: steps }, (_, i) => `progress ${i + 1}/${steps}`));
    }
    await client.close();
  });

  it("the client's cancellation reaches the upstream with its own id for the call, and the upstream serves on", async () => {
    const { client } = await connectClient(stage.url(ALL), await stage.token(ALL));
    await client.listTools();
    const abort = new AbortController();
    let progressed = 0;
    const call = client.callTool({ name: LONG, arguments: { duration: 30, steps: 30 } }, undefined, { signal: abort.signal, onprogress: () => void progressed++ });
    await waitFor(() => progressed > 0, 10_000, 'first progress');
    abort.abort('enough');
    await expect(call).rejects.toThrow();
    await waitFor(() => posted().some((m) => m.method === 'notifications/cancelled'), 10_000, 'cancelled at the upstream');
    const sent = posted().filter((m) => m.method === 'tools/call' && m.params?.name === 'trigger-long-running-operation').at(-1)!;
    const cancelled = posted().filter((m) => m.method === 'notifications/cancelled');
    expect(cancelled).toHaveLength(1);
    expect(cancelled[0]!.params).toEqual({ requestId: sent.id, reason: 'enough' });
    expect(resultText(await client.callTool({ name: 'everything__echo', arguments: { message: 'still here' } }))).toContain('still here');
    expect((await client.listTools()).tools.some((t) => t.name === LONG)).toBe(true);
    await client.close();
  });
});
