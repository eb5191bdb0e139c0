/**
 * Resuming an aggregated route's event streams (issue 22, DESIGN §8.2–8.3, MCP Streamable HTTP
 * resumability), with the unmodified server-everything behind the route:
 * - the TS SDK client, whose connection drops after the first progress event of a long call,
 *   reconnects by itself with `Last-Event-ID` and gets the rest of that call's stream: every
 *   progress step once, in order, and the answer;
 * - on the wire: a long call's first event (with its id) arrives while the call runs; a GET with
 *   that id replays what came after it, then the answer, then the end; another principal's
 *   Last-Event-ID is refused (400, JSON) on its own session, as are the same principal's id on
 *   another of its sessions and a made-up id; nothing of alice's stream reaches bob.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sseData, type RpcMessage } from '../helpers/post-answer.js';
import { resultText, startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';

const ALL = '/all/mcp';
const LONG = 'everything__trigger-long-running-operation';
const EVENT_ID = /^[A-Za-z0-9_-]{22}\.\d+$/;
let everything: UpstreamHandle;
let stage: StdioStage;

beforeAll(async () => {
  everything = await startEverythingServer();
  stage = await startStdioStage({ [ALL]: { upstreams: { everything: { upstream: everything.url } } } });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await everything?.close();
});

/** A body that passes its first event on, then, once `lost` resolves (the client has read it), fails as a dropped connection does. */
function droppedAfterFirstEvent(body: ReadableStream<Uint8Array>, lost: Promise<void>): ReadableStream<Uint8Array> {
  const reader = body.getReader();
  let text = '';
  let passed = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      if (passed) {
        await lost;
        await reader.cancel();
        return controller.error(new TypeError('terminated: connection lost'));
      }
      const { value, done } = await reader.read();
      if (done) return controller.close();
      text += Buffer.from(value).toString('utf8');
      const end = text.indexOf('\n\n');
      if (end < 0) return;
      passed = true;
      controller.enqueue(new TextEncoder().encode(text.slice(0, end + 2)));
    },
  });
}

describe('the TS SDK client resumes a call whose stream it lost', () => {
  it('the connection drops after the first progress: the SDK resumes with Last-Event-ID and gets every later step once, then the answer', async () => {
    let firstProgress!: () => void;
    const lost = new Promise<void>((resolve) => (firstProgress = resolve));
    const resumedFrom: string[] = [];
    let dropped = 0;
    const lossy = async (url: string | URL, init?: RequestInit): Promise<Response> => {
      const method = init?.method ?? 'GET';
      const lastEventId = new Headers(init?.headers).get('last-event-id');
      if (method === 'GET' && lastEventId !== null) resumedFrom.push(lastEventId);
      const res = await fetch(url, init);
      const isLongCall = method === 'POST' && typeof init?.body === 'string' && init.body.includes(LONG);
      if (!isLongCall || dropped > 0 || !(res.headers.get('content-type') ?? '').includes('text/event-stream')) return res;
      dropped++;
      return new Response(droppedAfterFirstEvent(res.body!, lost), { status: res.status, headers: res.headers });
    };
    const transport = new StreamableHTTPClientTransport(new URL(stage.url(ALL)), {
      requestInit: { headers: { authorization: `Bearer ${await stage.token(ALL)}` } },
      fetch: lossy,
      reconnectionOptions: { initialReconnectionDelay: 300, maxReconnectionDelay: 2_000, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 },
    });
    const client = new Client({ name: 'resumer', version: '1' });
    await client.connect(transport);
    await client.listTools();
    const steps: number[] = [];
    const result = await client.callTool({ name: LONG, arguments: { duration: 3, steps: 6 } }, undefined, {
      onprogress: (p) => {
        steps.push(p.progress);
        firstProgress();
      },
    });
    expect(dropped).toBe(1);
    expect(resumedFrom).toHaveLength(1);
    expect(resumedFrom[0]).toMatch(EVENT_ID);
    expect(resultText(result)).toContain('Steps: 6.');
    expect(steps).toEqual([1, 2, 3, 4, 5, 6]);
    await transport.terminateSession();
    await client.close();
  }, 30_000);
});

