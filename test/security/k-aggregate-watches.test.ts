/**
 * DESIGN §8.2–8.4 against the watches of 2026-07-28 listens without a session (listen-watches.ts),
 * with a hostile session-based upstream (subscribing-upstream.ts) in front of the principal's
 * upstream session:
 * [K80] an upstream slow to answer the `resources/unsubscribe` of a listen that ended must not
 * drop the watch of the principal's next listen of the same URI (its subscribe answered first);
 * [K80] an upstream that refuses every `resources/unsubscribe` must not keep the principal's
 * session's subscriptions counted after its listens ended, so its later listens are still
 * honoured.
 * Fails when an unsubscribe answered late removes a newer listen's subscription, or when refused
 * unsubscribes fill the session's subscriptions for good.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_SUBSCRIPTIONS } from '../../src/proxy/aggregate/session-interests.js';
import { startStdioStage, waitFor, type StdioStage } from '../helpers/stdio-stage.js';
import { startSubscribingUpstream, type SubscribingUpstream } from '../helpers/subscribing-upstream.js';
import { post2026 } from '../helpers/wire-2026.js';

const ROUTE = '/watched/mcp';
const DOC = 'hostile://doc';
/** One more than the session may hold subscribed: enough to see the bound filled by refusals. */
const MANY = Array.from({ length: MAX_SUBSCRIPTIONS + 1 }, (_, i) => `hostile://many/${i}`);
let upstream: SubscribingUpstream;
let stage: StdioStage;
const streams = new AbortController();

beforeAll(async () => {
  upstream = await startSubscribingUpstream([DOC, ...MANY]);
  stage = await startStdioStage({ [ROUTE]: { upstreams: { hostile: { upstream: upstream.url } } } });
}, 60_000);
afterAll(async () => {
  streams.abort();
  await stage?.close();
  await upstream?.close();
});

const tokenOf = (sub: string) => stage.issuer.token({ audience: stage.gw.config.routes.find((r) => r.path === ROUTE)!.resource, sub });

/** Opens a listen watching `uris` and reads it up to its acknowledgement; `until` reads on. */
async function openListen(token: string, id: string, uris: readonly string[]) {
  const aborted = new AbortController();
  streams.signal.addEventListener('abort', () => aborted.abort());
  const res = await post2026(stage.url(ROUTE), 'subscriptions/listen', { notifications: { resourceSubscriptions: uris } }, { token, id, signal: aborted.signal });
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let seen = '';
  const frames = () =>
    seen
      .split('\n')
      .filter((line) => line.startsWith('data: '))
      .map((line) => JSON.parse(line.slice(6)) as { method: string; params: Record<string, unknown> });
  const until = async (check: () => boolean) => {
    while (!check()) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the listen ended before the condition held:\n${seen}`);
      seen += decoder.decode(value, { stream: true });
    }
  };
  await until(() => frames().some((f) => f.method === 'notifications/subscriptions/acknowledged'));
  const honoured = (frames()[0]!.params.notifications as { resourceSubscriptions?: string[] }).resourceSubscriptions ?? [];
  return { frames, until, honoured, close: () => aborted.abort() };
}

const postedCount = (entry: string) => upstream.posted.filter((p) => p === entry).length;

describe('[K80] watches of session-less listens at a hostile session-based upstream', () => {
  it("[K80] an unsubscribe answered late does not drop the principal's next listen's watch of the same URI", async () => {
    const token = await tokenOf('alice');
    const first = await openListen(token, 'A-1', [DOC]);
    expect(first.honoured).toEqual([DOC]);
    upstream.unsubscribe = 'hold';
    first.close();
    await waitFor(() => upstream.held() === 1, 10_000, 'the unsubscribe reached the upstream');
    const subscribes = postedCount(`resources/subscribe ${DOC}`);
    const second = openListen(token, 'A-2', [DOC]);
    // The upstream answers the old unsubscribe only once the new listen asked (or would have asked) for the URI.
    await new Promise((resolve) => setTimeout(resolve, 500));
    upstream.unsubscribe = 'answer';
    upstream.release();
    const listen = await second;
    expect(listen.honoured).toEqual([DOC]);
    // The upstream's last word on the URI is a subscribe: it still tells of its changes.
    expect(postedCount(`resources/subscribe ${DOC}`)).toBe(subscribes + 1);
    expect(upstream.posted.filter((p) => p.endsWith(DOC)).at(-1)).toBe(`resources/subscribe ${DOC}`);
    // Time for the gateway to take the unsubscribe's answer in (no frame tells of it).
    await new Promise((resolve) => setTimeout(resolve, 500));
    upstream.update(DOC);
    const updated = listen.until(() => listen.frames().some((f) => f.method === 'notifications/resources/updated'));
    await expect(Promise.race([updated.then(() => 'told'), new Promise((resolve) => setTimeout(() => resolve('not told in 5 s'), 5_000))])).resolves.toBe('told');
    expect(listen.frames().find((f) => f.method === 'notifications/resources/updated')!.params).toEqual({ uri: DOC, _meta: { 'io.modelcontextprotocol/subscriptionId': 'A-2' } });
    listen.close();
  }, 30_000);

  it(`[K80] refused unsubscribes do not keep the ${MAX_SUBSCRIPTIONS} subscriptions of the principal's session taken after its listens ended`, async () => {
    const token = await tokenOf('bob');
    upstream.unsubscribe = 'refuse';
    try {
      // Listens of 64 URIs each, one after the other, each closed (and its URIs unsubscribed, refused) before the next.
      for (let i = 0; i < MAX_SUBSCRIPTIONS; i += 64) {
        const listen = await openListen(token, `B-${i}`, MANY.slice(i, i + 64));
        expect(listen.honoured.length).toBe(64);
        const unsubscribes = upstream.posted.filter((p) => p.startsWith('resources/unsubscribe')).length;
        listen.close();
        await waitFor(() => upstream.posted.filter((p) => p.startsWith('resources/unsubscribe')).length === unsubscribes + 64, 10_000, 'unsubscribed');
      }
      // None of bob's listens is open: his next listen's watch is honoured.
      const last = await openListen(token, 'B-last', [MANY[MAX_SUBSCRIPTIONS]!]);
      expect(last.honoured).toEqual([MANY[MAX_SUBSCRIPTIONS]]);
      last.close();
    } finally {
      upstream.unsubscribe = 'answer';
    }
  }, 60_000);
});
