// One event stream of an aggregated session's client (its GET stream, or a
// POST answered as a stream), resumable as MCP Streamable HTTP allows: every
// event carries the id `<key>.<n>`, the key 128 random bits of this stream's
// own, so an id names one stream of one session and cannot be guessed; every
// event is kept in the session's replay buffer (replay-buffer.ts). The
// client's connection may come and go. While none is attached, what belongs
// to this stream (progress, notifications, a POST's answers) is still written
// to it, kept for a resume, while an upstream's request waits for a stream a
// client reads. A GET with `Last-Event-ID` attaches a new connection: the kept
// events after that id are written again, then what fell out of the buffer
// meanwhile is answered: a lost answer becomes a JSON-RPC error for its
// request, an upstream's request still awaiting the client is sent again, a
// list change is told again (other notifications lost are gone).
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { privateCacheControl } from '../headers.js';
import type { BodyTransform, ResponseTransform } from '../response-transform.js';
import { EVENT_STREAM_HEAD, messageEvent } from '../sse/client-streams.js';
import type { KeptEvent, ReplayBuffer, ReplayOwner } from './replay-buffer.js';

/** What one stream remembers of its events that fell out (to answer them on a resume), at most. */
export const MAX_LOST_PER_STREAM = 256;

export interface SendOptions {
  /** Only to a connection a client reads now (an upstream's request waits for one). */
  reader?: boolean;
  /** Written even past the unread bound (the answers, as a JSON answer would be). */
  force?: boolean;
  /** What the client gets instead if this event falls out before it read it. */
  lost?: () => object | undefined;
}

/** Where the unread bytes of the session's responses are counted and bounded (session-streams.ts). */
export interface UnreadBound {
  count(res: ServerResponse): void;
  hasRoom(res: ServerResponse): boolean;
}

export interface ResumeOutcome {
  /** Events written again from the buffer. */
  replayed: number;
  /** Some of its events after the client's id had fallen out of the buffer. */
  lost: boolean;
}

/** One message as an SSE `message` event with its id (a JSON text has no CR; an LF starts another data line). */
const eventOf = (id: string, json: string): Buffer => Buffer.from(`id: ${id}\nevent: message\ndata: ${json.replaceAll('\n', '\ndata: ')}\n\n`);

export class ClientEventStream implements ReplayOwner {
  readonly key = randomBytes(16).toString('base64url');
  private seq = 0;
  private res?: ServerResponse;
  private body?: BodyTransform;
  /** The newest of its events that fell out of the buffer (0: none). */
  private lostThrough = 0;
  private readonly lost: { seq: number; instead: () => object | undefined }[] = [];
  private finished = false;
  /** The session forgot it: nothing more is written to it, no resume finds it. */
  forgotten = false;
  /** When it last had a client or an event (the session forgets the stalest first). */
  lastActive = Date.now();

  constructor(
    readonly kind: 'get' | 'post',
    private readonly replay: ReplayBuffer,
    private readonly unread: UnreadBound,
    /** Its events carry ids and are kept for a resume (false: written as they come, nothing kept). */
    readonly resumable = true,
  ) {}

  /** A client reads it now. */
  get attached(): boolean {
    const res = this.res;
    return res !== undefined && !res.writableEnded && !res.destroyed;
  }

  /** No more events come (a POST's answers were written): a resume replays, then ends. */
  get done(): boolean {
    return this.finished;
  }

  /** Whether `seq` is an event of this stream (0: before its first). */
  has(seq: number): boolean {
    return Number.isSafeInteger(seq) && seq >= 0 && seq <= this.seq;
  }

  /** A client's connection becomes this stream's (a previous one is ended): the event-stream head at once. */
  attach(res: ServerResponse, transform: ResponseTransform | undefined): void {
    const previous = this.res;
    this.res = res;
    this.lastActive = Date.now();
    if (previous && previous !== res && !previous.writableEnded) previous.end();
    this.body = transform?.({ 'content-type': EVENT_STREAM_HEAD['content-type'] });
    // A filtered stream is this caller's alone, as a filtered JSON answer is.
    const head = this.body?.perCaller ? { ...EVENT_STREAM_HEAD, 'cache-control': privateCacheControl(EVENT_STREAM_HEAD['cache-control']) } : EVENT_STREAM_HEAD;
    res.writeHead(200, head);
    res.flushHeaders();
    this.unread.count(res);
    res.once('close', () => {
      if (this.res !== res) return;
      this.res = undefined;
      this.body = undefined;
      this.lastActive = Date.now();
    });
  }

