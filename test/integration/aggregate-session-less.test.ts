/**
 * 2026-07-28 clients of an aggregated route without a session (DESIGN §8.2, issue 22 item 2):
 * the stateless 2026-07-28 fixture (test/helpers/stateless-mcp-server.ts) beside a TS SDK server
 * whose tools grow (session-based, list_changed on its session's GET stream) and server-memory over
 * stdio (a process per client session), all behind one route, driven by hand-written 2026-07-28
 * requests (test/helpers/wire-2026.ts). Requests without `Mcp-Session-Id` get merged lists and
 * routed calls, each principal served by upstream sessions of its own, reused across its requests
 * (the memory process keeps what it was told) and never another's; an `InputRequiredResult` and
 * its retry pass as when the fixture is reached directly; `subscriptions/listen` is acknowledged
 * and carries the list changes of every upstream (the fixture's on a listen of the gateway's own,
 * the TS server's from its GET stream) and the updates of watched URIs, stamped with the client's
 * listen id, and closing it closes the upstream listen. A session-based client's GET stream gets
 * the fixture's list changes too.
 */
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGrowingServer } from '../helpers/growing-mcp-server.js';
import { startStatelessServer, type StatelessServer } from '../helpers/stateless-mcp-server.js';
import { connectClient, resultText, serverBin, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { post2026 } from '../helpers/wire-2026.js';

const ROUTE = '/all/mcp';
/** The same upstreams, with reads of what `modern` serves denied by a rule naming that upstream. */
const RULED = '/ruled/mcp';
let modern: StatelessServer;
let growing: Awaited<ReturnType<typeof startGrowingServer>>;
let stage: StdioStage;
const streams = new AbortController();

beforeAll(async () => {
  [modern, growing] = await Promise.all([startStatelessServer({ keepAliveMs: 0 }), startGrowingServer()]);
  const memory = { upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } };
  const upstreams = { modern: { upstream: modern.url }, growing: { upstream: growing.url }, memory };
  stage = await startStdioStage({ [ROUTE]: { upstreams }, [RULED]: { upstreams, rules: [{ match: { upstream: 'modern', method: 'resources/read' }, deny: true }] } });
}, 60_000);
afterAll(async () => {
  streams.abort();
  await stage?.close();
  await Promise.allSettled([modern?.close(), growing?.close()]);
});

const url = () => stage.url(ROUTE);
const audience = () => stage.gw.config.routes.find((r) => r.path === ROUTE)!.resource;
const tokenOf = (sub: string, clientId = 'app') => stage.issuer.token({ audience: audience(), sub, clientId });

interface Answer {
  status: number;
  session: string | null;
  body: { id?: unknown; result?: Record<string, unknown>; error?: { code: number; message: string; data?: unknown } };
}

async function ask(token: string, method: string, params: Record<string, unknown> = {}, id: number | string = 1): Promise<Answer> {
  const res = await post2026(url(), method, params, { token, id });
  const text = await res.text();
  return { status: res.status, session: res.headers.get('mcp-session-id'), body: JSON.parse(text) as Answer['body'] };
}

const call = (token: string, name: string, args: Record<string, unknown> = {}, more: Record<string, unknown> = {}) => ask(token, 'tools/call', { name, arguments: args, ...more });
const entity = (name: string) => ({ entities: [{ name, entityType: 'note', observations: ['seen'] }] });
const entitiesOf = async (token: string): Promise<string[]> => {
  const answer = await call(token, 'memory__read_graph');
  const graph = JSON.parse(resultText(answer.body.result)) as { entities: { name: string }[] };
  return graph.entities.map((e) => e.name).sort();
};

