// Store notices on Redis pub/sub: one subscriber connection per store, opened
// on the first subscription (a replica with no cache opens none). Channels
// carry the store's key prefix, as keys do (ioredis does not prefix channels),
// so gateways sharing one Redis under different prefixes do not hear each
// other. The subscription is live only while that connection is up and
// subscribed: while it is down notices may be missed, and callers stop caching.
// A connection cut without a FIN (a load balancer's or NAT's idle timeout) stays
// 'ready' to ioredis for as long as the kernel retransmits; a heartbeat PING
// unanswered within command_timeout ends it, so it counts as down and reconnects.
import { Cluster } from 'ioredis';
import { MAX_RECONNECT_DELAY_MS, type RedisClient } from './redis-client.js';
import { reviveWhenEnded, type Revival } from './redis-revival.js';
import type { NoticeSubscription, StoreNotices } from './store.js';

/** How often the subscriber connection is asked to answer; idle-timeouts of balancers are minutes, this is far under. */
export const NOTICE_HEARTBEAT_MS = 5_000;

export class RedisNotices implements StoreNotices {
  #subscriber: RedisClient | undefined;
  /** Channels whose SUBSCRIBE this connection has confirmed; emptied when it drops. */
  readonly #subscribed = new Set<string>();
  /** Bumped on every drop: what a cache kept before one may have missed a notice, even once live again. */
  #epoch = 0;
  #closed = false;
  #revival: Revival | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  #pinging = false;
  readonly #handlers = new Map<string, ((message: string) => void)[]>();

  constructor(
    private readonly client: RedisClient,
    private readonly prefix: string,
    private readonly heartbeatMs = NOTICE_HEARTBEAT_MS,
  ) {}

  subscribe(channel: string, onNotice: (message: string) => void): NoticeSubscription {
    const name = this.prefix + channel;
    const handlers = this.#handlers.get(name) ?? [];
    handlers.push(onNotice);
    this.#handlers.set(name, handlers);
    const epoch = () => this.#epoch;
    if (this.#closed) return { live: () => false, epoch, close: () => undefined };
    const subscriber = this.#connect();
    if (handlers.length === 1) void subscriber.subscribe(name).then(() => this.#subscribed.add(name), () => undefined);
    return { live: () => this.#subscribed.has(name) && subscriber.status === 'ready', epoch, close: () => this.#unsubscribe(name, onNotice) };
  }

  /** One handler gone; the channel's last gone, the channel too. */
  #unsubscribe(name: string, onNotice: (message: string) => void): void {
    const handlers = (this.#handlers.get(name) ?? []).filter((h) => h !== onNotice);
    if (handlers.length > 0) return void this.#handlers.set(name, handlers);
    this.#handlers.delete(name);
    this.#subscribed.delete(name);
    if (!this.#closed) void this.#subscriber?.unsubscribe(name).catch(() => undefined);
  }

  async publish(channel: string, message: string): Promise<void> {
    await this.client.publish(this.prefix + channel, message);
  }

  #connect(): RedisClient {
    if (this.#subscriber) return this.#subscriber;
    const subscriber = this.client.duplicate();
    subscriber.on('error', () => undefined);
    // ioredis subscribes again after a reconnect; until it has, notices may be missed.
    subscriber.on('close', () => {
      this.#subscribed.clear();
      this.#epoch++;
    });
    subscriber.on('ready', () => {
      const names = [...this.#handlers.keys()];
      if (names.length > 0) void subscriber.subscribe(...names).then(() => names.forEach((n) => this.#subscribed.add(n)), () => undefined);
    });
    subscriber.on('message', (channel: string, message: string) => {
      for (const handler of this.#handlers.get(channel) ?? []) handler(message);
    });
    // Given up for good after a failed Sentinel lookup, as the store's own client can be: started again.
    this.#revival = subscriber instanceof Cluster ? undefined : reviveWhenEnded(subscriber, MAX_RECONNECT_DELAY_MS);
    this.#heartbeat = setInterval(() => this.#ping(subscriber), this.heartbeatMs).unref();
    this.#subscriber = subscriber;
    return subscriber;
  }

  /** One PING at a time; unanswered (command_timeout) or refused, the connection is ended and opened again. */
  #ping(subscriber: RedisClient): void {
    if (this.#pinging || this.#closed || subscriber.status !== 'ready') return;
    this.#pinging = true;
    subscriber
      .ping()
      .catch(() => {
        if (!this.#closed) subscriber.disconnect(true);
      })
      .finally(() => (this.#pinging = false));
  }

  close(): void {
    this.#closed = true;
    clearInterval(this.#heartbeat);
    this.#revival?.stop();
    this.#subscriber?.disconnect();
  }
}
