// The client's event streams of one aggregated session (DESIGN §8.2): its GET
// stream, and the event streams its POSTs are answered on (post-stream.ts).
// What the gateway has written there and the client has not read yet is
// bounded per stream and for the whole session, so a client that reads
// nothing holds at most MAX_UNREAD_PER_SESSION of the gateway's memory (plus
// one message and the answers themselves): past it, notifications are dropped
// and the upstreams' requests wait (server-requests.ts) until it reads again.
import type { ServerResponse } from 'node:http';
import { EVENT_STREAM_HEAD, messageEvent } from '../sse/client-streams.js';

/** Bytes one client stream may hold unread before messages to it wait or are dropped. */
export const MAX_UNREAD_PER_STREAM = 256 * 1024;
/** The same over every stream of one session (its GET stream and every POST it is answered on). */
export const MAX_UNREAD_PER_SESSION = 1024 * 1024;

/** Where messages to the client go: the GET stream, or the stream of the POST they belong to. */
export interface MessageChannel {
  /** Writes one message; false when it was not (closed, none open, too much unread): the caller drops or holds it. */
  send(message: object): boolean;
  /** Whether it still takes messages (a POST's stream: until its answers are written or the client leaves). */
  readonly open: boolean;
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

export class SessionStreams {
  /** The responses of this session whose unread bytes count, until they close. */
  private readonly counted = new Set<ServerResponse>();
  private get?: ServerResponse;

  /** The GET stream as a channel: the messages no POST of the client's carries. */
  readonly listening: MessageChannel = {
    send: (message) => this.get !== undefined && this.write(this.get, messageEvent(JSON.stringify(message))),
    get open() {
      return true;
    },
  };

  /** `writable`: a stream opened, drained or closed, so messages held for the client may go now. */
  constructor(private readonly writable: () => void) {}

  /** Whether the session has a GET stream open. */
  get hasListener(): boolean {
    return this.get !== undefined && !this.get.writableEnded && !this.get.destroyed;
  }

  /** The client's GET stream; false when the session has one open already. */
  listen(res: ServerResponse): boolean {
    if (this.hasListener) return false;
    this.get = res;
    res.writeHead(200, EVENT_STREAM_HEAD);
    res.flushHeaders();
    res.once('close', () => {
      if (this.get === res) this.get = undefined;
    });
    this.count(res);
    this.writable();
    return true;
  }

  /** A response of this session whose unread bytes count from now on; its drain and close let held messages go. */
  count(res: ServerResponse): void {
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

  /** Writes one event when there is room; false when it was not written. */
  write(res: ServerResponse, event: Buffer): boolean {
    if (!this.hasRoom(res)) return false;
    res.write(event);
    return true;
  }

  /** Ends the GET stream (the session is over). */
  end(): void {
    this.get?.end();
  }

  private unread(): number {
    let bytes = 0;
    for (const res of this.counted) bytes += res.writableLength;
    return bytes;
  }
}
