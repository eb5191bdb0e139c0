/**
 * DESIGN §8.2–8.3 against one user of an aggregated route's 2026-07-28 clients (no session):
 * [K80] `subscriptions/listen` streams count in the per-user stream share
 * (`limits.max_get_streams_per_user`) as on a plain route, each holding a listen of the gateway's
 * at the 2026-07-28 upstream, so the upstream listens are bounded too; a listen ends when the token
 * that opened it expires, and its upstream listen with it. [K81] Session-less sessions are one
 * per principal, taken from the user's session slots: one user's many clients make room only from
 * that user's own idle ones, never another user's (bob's stdio process keeps what he wrote).
 * [K80] Calls that asked their client something (an InputRequiredResult awaiting its retry, made of
 * server-everything's elicitation) are bounded per session-less session: beyond, an upstream's
 * question during another call is refused to it and the call completes as refused; another
 * user's calls still ask; a retry gives the room back. Nothing of a round reaches another
 * principal: its state names nothing in another principal's session.
 * Fails when a listen is outside the share or outlives its token, or when the slots are shared,
 * or when rounds are unbounded or shared.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_ASKING_CALLS } from '../../src/proxy/aggregate/input-rounds.js';
import { startStatelessServer, type StatelessServer } from '../helpers/stateless-mcp-server.js';
import { resultText, serverBin, startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startEverythingServer, type UpstreamHandle } from '../helpers/upstream.js';
import { post2026 } from '../helpers/wire-2026.js';

const ROUTE = '/all/mcp';
const SHARE = 4;
/** The route's sessions per user (aggregate-forwarder.ts). */
const SESSIONS_PER_USER = 16;
let modern: StatelessServer;
let everything: UpstreamHandle;
let stage: StdioStage;
const streams = new AbortController();

beforeAll(async () => {
  [modern, everything] = await Promise.all([startStatelessServer({ keepAliveMs: 0 }), startEverythingServer()]);
  const memory = { upstream: { stdio: { command: process.execPath, args: [serverBin('@modelcontextprotocol/server-memory')], env: { MEMORY_FILE_PATH: '${PROCESS_DIR}/memory.jsonl' } } } };
  stage = await startStdioStage({ [ROUTE]: { upstreams: { modern: { upstream: modern.url }, memory, everything: { upstream: everything.url } }, limits: { max_get_streams_per_user: SHARE } } });
}, 60_000);
afterAll(async () => {
  streams.abort();
  await stage?.close();
  await Promise.allSettled([modern?.close(), everything?.close()]);
});

const audience = () => stage.gw.config.routes.find((r) => r.path === ROUTE)!.resource;
const tokenOf = (sub: string, clientId = 'app', ttlSeconds = 600) => stage.issuer.token({ audience: audience(), sub, clientId, ttlSeconds });
const listen = (token: string, id: number) => post2026(stage.url(ROUTE), 'subscriptions/listen', { notifications: { toolsListChanged: true } }, { token, id, signal: streams.signal });
const openAtUpstream = () => modern.listens.filter((l) => l.closedAt === undefined).length;

describe('[K80] session-less listens on an aggregated route count in the per-user stream share', () => {
  it(`[K80] of ${SHARE * 5} listens of one user through several clients, ${SHARE} are held (each with one upstream listen), the rest 429; another user is served`, async () => {
    const before = openAtUpstream();
    const answers: Response[] = [];
    for (let i = 0; i < SHARE * 5; i++) answers.push(await listen(await tokenOf('mallory', `app-${i % 3}`), i));
    expect(answers.filter((r) => r.status === 200).length).toBe(SHARE);
    const refused = answers.filter((r) => r.status === 429);
    expect(refused.length).toBe(SHARE * 4);
    expect(refused.every((r) => Number(r.headers.get('retry-after')) > 0)).toBe(true);
    await Promise.all(refused.map((r) => r.arrayBuffer()));
    await waitFor(() => openAtUpstream() === before + SHARE, 10_000, 'one upstream listen per held listen');
    const bobs = await listen(await tokenOf('bob'), 1);
    expect(bobs.status).toBe(200);
    await bobs.body?.cancel();
  }, 60_000);

  it('[K80] a listen ends when the token that opened it expires, and the upstream listen it held with it', async () => {
    const started = Date.now();
    const res = await listen(await tokenOf('ivan', 'app', 3), 1);
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = '';
    // Read until the gateway ends it (cleanly or by cutting the connection).
    await (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        text += Buffer.from(value).toString('utf8');
      }
    })().catch(() => undefined);
    // Acknowledged (so it was live), and cut no sooner than its token's lifetime allows (a lower bound: load only delays it).
    expect(text).toContain('notifications/subscriptions/acknowledged');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_500);
    const index = modern.listens.length - 1;
    await waitFor(() => modern.listens[index]?.closedAt !== undefined, 10_000, 'the upstream listen closed');
  }, 30_000);
});