/** Events read from a streamed body as they come. */
async function* eventsOf(res: Response): AsyncGenerator<{ id?: string; message: RpcMessage }> {
  let text = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body!) {
    text += decoder.decode(chunk, { stream: true }).replaceAll('\r\n', '\n');
    for (let cut = text.indexOf('\n\n'); cut >= 0; cut = text.indexOf('\n\n')) {
      const raw = text.slice(0, cut + 2);
      text = text.slice(cut + 2);
      const id = raw.split('\n').find((l) => l.startsWith('id: '))?.slice(4);
      for (const data of sseData(raw).data) yield { ...(id !== undefined && { id }), message: JSON.parse(data) as RpcMessage };
    }
  }
}

/** A raw session of `sub` on the route, initialized. */
async function rawSession(sub: string) {
  const headers = { authorization: `Bearer ${await stage.token(ALL, sub)}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };
  const init = await fetch(stage.url(ALL), { method: 'POST', headers, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: sub, version: '1' } } }) });
  expect(init.status).toBe(200);
  await init.body?.cancel();
  const session = { ...headers, 'mcp-session-id': init.headers.get('mcp-session-id')! };
  const post = (body: unknown) => fetch(stage.url(ALL), { method: 'POST', headers: session, body: JSON.stringify(body) });
  expect((await post({ jsonrpc: '2.0', method: 'notifications/initialized' })).status).toBe(202);
  const resume = (lastEventId: string) => fetch(stage.url(ALL), { method: 'GET', headers: { ...session, accept: 'text/event-stream', 'last-event-id': lastEventId } });
  return { post, resume, end: () => fetch(stage.url(ALL), { method: 'DELETE', headers: session }) };
}

describe('resuming on the wire, and only by its principal', () => {
  it("the first event of a long call comes while it runs; a resume from its id gets the rest; another principal's id, another session's, a made-up one: 400", async () => {
    const [alice, alice2, bob] = [await rawSession('alice'), await rawSession('alice'), await rawSession('bob')];
    const call = await alice.post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: LONG, arguments: { duration: 2, steps: 4 }, _meta: { progressToken: 'a2' } } });
    expect(call.headers.get('content-type')).toBe('text/event-stream');
    const events = eventsOf(call);
    const first = (await events.next()).value!;
    // The call runs on: its first progress is here, its answer is not.
    expect(first.message).toMatchObject({ method: 'notifications/progress', params: { progressToken: 'a2', progress: 1 } });
    expect(first.id).toMatch(EVENT_ID);
    await events.return(undefined); // alice's connection is lost

    for (const [who, res] of [['bob', await bob.resume(first.id!)], ['alice on another session', await alice2.resume(first.id!)], ['a made-up id', await alice.resume(`${'A'.repeat(22)}.1`)]] as const) {
      expect(res.status, who).toBe(400);
      expect(res.headers.get('content-type'), who).toContain('application/json');
      expect(((await res.json()) as { error: string }).error, who).toBe('invalid_request');
    }

    const resumed = await alice.resume(first.id!);
    expect(resumed.status).toBe(200);
    expect(resumed.headers.get('content-type')).toBe('text/event-stream');
    const rest: { id?: string; message: RpcMessage }[] = [];
    for await (const e of eventsOf(resumed)) rest.push(e);
    expect(rest.map((e) => e.message.params?.progress ?? e.message.id)).toEqual([2, 3, 4, 2]);
    expect(JSON.stringify(rest.at(-1)!.message.result)).toContain('Steps: 4.');
    for (const e of rest) expect(e.id).toMatch(EVENT_ID);
    expect(new Set(rest.map((e) => e.id!.split('.')[0]))).toEqual(new Set([first.id!.split('.')[0]]));
    for (const s of [alice, alice2, bob]) expect((await s.end()).status).toBe(200);
  }, 30_000);
});
