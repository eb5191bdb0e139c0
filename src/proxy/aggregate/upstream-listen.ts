// A `subscriptions/listen` of the gateway's own at an upstream of 2026-07-28
// alone (DESIGN §8.2): such an upstream has no session GET stream, so its change
// notifications reach an aggregated route only on a listen. One is opened per
// client listen stream (and per client session's GET stream), asking for what
// that client asked; its acknowledgement is awaited before the client's own
// listen is acknowledged, so a change the upstream announces once the client
// knows it is listening is not lost. Frames are read by the bounded reader; the
// upstream's acknowledgement, final result and subscription id are its own and
// stay here.
import type { ForwardContext, Forwarder } from '../forwarder.js';
import { openStream, type CapturedRequest } from './captured-exchange.js';
import { EventStreamReader } from './event-stream-reader.js';

export interface UpstreamListen {
  /** Resolves once the upstream acknowledged the subscription (true), its stream ended or its timeout passed (false). */
  ready: Promise<boolean>;
  /** The status the upstream answered the listen with (undefined: it ended without a head). */
  status: Promise<number | undefined>;
  /** Resolves when the upstream's stream ends, whatever the reason. */
  ended: Promise<void>;
  stop(): void;
}

/** The upstream of the link (upstream-link.ts's AggregateUpstream, as far as a listen needs it). */
interface ListenedUpstream {
  forwarder: Forwarder;
  timeoutMs: number;
  maxBytes: number;
}

const ACKNOWLEDGED = 'notifications/subscriptions/acknowledged';
const SUBSCRIPTION_ID = 'io.modelcontextprotocol/subscriptionId';

export function openUpstreamListen(upstream: ListenedUpstream, request: CapturedRequest, ctx: Omit<ForwardContext, 'body'>, onNotification: (method: string, params: Record<string, unknown> | undefined) => void): UpstreamListen {
  let acknowledged!: () => void;
  const ack = new Promise<boolean>((resolve) => (acknowledged = () => resolve(true)));
  const reader = new EventStreamReader(upstream.maxBytes, (m) => {
    // The listen's own result (the upstream ended it) or a request: not a notification for the client.
    if (!isRecord(m) || typeof m.method !== 'string' || m.id !== undefined) return;
    if (m.method === ACKNOWLEDGED) return acknowledged();
    try {
      onNotification(m.method, withoutSubscriptionId(m.params));
    } catch {
      // Whatever an upstream sends ends nothing but its own notification.
    }
  });
  const stream = openStream(upstream.forwarder, request, ctx, (chunk) => reader.push(chunk));
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), upstream.timeoutMs)));
  const ready = Promise.race([ack, stream.ended.then(() => false), waited]).finally(() => clearTimeout(timer));
  return { ready, status: stream.started, ended: stream.ended, stop: stream.stop };
}

/** The notification's params without the upstream's subscription id (the client's listen has its own). */
function withoutSubscriptionId(params: unknown): Record<string, unknown> | undefined {
  if (!isRecord(params)) return undefined;
  if (!isRecord(params._meta) || !(SUBSCRIPTION_ID in params._meta)) return params;
  const { [SUBSCRIPTION_ID]: _theirs, ...meta } = params._meta;
  return { ...params, _meta: meta };
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