describe('2026-07-28 requests without a session on an aggregated route', () => {
  it('get the merged lists a session-based client gets, without a session id, marked private, not to be kept, and complete', async () => {
    const token = await tokenOf('alice');
    const answer = await ask(token, 'tools/list');
    expect(answer.status).toBe(200);
    expect(answer.session).toBeNull();
    expect(answer.body.result).toMatchObject({ cacheScope: 'private', ttlMs: 0, resultType: 'complete' });
    const names = (answer.body.result!.tools as { name: string }[]).map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(['modern__echo', 'modern__test_trigger_tool_change', 'growing__grow', 'memory__read_graph']));
    const { client } = await connectClient(url(), token);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(names);
    await client.close();
    const resources = await ask(token, 'resources/list');
    expect((resources.body.result!.resources as { uri: string }[]).map((r) => r.uri)).toEqual(expect.arrayContaining(['file:///public/readme.txt']));
    const read = await ask(token, 'resources/read', { uri: 'file:///public/readme.txt' });
    expect(read.body.result).toMatchObject({ resultType: 'complete', contents: [{ uri: 'file:///public/readme.txt', text: 'public readme' }] });
    // 2026-07-28 makes a read cacheable: the fixture's own hints pass, a session-based server's read (none) says private, not kept.
    expect(read.body.result).toMatchObject({ cacheScope: expect.any(String), ttlMs: expect.any(Number) });
  });

  it("route calls by shown name, each principal's upstream sessions its own and reused: one memory process per principal, none shared", async () => {
    const [alice, bob] = await Promise.all([tokenOf('alice', 'notes'), tokenOf('bob', 'notes')]);
    expect(resultText((await call(alice, 'modern__echo')).body.result)).toBe('echo');
    expect((await call(alice, 'memory__create_entities', entity('alice-1'))).status).toBe(200);
    expect((await call(alice, 'memory__create_entities', entity('alice-2'))).status).toBe(200);
    expect((await call(bob, 'memory__create_entities', entity('bob-1'))).status).toBe(200);
    expect(await entitiesOf(alice)).toEqual(['alice-1', 'alice-2']);
    expect(await entitiesOf(bob)).toEqual(['bob-1']);
    // Another client of alice's is another principal: a session-less session of its own.
    expect(await entitiesOf(await tokenOf('alice', 'other-app'))).toEqual([]);
  });

  it("property: however two principals' requests interleave, each sees exactly its own writes", async () => {
    let round = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom('carol', 'dave'), { minLength: 1, maxLength: 6 }), async (order) => {
        round++;
        const tokens = { carol: await tokenOf('carol', `prop-${round}`), dave: await tokenOf('dave', `prop-${round}`) };
        const written = { carol: [] as string[], dave: [] as string[] };
        for (const [i, who] of order.entries()) written[who].push(`${who}-${round}-${i}`);
        // The two principals at once (their first requests make their sessions concurrently); each one's
        // writes in turn, as server-memory itself loses a write made while another is being saved.
        await Promise.all(
          (['carol', 'dave'] as const).map(async (who) => {
            for (const name of written[who]) expect((await call(tokens[who], 'memory__create_entities', entity(name))).status).toBe(200);
          }),
        );
        expect(await entitiesOf(tokens.carol)).toEqual(written.carol.sort());
        expect(await entitiesOf(tokens.dave)).toEqual(written.dave.sort());
      }),
      { numRuns: 6 },
    );
  }, 120_000);

  it('refuse what 2026-07-28 refuses: _meta without the revision or capabilities (400, -32602), a method nobody serves (404, -32601)', async () => {
    const token = await tokenOf('alice');
    const res = await fetch(url(), {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/list' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/list', params: {} }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ id: 3, error: { code: -32602 } });
    const unknown = await ask(token, 'nothing/here');
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ error: { code: -32601 } });
    // A client of an older revision without a session is still told to initialize.
    const old = await fetch(url(), { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' }, body: JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/list' }) });
    expect(old.status).toBe(400);
    await old.arrayBuffer();
  });

  it('pass an InputRequiredResult as the upstream answers it directly, and route its retries (requestState kept, a tampered one refused by the upstream itself)', async () => {
    const token = await tokenOf('alice');
    const tool = 'test_input_required_result_request_state';
    const direct = (await (await post2026(modern.url, 'tools/call', { name: tool, arguments: {} })).json()) as Answer['body'];
    const first = await call(token, `modern__${tool}`);
    expect(first.status).toBe(200);
    expect(first.body.result).toMatchObject({ resultType: 'input_required', inputRequests: direct.result!.inputRequests });
    const state = first.body.result!.requestState as string;
    const answered = { inputResponses: { confirm: { action: 'accept', content: { name: 'Ada' } } } };
    const retry = await call(token, `modern__${tool}`, {}, { ...answered, requestState: state });
    expect(resultText(retry.body.result)).toBe('state round-tripped');
    const tampered = await call(token, `modern__${tool}`, {}, { ...answered, requestState: `${state.slice(0, -2)}xx` });
    expect(tampered.body.error).toMatchObject({ code: -32602, message: expect.stringContaining('requestState is not one this server issued') });
  });
});

