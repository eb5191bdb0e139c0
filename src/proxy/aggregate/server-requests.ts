// Requests an upstream of an aggregated route sends to the client (sampling,
// elicitation, roots), for one client session (DESIGN §8.2). Each gets an id of
// the gateway's own (random, so upstreams' ids cannot meet and a client cannot
// guess one), is written to the stream of the client's POST it belongs to while
// its client reads it, else to the client's GET stream (held until one is read
// and has room; sent again on a resume when it was lost unread), and the client's answer to that id goes back to the upstream session
// that asked, once. An answer to an id this session was never sent, or already
// answered, is refused before anything is forwarded.
import { randomBytes } from 'node:crypto';
import { GatewayError } from '../../errors/gateway-error.js';
import type { MessageChannel } from './session-streams.js';

/**
 * Requests of one upstream session a client session holds unanswered; beyond, that upstream's
 * request is refused at once. Counted per upstream, so one that asks and never lets go cannot
 * leave the others of the session unable to ask anything.
 */
export const MAX_PENDING = 32;
/**
 * Bytes of one upstream session's requests held for a client with no stream open (or none with
 * room); beyond, that upstream's request is refused at once. Without it, 32 requests just under
 * max_body_bytes (4 MiB) held 128 MiB per upstream and session (review of issue 26).
 */
export const MAX_HELD_BYTES = 1024 * 1024;

export type RequestId = string | number;

/** A client's answer, as the upstream will receive it (only these members are passed on). */
export type ClientAnswer = { result: Record<string, unknown> } | { error: { code: number; message: string; data?: unknown } };

/** Where an answer goes: the upstream session that asked, with its own id. */
export type AnswerSink = (id: RequestId, answer: ClientAnswer) => Promise<void>;

interface Pending {
  upstreamId: RequestId;
  /** Which upstream session asked (for its cancellation); the sink answers it. */
  source: object;
  sink: AnswerSink;
  /** The request as the client sees it, until it is written to the client's stream. */
  unsent?: object;
  /** The stream of the client's POST it came with (it goes there while that is open). */
  related?: MessageChannel;
  /** Where it was written: its cancellation goes there too. */
  sentOn?: MessageChannel;
  /** Its size while it is held unsent. */
  heldBytes: number;
}

/** A client's message without a method, as it came. */
export interface AnswerMessage {
  id?: unknown;
  result?: unknown;
  error?: unknown;
}

export class ServerRequests {
  private readonly pending = new Map<string, Pending>();

  /** `listening`: the client's GET stream; its send is false when none is open or it has no room (the message is then held). */
  constructor(private readonly listening: MessageChannel) {}

  /**
   * An upstream's request: mapped to a fresh id and sent on (`related`: the stream of the client's
   * POST it came with). False when this upstream has too many pending: nothing is held, and the
   * caller refuses it (its refusals are bounded there).
   */
  asked(source: object, upstreamId: RequestId, method: string, params: Record<string, unknown> | undefined, sink: AnswerSink, related?: MessageChannel): boolean {
    if (this.pendingOf(source) >= MAX_PENDING) return false;
    const id = `mag-${randomBytes(18).toString('base64url')}`;
    const unsent = { jsonrpc: '2.0', id, method, ...(params && { params }) };
    const entry: Pending = { upstreamId, source, sink, related, unsent, heldBytes: 0 };
    this.send(entry);
    if (entry.unsent !== undefined) {
      // Not written now: held, within this upstream's bytes.
      const bytes = JSON.stringify(unsent).length;
      if (this.heldBytesOf(source) + bytes > MAX_HELD_BYTES) return false;
      entry.heldBytes = bytes;
    }
    this.pending.set(id, entry);
    return true;
  }

  private pendingOf(source: object): number {
    let n = 0;
    for (const entry of this.pending.values()) if (entry.source === source) n++;
    return n;
  }

  private heldBytesOf(source: object): number {
    let bytes = 0;
    for (const entry of this.pending.values()) if (entry.source === source) bytes += entry.heldBytes;
    return bytes;
  }

  /** The requests that came with `related`, forgotten: its client's request ended (a session-less call), so none is awaited any more. */
  forget(related: MessageChannel): void {
    for (const [id, entry] of this.pending) if (entry.related === related) this.pending.delete(id);
  }

  /** A client stream opened, drained or closed: what was held is written now. */
  flush(): void {
    for (const entry of this.pending.values()) this.send(entry);
  }

  /** The upstream gave up a request of its own (notifications/cancelled): the client is told, with the id it knows. */
  cancelled(source: object, upstreamId: unknown, reason: unknown): void {
    for (const [id, entry] of this.pending) {
      if (entry.source !== source || entry.upstreamId !== upstreamId) continue;
      this.pending.delete(id);
      const cancelled = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, ...(typeof reason === 'string' && { reason }) } };
      if (entry.unsent === undefined) this.channelOf(entry.sentOn).send(cancelled);
      return;
    }
  }

  /**
   * The client's answers of one POST: each must answer a request of this session still pending,
   * once; otherwise the whole POST is refused (400) and nothing is forwarded. Then each goes to
   * the upstream session that asked, with that upstream's id.
   */
  async answered(messages: readonly AnswerMessage[]): Promise<void> {
    const taken = messages.map((m) => ({ entry: this.claimable(m, messages), answer: answerOf(m) }));
    for (const m of messages) this.pending.delete(m.id as string);
    const results = await Promise.allSettled(taken.map(({ entry, answer }) => entry.sink(entry.upstreamId, answer)));
    if (results.some((r) => r.status === 'rejected')) throw new GatewayError(502, 'bad_gateway', 'The upstream that asked did not take the answer');
  }

  private claimable(m: AnswerMessage, all: readonly AnswerMessage[]): Pending {
    const entry = typeof m.id === 'string' ? this.pending.get(m.id) : undefined;
    // Delivered, pending, and named once in this POST: a replay, a guess or another session's id is none of these.
    if (!entry || entry.unsent !== undefined || all.filter((x) => x.id === m.id).length > 1) {
      throw new GatewayError(400, 'invalid_request', 'The answer names no request of this session awaiting one');
    }
    return entry;
  }

  private send(entry: Pending): void {
    const unsent = entry.unsent;
    if (unsent === undefined) return;
    const channel = this.channelOf(entry.related);
    // Only where a client reads now; sent again on a resume if it fell out of the replay buffer unread and is still awaited.
    const id = (unsent as { id: string }).id;
    if (!channel.send(unsent, { reader: true, lost: () => (this.pending.get(id) === entry ? unsent : undefined) })) return;
    entry.unsent = undefined;
    entry.heldBytes = 0;
    entry.sentOn = channel;
  }

  /** The POST's stream while its client reads it, else the GET stream. */
  private channelOf(related: MessageChannel | undefined): MessageChannel {
    return related?.open && related.connected ? related : this.listening;
  }
}

/** The answer's result or error, checked and rebuilt (nothing else the client put in it is passed on). */
function answerOf(m: AnswerMessage): ClientAnswer {
  if (isRecord(m.result) && m.error === undefined) return { result: m.result };
  const e = m.error;
  if (m.result === undefined && isRecord(e) && Number.isInteger(e.code) && typeof e.message === 'string') {
    return { error: { code: e.code as number, message: e.message, ...(e.data !== undefined && { data: e.data }) } };
  }
  throw new GatewayError(400, 'invalid_request', 'An answer holds a result object or an error with a code and a message');
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
