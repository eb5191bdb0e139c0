// The client's event streams of one aggregated session (DESIGN §8.2): its GET
// stream, and the event streams its POSTs are answered on (post-stream.ts),
// each resumable with `Last-Event-ID` (client-event-stream.ts) from one
// replay buffer per session (replay-buffer.ts). What the gateway has written
// there and the client has not read yet is bounded per stream and for the
// whole session, so a client that reads nothing holds at most
// MAX_UNREAD_PER_SESSION of the gateway's memory (plus one message, the
// answers themselves and the replay buffer): past it, notifications are
// dropped and the upstreams' requests wait (server-requests.ts) until it
// reads again.
import type { ServerResponse } from 'node:http';
import type { ResponseTransform } from '../response-transform.js';
import { ClientEventStream, type ResumeOutcome, type SendOptions } from './client-event-stream.js';
import { ReplayBuffer } from './replay-buffer.js';

/** Bytes one client stream may hold unread before messages to it wait or are dropped. */
export const MAX_UNREAD_PER_STREAM = 256 * 1024;
/** The same over every stream of one session (its GET stream and every POST it is answered on). */
export const MAX_UNREAD_PER_SESSION = 1024 * 1024;
/**
 * How often a GET stream of a session that primes gets a priming event: well within the hour its
 * event ids are recorded for (EVENT_ID_TTL_MS), so the last id its client holds can be resumed after.
 */
export const PRIME_EVERY_MS = 20 * 60_000;
/** Streams one session remembers for resumption; beyond, one without a client reading is forgotten (a done one first, the stalest). */
export const MAX_STREAMS_PER_SESSION = 64;

/** Where messages to the client go: the GET stream, or the stream of the POST they belong to. */
export interface MessageChannel {
  /** Writes one message; false when it was not (closed, none open, too much unread): the caller drops or holds it. */
  send(message: object, how?: SendOptions): boolean;
  /** Whether its messages still belong to it (a POST's stream: until its answers are written; kept for a resume while its client is away). */
  readonly open: boolean;
  /** Whether a client reads it now (an upstream's request goes only where one does). */
  readonly connected: boolean;
  /**
   * Whether an upstream's request of `method` that came with this channel's request may reach the
   * client; absent: the session's clients serve what their initialize announced (a session-less
   * call answers for its own client's capabilities, session-less-call.ts).
   */
  takes?(method: string): boolean;
}

/** Where an upstream's progress on one of the session's tokens goes, and the upstreams the token was given to (only they speak on it). */
export interface ProgressTarget {
  channel: MessageChannel;
  upstreams: Set<string>;
}

/** The stream a `Last-Event-ID` names, and the number of the event the client read last. */
export interface NamedEvent {
  stream: ClientEventStream;
  after: number;
}

export class SessionStreams {
  /** The responses of this session whose unread bytes count, until they close. */
  private readonly counted = new Set<ServerResponse>();
  /** The session's GET stream (the latest opened or resumed). */
  private get?: ClientEventStream;
  /** Every stream a resume may name, by key, oldest first. */
  private readonly known = new Map<string, ClientEventStream>();
  private readonly replay = new ReplayBuffer();

  /** The GET stream as a channel: the messages no POST of the client's carries. */
  readonly listening: MessageChannel;

  /**
   * `writable`: a stream opened, drained or closed, so messages held for the client may go now.
   * `primes`: the session's revision has priming events (2025-11-25): its GET streams start with one
   * (after the replay, when resumed) and get one every PRIME_EVERY_MS. `resumable`: false for a
   * 2026-07-28 session without a session id, whose clients have no GET to resume with: its POST
   * streams' events carry no id and are not kept.
   */
  constructor(
    private readonly writable: () => void,
    private readonly primes = false,
    readonly resumable = true,
  ) {
    const current = () => this.get;
    this.listening = {
      send: (message, how) => current()?.send(message, how) === true,
      open: true,
      get connected() {
        return current()?.attached === true;
      },
    };
  }

  /** Whether a client reads the session's GET stream. */
  get hasListener(): boolean {
    return this.get?.attached === true;
  }

  /** The client's new GET stream; false when a client reads one already. */
  listen(res: ServerResponse, transform?: ResponseTransform): boolean {
    if (this.hasListener) return false;
    this.get = this.stream('get');
    this.get.attach(res, transform);
    if (this.primes) this.get.keepPrimed(res, PRIME_EVERY_MS);
    this.writable();
    return true;
  }

  /** The stream of this session a `Last-Event-ID` names, and the event after which it goes on; undefined when none. */
  named(lastEventId: string): NamedEvent | undefined {
    const dot = lastEventId.lastIndexOf('.');
    const stream = dot > 0 ? this.known.get(lastEventId.slice(0, dot)) : undefined;
    const digits = lastEventId.slice(dot + 1);
    const after = /^\d{1,15}$/.test(digits) ? Number(digits) : -1;
    return stream && stream.has(after) ? { stream, after } : undefined;
  }

  /** That stream resumed on `res`; refused ('busy') for a GET stream while the session's GET stream is read. */
  resume({ stream, after }: NamedEvent, res: ServerResponse, transform?: ResponseTransform): ResumeOutcome | 'busy' {
    if (stream.kind === 'get' && stream !== this.get && this.get?.attached) return 'busy';
    if (stream.kind === 'get') this.get = stream;
    const outcome = stream.resume(res, transform, after);
    if (this.primes && stream.kind === 'get') stream.keepPrimed(res, PRIME_EVERY_MS);
    this.writable();
    return outcome;
  }

  /** A new stream of this session, remembered for resumption (the stalest one nobody reads forgotten beyond the bound). */
  stream(kind: 'get' | 'post'): ClientEventStream {
    const stream = new ClientEventStream(kind, this.replay, this, this.resumable);
    this.known.set(stream.key, stream);
    if (this.known.size > MAX_STREAMS_PER_SESSION) this.forgetStalest();
    return stream;
  }

  /** A stream whose answers were written goes before one whose client may still resume it for them. */
  private forgetStalest(): void {
    let stalest: ClientEventStream | undefined;
    const before = (s: ClientEventStream, t: ClientEventStream) => (s.done !== t.done ? s.done : s.lastActive < t.lastActive);
    for (const s of this.known.values()) if (!s.attached && (stalest === undefined || before(s, stalest))) stalest = s;
    if (!stalest) return;
    this.known.delete(stalest.key);
    stalest.forget();
    if (this.get === stalest) this.get = undefined;
  }

  /** A response of this session whose unread bytes count from now on; its drain and close let held messages go. */
  count(res: ServerResponse): void {
    if (this.counted.has(res)) return;
    this.counted.add(res);
    res.on('drain', this.writable);
    res.once('close', () => {
      this.counted.delete(res);
      this.writable();
    });
  }

  /** Whether one more message may be written to `res` (open, and neither it nor the session holds too much unread). */
  hasRoom(res: ServerResponse): boolean {
    if (res.writableEnded || res.destroyed) return false;
    return res.writableLength < MAX_UNREAD_PER_STREAM && this.unread() < MAX_UNREAD_PER_SESSION;
  }

  /** Ends every connection and forgets every stream (the session is over). */
  end(): void {
    for (const stream of this.known.values()) {
      stream.end();
      stream.forget();
    }
    this.known.clear();
    this.get = undefined;
  }

  private unread(): number {
    let bytes = 0;
    for (const res of this.counted) bytes += res.writableLength;
    return bytes;
  }
}
