/**
 * The store's notice subscriber behind a connection that goes silent (a load balancer's idle
 * timeout forgets it: no FIN, no RST). ioredis keeps such a connection 'ready' while the kernel
 * retransmits, so without a heartbeat the subscription looked live and caches kept serving what a
 * missed notice had ended. A PING unanswered within command_timeout ends the connection: the
 * subscription reads as not live (callers stop caching), and once the path is back it is
 * subscribed again and hears notices. Real redis-server, a real TCP relay.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRedisClient, type RedisClient } from '../../src/store/redis-client.js';
import { RedisNotices } from '../../src/store/redis-notices.js';
import { startBlackholeRelay, type BlackholeRelay } from '../helpers/blackhole-relay.js';
import { startRedisServer, type RedisServer } from '../helpers/redis-server.js';
import { waitFor } from '../helpers/wait.js';

let redis: RedisServer;
let relay: BlackholeRelay;
const closers: (() => unknown)[] = [];

beforeAll(async () => {
  redis = await startRedisServer();
}, 30_000);

afterAll(async () => {
  await redis?.stop();
});

afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

async function subscriberThroughRelay(heartbeatMs: number) {
  relay = await startBlackholeRelay(Number(new URL(redis.url).port));
  const client: RedisClient = createRedisClient({ kind: 'standalone', url: `redis://127.0.0.1:${relay.port}` }, { keyPrefix: 'hb:', commandTimeoutMs: 400 });
  client.on('error', () => undefined);
  const notices = new RedisNotices(client, 'hb:', heartbeatMs);
  const publisher = createRedisClient({ kind: 'standalone', url: redis.url }, { keyPrefix: 'hb:', commandTimeoutMs: 2_000 });
  const heard: string[] = [];
  const subscription = notices.subscribe('grants', (m) => heard.push(m));
  closers.push(() => notices.close(), () => client.disconnect(), () => publisher.disconnect(), () => relay.close());
  await waitFor(() => subscription.live(), 10_000);
  return { subscription, heard, publish: (m: string) => publisher.publish('hb:grants', m) };
}

describe('store notices over a connection that goes silent', () => {
  it('control, no heartbeat: the silent subscription still reads as live after 3 s (what the heartbeat fixes)', async () => {
    const { subscription } = await subscriberThroughRelay(2_000_000_000);
    relay.silent = true;
    await new Promise((r) => setTimeout(r, 3_000));
    expect(subscription.live()).toBe(true);
  }, 20_000);

  it('with the heartbeat: not live once a PING goes unanswered, a new epoch, then subscribed again and hearing notices when the path is back', async () => {
    const { subscription, heard, publish } = await subscriberThroughRelay(200);
    await publish('before');
    await waitFor(() => heard.includes('before'), 5_000);
    const epoch = subscription.epoch();
    relay.silent = true;
    await publish('missed');
    await waitFor(() => !subscription.live(), 10_000);
    expect(subscription.epoch()).toBeGreaterThan(epoch);
    expect(heard).not.toContain('missed');
    relay.silent = false;
    await waitFor(() => subscription.live(), 15_000);
    await publish('after');
    await waitFor(() => heard.includes('after'), 5_000);
  }, 40_000);
});
