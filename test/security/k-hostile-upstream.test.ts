/**
 * Review, round 3 — class: a hostile HTTP/SSE upstream (DESIGN.md §8.3: "whatever it or an
 * HTTP/SSE upstream writes or answers, every other user is served and the process stays up").
 * The fixture (test/helpers/hostile-upstream.ts) answers huge (24 MiB JSON, a 24 MiB event line),
 * slow (a byte per 50 ms), malformed (duplicate members, broken SSE framing, NUL in an id field),
 * duplicate answers, answers and notifications for ids never asked, another principal's session
 * id, endless events, wrong content types, a false `Content-Encoding`, resets mid-body and
 * mid-stream, requests never answered, and another principal's task and event ids.
 * While mallory sets it off, carol's requests on another route and on the same route keep getting
 * 200, `/healthz` answers, and the gateway (in this process) stays up. Tasks and event ids an
 * upstream claims for another principal stay the first principal's ([K67], [K68]).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../helpers/gateway.js';
import { MISBEHAVIOURS, startHostileUpstream, type HostileUpstream, type Misbehaviour } from '../helpers/hostile-upstream.js';
import { gatewayYaml, jwtRoute, resourceOf, startRecordingUpstream, startTestIssuer, type RecordingUpstream, type TestIssuer } from '../helpers/security-fixtures.js';

const HOSTILE = '/hostile/mcp';
const CALM = '/calm/mcp';
let issuer: TestIssuer;
let hostile: HostileUpstream;
let calm: RecordingUpstream;
let gw: TestGateway;

beforeAll(async () => {
  [issuer, hostile, calm] = await Promise.all([startTestIssuer('ES256'), startHostileUpstream(), startRecordingUpstream()]);
  gw = await startTestGateway({
    'gateway.yaml': gatewayYaml({ log_level: 'fatal' }),
    'hostile.yaml': jwtRoute(HOSTILE, hostile.url, issuer, { limits: { upstream_timeout: '2s' } }),
    'calm.yaml': jwtRoute(CALM, `${calm.origin}/mcp`, issuer),
  });
}, 60_000);
afterAll(async () => {
  await gw?.stop();
  await issuer?.close();
  await hostile?.close();
  await calm?.close();
});

const tokens = new Map<string, string>();
async function bearer(sub: string, path: string): Promise<string> {
  const key = `${sub} ${path}`;
  if (!tokens.has(key)) tokens.set(key, await issuer.mint({ aud: resourceOf(path), sub, client_id: 'app', scope: 'mcp:read', exp: Math.floor(Date.now() / 1000) + 900 }));
  return `Bearer ${tokens.get(key)!}`;
}

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' };

/**
 * A request whose answer is read for at most `ms` and 2 MiB: what came back, or how it ended. The
 * bound only ends what never would (a hang fails the test): at 3 s, a loaded machine's slow but
 * healthy answers came back as 'error' (carol's 200s, the answer whose event ids K68 resumes).
 */
async function call(sub: string, path: string, method: string, params: Record<string, unknown>, ms = 10_000): Promise<{ status: number | 'error'; text: string }> {
  try {
    const res = await fetch(`${gw.url}${path}`, {
      method: 'POST',
      headers: { ...HEADERS, authorization: await bearer(sub, path) },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
      signal: AbortSignal.timeout(ms),
    });
    let text = '';
    try {
      const reader = res.body!.getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        text += Buffer.from(value).toString('utf8');
        if (text.length > 2 * 1024 * 1024) {
          await reader.cancel();
          break;
        }
      }
    } catch {
      // cut by the gateway, or by our own timeout: the status is what counts
    }
    return { status: res.status, text };
  } catch {
    return { status: 'error', text: '' };
  }
}

const misbehave = (sub: string, kind: Misbehaviour, args: Record<string, unknown> = {}) => call(sub, HOSTILE, 'tools/call', { name: kind, arguments: args }, kind === 'never-answers' ? 15_000 : 10_000);

/** Carol's steady traffic while `during` runs: every status she got. */
async function carolMeanwhile(during: () => Promise<unknown>): Promise<(number | 'error')[]> {
  const statuses: (number | 'error')[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      statuses.push((await call('carol', CALM, 'ping', {})).status);
      statuses.push((await call('carol', HOSTILE, 'ping', {})).status);
    }
  })();
  try {
    await during();
  } finally {
    running = false;
    await loop;
  }
  return statuses;
}

