/**
 * 2026-07-28 clients without a session, calling tools of an upstream of a session-based revision
 * through an aggregated route (DESIGN §8.2, §8.4; MCP 2026-07-28 mrtr and streamable-http): the
 * unmodified server-everything behind a recording hop, beside the stateless 2026-07-28 fixture,
 * driven by hand-written 2026-07-28 requests (test/helpers/wire-2026.ts).
 * - Progress: a call whose client takes an event stream is answered as one, the upstream's
 *   `notifications/progress` first (with the client's own token; the upstream was given one of the
 *   gateway's), the answer last; a client that takes JSON only gets the answer alone.
 * - The upstream's request to the client during a call (elicitation, sampling) becomes an
 *   InputRequiredResult, as a server of 2026-07-28 returns one; the client's retry with
 *   `inputResponses` and the `requestState` it was given resumes the call: its answer reaches the
 *   upstream that asked, with that upstream's own id, and the call completes. A state is spent
 *   once, names one request, and is another principal's nothing; a request of a kind the client
 *   did not declare is refused to the upstream, never asked.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStatelessServer, type StatelessServer } from '../helpers/stateless-mcp-server.js';
import { resultText, startStdioStage, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, startRecordingHop, type RecordingHop, type UpstreamHandle } from '../helpers/upstream.js';
import { post2026 } from '../helpers/wire-2026.js';

const ROUTE = '/all/mcp';
const LONG = 'everything__trigger-long-running-operation';
const ELICIT = 'everything__trigger-elicitation-request';
const SAMPLE = 'everything__trigger-sampling-request';
let everything: UpstreamHandle;
let hop: RecordingHop;
let modern: StatelessServer;
let stage: StdioStage;

beforeAll(async () => {
  [everything, modern] = await Promise.all([startEverythingServer(), startStatelessServer({ keepAliveMs: 0 })]);
  hop = await startRecordingHop(everything.url);
  stage = await startStdioStage({ [ROUTE]: { upstreams: { everything: { upstream: hop.url }, modern: { upstream: modern.url } } } });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await Promise.allSettled([hop?.close(), everything?.close(), modern?.close()]);
});

const audience = () => stage.gw.config.routes.find((r) => r.path === ROUTE)!.resource;
const tokenOf = (sub: string) => stage.issuer.token({ audience: audience(), sub });

interface Message {
  id?: unknown;
  method?: string;
  params?: Record<string, unknown>;
  result?: Record<string, unknown> & { inputRequests?: Record<string, { method: string; params: Record<string, unknown> }>; requestState?: string };
  error?: { code: number; message: string };
}

/** The JSON-RPC messages of an event stream's text. */
const framesOf = (text: string): Message[] =>
  text
    .split('\n')
    .filter((line) => line.startsWith('data: '))
    .map((line) => JSON.parse(line.slice(6)) as Message);

/** The JSON-RPC messages the hop saw POSTed to server-everything. */
const posted = (): Message[] => hop.requests.filter((r) => r.method === 'POST' && r.body.length > 0).map((r) => JSON.parse(r.body.toString('utf8')) as Message);

async function call(token: string, name: string, args: Record<string, unknown>, options: { id?: number; meta?: Record<string, unknown>; more?: Record<string, unknown>; capabilities?: Record<string, unknown>; accept?: string } = {}) {
  const res = await post2026(`${stage.gw.url}${ROUTE}`, 'tools/call', { name, arguments: args, ...options.more }, { token, id: options.id, meta: options.meta, capabilities: options.capabilities, headers: options.accept ? { accept: options.accept } : {} });
  const text = await res.text();
  const type = res.headers.get('content-type') ?? '';
  return { status: res.status, type, accel: res.headers.get('x-accel-buffering'), messages: type.includes('text/event-stream') ? framesOf(text) : [JSON.parse(text) as Message] };
}

describe('progress of a session-less call', () => {
  it("reaches a client that takes an event stream, as it comes, with the client's own token, then the answer", async () => {
    const token = await tokenOf('alice');
    const answer = await call(token, LONG, { duration: 0.6, steps: 3 }, { id: 7, meta: { progressToken: 'alice-token' } });
    expect(answer.status).toBe(200);
    expect(answer.type).toContain('text/event-stream');
    expect(answer.accel).toBe('no');
    const progress = answer.messages.filter((m) => m.method === 'notifications/progress');
    expect(progress.map((m) => [m.params!.progressToken, m.params!.progress, m.params!.total])).toEqual([
      ['alice-token', 1, 3],
      ['alice-token', 2, 3],
      ['alice-token', 3, 3],
    ]);
    expect(answer.messages.at(-1)).toMatchObject({ id: 7, result: { resultType: 'complete' } });
    expect(resultText(answer.messages.at(-1)!.result)).toContain('Steps: 3');
    // The upstream was given a token of the gateway's, never the client's.
    const sent = posted().filter((m) => m.method === 'tools/call' && m.params?.name === 'trigger-long-running-operation').at(-1)!;
    expect((sent.params!._meta as Record<string, unknown>).progressToken).toMatch(/^mag-progress-/);
  });

  it("of an upstream of 2026-07-28 too; a client that takes JSON only, or gave no token, gets the answer alone", async () => {
    const token = await tokenOf('alice');
    const modernCall = await call(token, 'modern__test_tool_with_progress', {}, { meta: { progressToken: 42 } });
    expect(modernCall.messages.filter((m) => m.method === 'notifications/progress').map((m) => [m.params!.progressToken, m.params!.progress])).toEqual([
      [42, 0],
      [42, 50],
      [42, 100],
    ]);
    expect(resultText(modernCall.messages.at(-1)!.result)).toBe('progress done');
    for (const options of [{ meta: { progressToken: 'json-only' }, accept: 'application/json' }, {}]) {
      const plain = await call(token, LONG, { duration: 0.2, steps: 2 }, options);
      expect(plain.type).toContain('application/json');
      expect(plain.messages).toHaveLength(1);
      expect(resultText(plain.messages[0]!.result)).toContain('Steps: 2');
    }
  });
});