/** Opens a listen on the route and reads it up to its acknowledgement. */
async function openListen(token: string, id: string | number, notifications: Record<string, unknown>): Promise<{ res: Response; reader: ReadableStreamDefaultReader<Uint8Array>; text: () => string; until(check: (text: string) => boolean): Promise<void>; close(): void }> {
  const aborted = new AbortController();
  streams.signal.addEventListener('abort', () => aborted.abort());
  const res = await post2026(url(), 'subscriptions/listen', { notifications }, { token, id, signal: aborted.signal });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toContain('text/event-stream');
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let seen = '';
  const until = async (check: (text: string) => boolean) => {
    while (!check(seen)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the listen ended before the condition held:\n${seen}`);
      seen += decoder.decode(value, { stream: true });
    }
  };
  await until((t) => t.includes('notifications/subscriptions/acknowledged'));
  return { res, reader, text: () => seen, until, close: () => aborted.abort() };
}

/** The JSON-RPC messages of an event stream's text. */
const framesOf = (text: string) =>
  text
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)) as { method: string; params: Record<string, unknown> & { _meta: Record<string, unknown> } });

describe('subscriptions/listen on an aggregated route', () => {
  it("is acknowledged with what is honoured, then carries every upstream's list changes and watched updates, stamped with the client's listen id", async () => {
    const token = await tokenOf('erin');
    const opened = modern.listens.length;
    const listen = await openListen(token, 'L-1', { toolsListChanged: true, promptsListChanged: true, resourceSubscriptions: ['file:///public/readme.txt', 'file:///nowhere'] });
    const [ack] = framesOf(listen.text());
    expect(ack).toMatchObject({ method: 'notifications/subscriptions/acknowledged', params: { notifications: { toolsListChanged: true, promptsListChanged: true, resourceSubscriptions: ['file:///public/readme.txt'] }, _meta: { 'io.modelcontextprotocol/subscriptionId': 'L-1' } } });
    // The fixture got a listen of the gateway's own, asking for the watched URI it serves.
    expect(modern.listens.length).toBe(opened + 1);
    expect(modern.listens.at(-1)!.resourceSubscriptions).toEqual(['file:///public/readme.txt']);
    const count = (method: string) => framesOf(listen.text()).filter((f) => f.method === method).length;
    await call(token, 'modern__test_trigger_tool_change');
    await listen.until(() => count('notifications/tools/list_changed') === 1);
    await call(token, 'growing__grow');
    await listen.until(() => count('notifications/tools/list_changed') === 2);
    await call(token, 'modern__test_trigger_prompt_change');
    await listen.until(() => count('notifications/prompts/list_changed') === 1);
    await call(token, 'modern__test_trigger_resource_update', { uri: 'file:///public/readme.txt' });
    await listen.until(() => count('notifications/resources/updated') === 1);
    for (const frame of framesOf(listen.text())) expect(frame.params._meta).toEqual({ 'io.modelcontextprotocol/subscriptionId': 'L-1' });
    expect(framesOf(listen.text()).find((f) => f.method === 'notifications/resources/updated')!.params.uri).toBe('file:///public/readme.txt');
    // The new tool is in the next merged list.
    const names = ((await ask(token, 'tools/list')).body.result!.tools as { name: string }[]).map((t) => t.name);
    expect(names).toContain('growing__grown_1');
    listen.close();
    await waitFor(() => modern.listens.at(-1)!.closedAt !== undefined, 10_000, "the upstream listen closed with the client's");
  });

  it("passes only what the filter asked for, and one principal's upstream session changes reach that principal's listens only", async () => {
    const [frank, grace] = await Promise.all([tokenOf('frank'), tokenOf('grace')]);
    const promptsOnly = await openListen(frank, 7, { promptsListChanged: true });
    const graces = await openListen(grace, 8, { toolsListChanged: true });
    const franks = await openListen(frank, 9, { toolsListChanged: true });
    await call(frank, 'growing__grow'); // frank's own session at the growing server
    await franks.until((t) => t.includes('notifications/tools/list_changed'));
    await call(frank, 'modern__test_trigger_tool_change'); // the fixture tells every listener: grace's too
    await graces.until((t) => t.includes('notifications/tools/list_changed'));
    await franks.until((t) => framesOf(t).filter((f) => f.method === 'notifications/tools/list_changed').length === 2);
    expect(framesOf(graces.text()).filter((f) => f.method === 'notifications/tools/list_changed').length).toBe(1);
    expect(framesOf(promptsOnly.text()).map((f) => f.method)).toEqual(['notifications/subscriptions/acknowledged']);
    for (const l of [promptsOnly, graces, franks]) l.close();
  });

  it("reaches a session-based client's GET stream too: the fixture's list changes come on a listen the gateway holds while the stream is open", async () => {
    const token = await tokenOf('heidi');
    const opened = modern.listens.length;
    const { client } = await connectClient(url(), token);
    let told = 0;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => void told++);
    await client.listTools();
    await waitFor(() => modern.listens.length > opened, 10_000, 'the listen the GET stream opened at the fixture');
    await client.callTool({ name: 'modern__test_trigger_tool_change', arguments: {} });
    await waitFor(() => told >= 1, 10_000, 'list_changed on the GET stream');
    await client.close();
    await waitFor(() => modern.listens.slice(opened).every((l) => l.closedAt !== undefined), 10_000, 'the upstream listen closed with the session');
  });
});

describe('rules naming an upstream, for requests without a session', () => {
  it("judge a read and a listen's watched URIs where the principal's session-less session serves them: denied at that upstream, nothing sent", async () => {
    const token = await stage.issuer.token({ audience: stage.gw.config.routes.find((r) => r.path === RULED)!.resource, sub: 'mallory' });
    const listensBefore = modern.listens.length;
    const read = await post2026(stage.url(RULED), 'resources/read', { uri: 'file:///secret/key.txt' }, { token });
    expect(read.status).toBe(403);
    expect(await read.text()).toContain('denied by policy');
    const watching = await post2026(stage.url(RULED), 'subscriptions/listen', { notifications: { toolsListChanged: true, resourceSubscriptions: ['file:///secret/key.txt'] } }, { token, signal: streams.signal });
    expect(watching.status).toBe(403);
    await watching.arrayBuffer();
    expect(modern.listens.length).toBe(listensBefore);
    // What the rule does not name is served: tools, and a listen watching nothing of that upstream's.
    const tools = await post2026(stage.url(RULED), 'tools/list', {}, { token });
    expect(tools.status).toBe(200);
    await tools.arrayBuffer();
    const listening = await post2026(stage.url(RULED), 'subscriptions/listen', { notifications: { toolsListChanged: true } }, { token, signal: streams.signal });
    expect(listening.status).toBe(200);
    await listening.body?.cancel();
  });
});