describe('a hostile HTTP/SSE upstream stops neither the gateway nor another principal', () => {
  it('every misbehaviour at once, three times over: carol gets 200 throughout, /healthz answers after', async () => {
    const outcomes = new Map<Misbehaviour, (number | 'error')[]>();
    const statuses = await carolMeanwhile(() =>
      Promise.all(
        MISBEHAVIOURS.flatMap((kind) =>
          [1, 2, 3].map(async () => {
            const { status } = await misbehave('mallory', kind, { taskId: 'mallory-task', eventId: 'mallory-event', sessionId: 'not-mallorys' });
            outcomes.set(kind, [...(outcomes.get(kind) ?? []), status]);
          }),
        ),
      ),
    );
    expect(statuses.length).toBeGreaterThan(4);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect((await fetch(`${gw.url}/healthz`)).status).toBe(200);
    // Each misbehaviour ends in an answer or a cut, never a hang past the client's bound.
    expect([...outcomes.keys()].sort()).toEqual([...MISBEHAVIOURS].sort());
    // A hanging upstream gets the route's upstream_timeout (2 s), under the client's bound.
    expect(outcomes.get('never-answers')).toEqual([504, 504, 504]);
  }, 60_000);

  it("an answer handing mallory alice's session id is refused (502), and the session stays hers", async () => {
    const sessionId = `alice-session-${Date.now()}`;
    expect((await misbehave('alice', 'foreign-session', { sessionId })).status).toBe(200);
    expect((await misbehave('mallory', 'foreign-session', { sessionId })).status).toBe(502);
    expect((await misbehave('alice', 'foreign-session', { sessionId })).status).toBe(200);
  });

  it('property: any sequence of misbehaviours leaves carol a 200 after each', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(fc.constantFrom(...MISBEHAVIOURS.filter((m) => m !== 'never-answers' && m !== 'slow-drip')), { minLength: 1, maxLength: 4 }), async (kinds) => {
        for (const kind of kinds) {
          await misbehave('mallory', kind, { taskId: 'mallory-task', eventId: 'mallory-event' });
          expect((await call('carol', CALM, 'ping', {})).status).toBe(200);
          expect((await call('carol', HOSTILE, 'ping', {})).status).toBe(200);
        }
      }),
      { numRuns: 8 },
    );
  }, 60_000);
});

describe('[K67] an upstream claiming one principal\'s task for another does not move it', () => {
  it.each(['foreign-task', 'foreign-task-flat'] as const)('%s: the task stays alice\'s; bob neither lists it nor gets it forwarded by its id', async (kind) => {
    const taskId = `alice-${kind}-${Date.now()}`;
    expect((await misbehave('alice', kind, { taskId })).status).toBe(200);
    // The upstream hands the same id to bob: the record (SET NX) stays alice's.
    expect((await misbehave('bob', kind, { taskId })).status).toBe(200);
    const bobList = await call('bob', HOSTILE, 'tasks/list', {});
    expect(bobList.text).not.toContain(taskId);
    expect((await call('alice', HOSTILE, 'tasks/list', {})).text).toContain(taskId);
    const asked = hostile.askedTaskIds.length;
    await call('bob', HOSTILE, 'tasks/get', { taskId });
    expect(hostile.askedTaskIds.length).toBe(asked + 1);
    expect(hostile.askedTaskIds.at(-1)).not.toBe(taskId);
    await call('alice', HOSTILE, 'tasks/get', { taskId });
    expect(hostile.askedTaskIds.at(-1)).toBe(taskId);
  });

  it("a task-status notification for alice's task on bob's stream is not shown to him and does not make it his", async () => {
    const taskId = `alice-notified-${Date.now()}`;
    await misbehave('alice', 'foreign-task', { taskId });
    const onBobs = await misbehave('bob', 'unasked-ids', { taskId });
    expect(onBobs.status).toBe(200);
    expect(onBobs.text).toContain('for nobody');
    expect(onBobs.text).not.toContain(`"taskId":"${taskId}"`);
    await call('bob', HOSTILE, 'tasks/get', { taskId });
    expect(hostile.askedTaskIds.at(-1)).not.toBe(taskId);
  });
});

describe('[K68] an upstream copying one principal\'s event id to another does not let him resume it', () => {
  it("alice's event id sent again on bob's stream: his Last-Event-ID with it is refused, hers reaches the upstream", async () => {
    const eventId = `alice-event-${Date.now()}`;
    await misbehave('alice', 'foreign-event-ids', { eventId });
    await misbehave('bob', 'foreign-event-ids', { eventId });
    const resume = async (sub: string) => {
      const res = await fetch(`${gw.url}${HOSTILE}`, {
        headers: { authorization: await bearer(sub, HOSTILE), accept: 'text/event-stream', 'mcp-protocol-version': '2025-11-25', 'last-event-id': eventId },
        // Only a bound on the answer's headers (the stream is cancelled once they came): a loaded
        // machine may take over a second to answer, which a 1 s bound turned into an AbortError.
        signal: AbortSignal.timeout(15_000),
      });
      await res.body?.cancel().catch(() => undefined);
      return res.status;
    };
    const before = hostile.resumedFrom.length;
    expect(await resume('bob')).toBe(400);
    expect(hostile.resumedFrom.length).toBe(before);
    expect(await resume('alice')).toBe(200);
    expect(hostile.resumedFrom.at(-1)).toBe(eventId);
  });
});
