/**
 * A hostile legacy HTTP+SSE upstream (DESIGN.md §8.3, "no child and no upstream can stop the
 * gateway"; the fixture is test/security/fixtures/hostile-sse-server.ts): floods of events that
 * are not JSON and answers for ids never asked, an event of 8 MB, half events, a second
 * `endpoint` naming another origin, CR line ends, duplicate answers, an answer trickled a byte at a
 * time, and no answer at all. Alice's call gets one answer or a JSON error (never another id's; a
 * flood relayed faster than she reads may cut her stream), the gateway stays up, and bob — on the same upstream, his own session — keeps getting
 * 200, as does /healthz. Session-less (2026-07-28) requests, whose ids the gateway renames upstream:
 * an answer to an id of another user's request, or to one never given, is dropped and logged.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { post2026 } from '../helpers/wire-2026.js';
import { startHostileSseServer, type HostileSseServer } from '../security/fixtures/hostile-sse-server.js';

const PATH = '/hostile-sse/mcp';
let upstream: HostileSseServer;
let stage: StdioStage;

beforeAll(async () => {
  upstream = await startHostileSseServer();
  stage = await startStdioStage({ [PATH]: { upstream: { sse: upstream.url }, limits: { upstream_timeout: '3s', max_body_bytes: 1_048_576 } } });
}, 60_000);
afterAll(async () => {
  await stage?.close();
  await upstream?.close();
});

const INITIALIZE = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } };

async function post(sub: string, body: unknown, sessionId?: string): Promise<Response> {
  return fetch(stage.url(PATH), {
    method: 'POST',
    headers: {
      authorization: `Bearer ${await stage.token(PATH, sub)}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(sessionId && { 'mcp-session-id': sessionId }),
    },
    body: JSON.stringify(body),
  });
}

async function session(sub: string): Promise<string> {
  const res = await post(sub, INITIALIZE);
  expect(res.status).toBe(200);
  await res.text();
  return res.headers.get('mcp-session-id')!;
}

/** The JSON-RPC messages of an answer, JSON or event stream. */
function messages(text: string): Array<{ id?: unknown; result?: unknown; error?: unknown }> {
  if (text.trimStart().startsWith('{')) return [JSON.parse(text) as { id?: unknown }];
  return text
    .split(/\n\n/)
    .flatMap((block) => block.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()))
    .filter((data) => data.startsWith('{'))
    .map((data) => JSON.parse(data) as { id?: unknown });
}

async function bobServed(): Promise<void> {
  const id = await session('bob');
  const res = await post('bob', { jsonrpc: '2.0', id: 2, method: 'ping' }, id);
  expect(res.status).toBe(200);
  expect(messages(await res.text())).toEqual([expect.objectContaining({ id: 2, result: { echo: 'ping' } })]);
  expect((await fetch(stage.url('/healthz'))).status).toBe(200);
}

describe('a hostile legacy SSE upstream never stops the gateway nor reaches another session', () => {
  it.each(['flood', 'huge', 'malformed', 'duplicate', 'slow', 'silent', 'deep'])('%s: alice gets one answer for her id or a JSON error; bob keeps getting 200', async (misdeed) => {
    const id = await session('alice');
    const [res] = await Promise.all([post('alice', { jsonrpc: '2.0', id: 77, method: 'tools/call', params: { name: misdeed, arguments: {} } }, id), bobServed()]);
    expect([200, 502, 504]).toContain(res.status);
    // A client that does not keep up with a flood relayed on its event stream is cut (it may not make
    // the gateway hold more than max_body_bytes for it): an allowed end, as long as nothing crossed.
    const text = await res.text().catch((err: Error) => (misdeed === 'flood' ? undefined : Promise.reject(err)));
    if (text === undefined) return void (await bobServed());
    if (res.status === 200) {
      // Only her own id, once: nothing for ids never asked, no duplicate.
      const got = messages(text);
      expect(got.filter((m) => 'result' in m || 'error' in m).map((m) => m.id)).toEqual([77]);
    } else {
      expect(JSON.parse(text)).toHaveProperty('error');
    }
    await bobServed();
  }, 30_000);
});

describe('session-less (2026-07-28) requests: an answer for an id the session never gave the upstream is dropped', () => {
  it("an answer to another user's request, or to an id never given, reaches nobody; each gets its own answer or an error", async () => {
    const url = stage.url(PATH);
    const call = async (sub: string, name: string) => post2026(url, 'tools/call', { name, arguments: {} }, { token: await stage.token(PATH, sub), id: 77 });
    // Bob waits on a request the upstream never answers; then alice's has the upstream answer bob's
    // upstream id on her stream, hers on bob's, and ids it was never given; both sent id 77.
    const silent = upstream.called('silent');
    const bob = call('bob', 'silent');
    await waitFor(() => upstream.called('silent') > silent, 10_000, "bob's request upstream");
    const dropped = () => stage.gw.logs.join('').split('upstream answered no waiting request; dropped').length;
    const before = dropped();
    const alice = await call('alice', 'crossed');
    expect(alice.status).toBe(200);
    const got = messages(await alice.text());
    expect(got).toEqual([expect.objectContaining({ id: 77, result: { content: [{ type: 'text', text: 'called crossed' }] } })]);
    // Bob's request is never answered by what was meant for another: it times out (3 s) as unanswered.
    const bobs = await bob;
    expect(bobs.status).toBe(504);
    expect(JSON.parse(await bobs.text())).toHaveProperty('error');
    await waitFor(() => dropped() > before + 5, 10_000, 'the dropped answers logged');
  }, 30_000);
});