describe('[K81] session-less sessions: one per principal, from the user’s own slots', () => {
  it(`[K81] one user's ${SESSIONS_PER_USER + 8} clients are all served, room made from that user's own idle sessions; bob's session and process stay`, async () => {
    const bob = await tokenOf('bob', 'notes');
    const write = await post2026(stage.url(ROUTE), 'tools/call', { name: 'memory__create_entities', arguments: { entities: [{ name: 'bob-note', entityType: 'note', observations: ['kept'] }] } }, { token: bob });
    expect(write.status).toBe(200);
    await write.arrayBuffer();
    for (let i = 0; i < SESSIONS_PER_USER + 8; i++) {
      const res = await post2026(stage.url(ROUTE), 'tools/call', { name: 'memory__read_graph', arguments: {} }, { token: await tokenOf('judy', `client-${i}`) });
      expect(res.status, `client ${i}`).toBe(200);
      await res.arrayBuffer();
    }
    const read = await post2026(stage.url(ROUTE), 'tools/call', { name: 'memory__read_graph', arguments: {} }, { token: bob });
    const body = (await read.json()) as { result: unknown };
    expect(resultText(body.result)).toContain('bob-note');
  }, 120_000);
});

interface RoundAnswer {
  result?: { resultType?: string; isError?: boolean; requestState?: string; inputRequests?: Record<string, unknown>; content?: unknown };
  error?: { code: number };
}

/** server-everything's elicitation tool, without a session: its first round, or a retry with `more`. */
async function elicit(token: string, more: Record<string, unknown> = {}): Promise<{ status: number; body: RoundAnswer }> {
  const res = await post2026(stage.url(ROUTE), 'tools/call', { name: 'everything__trigger-elicitation-request', arguments: {}, ...more }, { token, headers: { accept: 'application/json' } });
  return { status: res.status, body: (await res.json()) as RoundAnswer };
}

const acceptAll = (asked: RoundAnswer['result']) => ({ inputResponses: Object.fromEntries(Object.keys(asked!.inputRequests!).map((k) => [k, { action: 'accept', content: { name: 'Ada', check: true } }])), requestState: asked!.requestState });

describe('[K80] calls awaiting their client’s input are bounded per session-less session', () => {
  it(`[K80] ${MAX_ASKING_CALLS} of one principal's calls hold questions; the next is refused its question (not held), bob's still asks, and a retry gives the room back`, async () => {
    const oscar = await tokenOf('oscar');
    const held: NonNullable<RoundAnswer['result']>[] = [];
    for (let i = 0; i < MAX_ASKING_CALLS; i++) {
      const { body } = await elicit(oscar);
      expect(body.result?.resultType, `call ${i}`).toBe('input_required');
      held.push(body.result!);
    }
    const beyond = await elicit(oscar);
    expect(beyond.body.result).toMatchObject({ resultType: 'complete', isError: true });
    const bobs = await elicit(await tokenOf('bob'));
    expect(bobs.body.result?.resultType).toBe('input_required');
    const done = await elicit(oscar, acceptAll(held.pop()));
    expect(done.body.result?.resultType).toBe('complete');
    expect(JSON.stringify(done.body.result)).toContain('Ada');
    expect((await elicit(oscar)).body.result?.resultType).toBe('input_required');
  }, 60_000);

  it("[K80] a round's state is its principal's alone: another principal's retry with it is -32602, and the owner's retry then completes", async () => {
    const peggy = await tokenOf('peggy');
    const asked = (await elicit(peggy)).body.result!;
    const stolen = await elicit(await tokenOf('mallory', 'other'), acceptAll(asked));
    expect(stolen.status).toBe(400);
    expect(stolen.body.error?.code).toBe(-32602);
    // Even the same user through another client is another principal.
    const otherClient = await elicit(await tokenOf('peggy', 'other-app'), acceptAll(asked));
    expect(otherClient.status).toBe(400);
    const own = await elicit(peggy, acceptAll(asked));
    expect(JSON.stringify(own.body.result)).toContain('Ada');
  }, 30_000);
});