describe("an upstream's request to the client during a session-less call", () => {
  it('elicitation: an InputRequiredResult; the retry answers the upstream that asked, with its own id, and completes the call', async () => {
    const token = await tokenOf('alice');
    const first = await call(token, ELICIT, {}, { id: 1 });
    expect(first.status).toBe(200);
    const asked = first.messages[0]!.result!;
    expect(asked.resultType).toBe('input_required');
    expect(asked.requestState).toMatch(/^mag\./);
    const [key, request] = Object.entries(asked.inputRequests!)[0]!;
    expect(Object.keys(asked.inputRequests!)).toHaveLength(1);
    expect(key).toMatch(/^mag-/);
    expect(request).toMatchObject({ method: 'elicitation/create', params: { message: expect.stringContaining('Please provide inputs') } });
    const answersBefore = posted().filter((m) => m.method === undefined).length;
    const more = { inputResponses: { [key]: { action: 'accept', content: { name: 'Ada Lovelace', check: true } } }, requestState: asked.requestState };
    const retry = await call(token, ELICIT, {}, { id: 2, more });
    expect(retry.messages.at(-1)).toMatchObject({ id: 2, result: { resultType: 'complete' } });
    expect(JSON.stringify(retry.messages.at(-1)!.result)).toContain('Ada Lovelace');
    // The upstream got the answer once, under the id it gave its own request.
    const answers = posted().filter((m) => m.method === undefined).slice(answersBefore);
    expect(answers).toHaveLength(1);
    expect(typeof answers[0]!.id).toBe('number');
    expect(answers[0]!.result).toEqual({ action: 'accept', content: { name: 'Ada Lovelace', check: true } });
    // The state is spent: a replay names nothing.
    const replay = await call(token, ELICIT, {}, { id: 3, more });
    expect(replay.status).toBe(400);
    expect(replay.messages[0]).toMatchObject({ id: 3, error: { code: -32602 } });
  });

  it('sampling: the same round trip; a client that did not declare sampling is never asked (the upstream is refused)', async () => {
    const token = await tokenOf('alice');
    const first = await call(token, SAMPLE, { prompt: 'capital?', maxTokens: 10 });
    const asked = first.messages[0]!.result!;
    const [key, request] = Object.entries(asked.inputRequests!)[0]!;
    expect(request.method).toBe('sampling/createMessage');
    const sampled = { role: 'assistant', content: { type: 'text', text: 'Paris' }, model: 'test-model', stopReason: 'endTurn' };
    const retry = await call(token, SAMPLE, { prompt: 'capital?', maxTokens: 10 }, { more: { inputResponses: { [key]: sampled }, requestState: asked.requestState } });
    expect(JSON.stringify(retry.messages.at(-1)!.result)).toContain('Paris');
    const refused = await call(token, SAMPLE, { prompt: 'capital?', maxTokens: 10 }, { capabilities: { elicitation: {} } });
    expect(refused.messages[0]!.result?.resultType).toBe('complete');
    expect(refused.messages[0]!.result?.isError).toBe(true);
  });

  it("a state names one request of one principal: another principal's retry, or a retry of another request, is -32602 and the call still awaits its own", async () => {
    const [alice, bob] = await Promise.all([tokenOf('alice'), tokenOf('bob')]);
    const asked = (await call(alice, ELICIT, {})).messages[0]!.result!;
    const [key] = Object.keys(asked.inputRequests!);
    const inputResponses = { [key!]: { action: 'accept', content: { name: 'Grace Hopper', check: true } } };
    const bobs = await call(bob, ELICIT, {}, { more: { inputResponses, requestState: asked.requestState } });
    expect(bobs.status).toBe(400);
    expect(bobs.messages[0]!.error?.code).toBe(-32602);
    const other = await call(alice, SAMPLE, { prompt: 'x' }, { more: { inputResponses, requestState: asked.requestState } });
    expect(other.status).toBe(400);
    const otherArgs = await call(alice, ELICIT, { extra: true }, { more: { inputResponses, requestState: asked.requestState } });
    expect(otherArgs.status).toBe(400);
    const own = await call(alice, ELICIT, {}, { more: { inputResponses, requestState: asked.requestState } });
    expect(JSON.stringify(own.messages.at(-1)!.result)).toContain('Grace Hopper');
  });

  it('a retry that leaves a question unanswered is asked it again; an InputRequiredResult of an upstream of 2026-07-28 still passes as it is', async () => {
    const token = await tokenOf('alice');
    const asked = (await call(token, ELICIT, {})).messages[0]!.result!;
    const again = await call(token, ELICIT, {}, { more: { inputResponses: {}, requestState: asked.requestState } });
    const reasked = again.messages[0]!.result!;
    expect(reasked.resultType).toBe('input_required');
    expect(Object.keys(reasked.inputRequests!)).toEqual(Object.keys(asked.inputRequests!));
    expect(reasked.requestState).not.toBe(asked.requestState);
    const [key] = Object.keys(reasked.inputRequests!);
    const done = await call(token, ELICIT, {}, { more: { inputResponses: { [key!]: { action: 'decline' } }, requestState: reasked.requestState } });
    expect(done.messages.at(-1)!.result?.resultType).toBe('complete');
    const direct = (await call(token, 'modern__test_input_required_result_elicitation', {})).messages[0]!.result!;
    expect(direct).toMatchObject({ resultType: 'input_required', inputRequests: { user_name: { method: 'elicitation/create' } } });
  });
});