  /** One message: false when it was not taken (over, forgotten, no reader for a request, no room). */
  send(message: object, how: SendOptions = {}): boolean {
    if (this.finished || this.forgotten) return false;
    const attached = this.attached;
    if (!attached && how.reader) return false;
    if (attached && !how.force && !this.unread.hasRoom(this.res!)) return false;
    this.emit(message, how.lost);
    return true;
  }

  /**
   * An event with an id and an empty data field (MCP 2025-11-25's priming event): nothing is
   * dispatched, but the client's Last-Event-ID is new, and so is its record in the store (the
   * policy's transform writes it), so a quiet stream can still be resumed after the record of its
   * last message expired. Not kept: a resume after it replays what came after.
   */
  prime(): void {
    if (!this.attached) return;
    this.write(Buffer.from(`id: ${this.key}.${++this.seq}\ndata: \n\n`));
  }

  /** Primes now and every `everyMs` while `res` is this stream's connection. */
  keepPrimed(res: ServerResponse, everyMs: number): void {
    this.prime();
    const timer = setInterval(() => this.res === res && this.prime(), everyMs).unref();
    res.once('close', () => clearInterval(timer));
  }

  /** No more events: the attached connection ends (a resume of it replays, then ends). */
  finish(): void {
    this.finished = true;
    this.end();
  }

  /** Ends the attached connection (the stream stays resumable). */
  end(): void {
    const res = this.res;
    if (!res || !this.attached) return;
    let tail: Buffer | undefined;
    try {
      tail = this.body?.end();
    } catch {
      return void res.destroy(); // the filter refused the answer: never passed unfiltered
    }
    res.end(tail);
  }

  /**
   * A client's `Last-Event-ID` of this stream (`after`, its number): the connection attached, the
   * kept events after it written again, what fell out since answered as it can be; the end, when
   * the stream is done.
   */
  resume(res: ServerResponse, transform: ResponseTransform | undefined, after: number): ResumeOutcome {
    this.attach(res, transform);
    const kept = this.replay.after(this, after);
    for (const k of kept) this.write(k.event);
    const lost = this.lostThrough > after;
    if (lost) {
      const told = new Set<string>();
      for (const { seq, instead } of [...this.lost]) {
        const message = seq > after ? instead() : undefined;
        const json = message && JSON.stringify(message);
        if (json === undefined || told.has(json)) continue;
        told.add(json);
        this.emit(message!, undefined);
      }
    }
    if (this.finished) this.end();
    return { replayed: kept.length, lost };
  }

  fellOut(kept: KeptEvent): void {
    this.lostThrough = Math.max(this.lostThrough, kept.seq);
    if (!kept.lost) return;
    this.lost.push({ seq: kept.seq, instead: kept.lost });
    if (this.lost.length > MAX_LOST_PER_STREAM) this.lost.shift();
  }

  /** Its events leave the buffer: the session forgot it. */
  forget(): void {
    this.forgotten = true;
    this.replay.forget(this);
    this.lost.length = 0;
  }

  /** A new event: numbered, kept, and written when a client reads (not resumable: only written). */
  private emit(message: object, lost: (() => object | undefined) | undefined): void {
    this.lastActive = Date.now();
    if (!this.resumable) return this.write(messageEvent(JSON.stringify(message)));
    const seq = ++this.seq;
    const event = eventOf(`${this.key}.${seq}`, JSON.stringify(message));
    this.replay.keep({ owner: this, seq, event, ...(lost && { lost }) });
    if (this.attached) this.write(event);
  }

  /** One event through the connection's transform; a transform that refuses it cuts the connection (fail closed). */
  private write(event: Buffer): void {
    const res = this.res;
    if (!res || !this.attached) return;
    let out = event;
    try {
      if (this.body) out = this.body.push(event);
    } catch {
      return void res.destroy();
    }
    if (out.length > 0) res.write(out);
  }
}
