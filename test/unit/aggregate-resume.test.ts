/**
 * Resuming an aggregated session's client streams with `Last-Event-ID` (session-streams.ts,
 * client-event-stream.ts, replay-buffer.ts): every event has an id naming its stream (128 random
 * bits) and its place; a POST stream whose client left keeps what belongs to it, and a resume
 * after the last id the client read gets the rest, then the end; an id of another session, a
 * made-up one, or one past the stream's last event resumes nothing. The replay buffer is bounded
 * in events and bytes, and what fell out of it is never passed over in silence: over random
 * scripts (messages, answers, requests of upstreams, clients leaving, resumes from any id), every
 * answer after the client's id reaches it, as itself or as an error saying it was lost, and every
 * request still awaited is sent again. A session of 2025-11-25 primes its GET streams (an id, no
 * data), so the id its client holds is never older than the store keeps it.
 */
import type { ServerResponse } from 'node:http';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { PostStream } from '../../src/proxy/aggregate/post-stream.js';
import { MAX_REPLAY_BYTES, MAX_REPLAY_EVENTS, ReplayBuffer, type ReplayOwner } from '../../src/proxy/aggregate/replay-buffer.js';
import { ServerRequests } from '../../src/proxy/aggregate/server-requests.js';
import { PRIME_EVERY_MS, SessionStreams } from '../../src/proxy/aggregate/session-streams.js';
import { UnreadResponse } from '../helpers/unread-response.js';

const asRes = (r: UnreadResponse) => r as unknown as ServerResponse;

/** A GET with `Last-Event-ID` on `streams`: 'unknown' when the id names nothing of the session, else what resuming did. */
function resume(streams: SessionStreams, lastEventId: string, res: UnreadResponse) {
  const named = streams.named(lastEventId);
  return named ? streams.resume(named, asRes(res)) : 'unknown';
}
const progress = (n: number, pad = 0) => ({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 't', progress: n, ...(pad > 0 && { pad: 'p'.repeat(pad) }) } });

/** A POST of `streams` answered as a stream: its first progress written, its client gone. */
function leftPost(streams: SessionStreams) {
  const res = new UnreadResponse();
  const post = new PostStream(asRes(res), streams, undefined, true);
  expect(post.send(progress(1))).toBe(true);
  const lastRead = res.ids().at(-1)!;
  res.destroy();
  return { post, res, lastRead };
}

describe('event ids', () => {
  it('name the stream (128 random bits) and count its events; two streams never share a key', () => {
    const streams = new SessionStreams(() => undefined);
    const a = new UnreadResponse();
    const b = new UnreadResponse();
    const pa = new PostStream(asRes(a), streams, undefined, true);
    const pb = new PostStream(asRes(b), streams, undefined, true);
    for (let i = 1; i <= 3; i++) pa.send(progress(i));
    pb.send(progress(1));
    pa.answer({ jsonrpc: '2.0', id: 1, result: {} });
    const ids = a.ids();
    expect(ids).toHaveLength(4);
    const key = ids[0]!.split('.')[0]!;
    expect(key).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(ids).toEqual([1, 2, 3, 4].map((n) => `${key}.${n}`));
    expect(b.ids()[0]!.split('.')[0]).not.toBe(key);
  });

  it("a session's GET stream carries ids too", () => {
    const streams = new SessionStreams(() => undefined);
    const get = new UnreadResponse();
    expect(streams.listen(asRes(get))).toBe(true);
    streams.listening.send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    expect(get.ids()).toHaveLength(1);
    expect(get.ids()[0]).toMatch(/^[A-Za-z0-9_-]{22}\.1$/);
  });
});

describe('a session without a session id (2026-07-28, no GET to resume with)', () => {
  it('writes its POST streams without ids and keeps nothing: a POST whose client left takes nothing more', () => {
    const streams = new SessionStreams(() => undefined, false, false);
    const res = new UnreadResponse();
    const post = new PostStream(asRes(res), streams, undefined, true);
    expect(post.send(progress(1))).toBe(true);
    expect(res.messages()).toEqual([progress(1)]);
    expect(res.ids()).toEqual([]);
    res.destroy();
    expect(post.open).toBe(false);
    expect(post.send(progress(2))).toBe(false);
  });
});

describe('priming events (2025-11-25)', () => {
  afterEach(() => void vi.useRealTimers());

  it('a GET stream of a priming session starts with an id and no data, and gets one every PRIME_EVERY_MS; a resume after one replays what came after', () => {
    vi.useFakeTimers();
    const streams = new SessionStreams(() => undefined, true);
    const get = new UnreadResponse();
    streams.listen(asRes(get));
    expect(get.chunks.join('')).toMatch(/^id: [A-Za-z0-9_-]{22}\.1\ndata: \n\n$/);
    expect(get.messages()).toEqual([]);
    streams.listening.send(progress(1));
    vi.advanceTimersByTime(PRIME_EVERY_MS);
    const ids = get.ids();
    expect(ids.map((id) => id.split('.')[1])).toEqual(['1', '2', '3']);
    get.destroy();
    vi.advanceTimersByTime(PRIME_EVERY_MS); // none while no client reads
    streams.listening.send(progress(2));
    const again = new UnreadResponse();
    expect(resume(streams, ids[2]!, again)).toMatchObject({ replayed: 1, lost: false });
    // What was missed, then a priming event with a newer id.
    expect(again.messages()).toEqual([progress(2)]);
    expect(again.ids().map((id) => id.split('.')[1])).toEqual(['4', '5']);
  });

  it('a session of an older revision is sent none', () => {
    vi.useFakeTimers();
    const streams = new SessionStreams(() => undefined, false);
    const get = new UnreadResponse();
    streams.listen(asRes(get));
    vi.advanceTimersByTime(2 * PRIME_EVERY_MS);
    expect(get.chunks).toEqual([]);
  });
});

describe('a POST stream whose client left', () => {
  it('keeps its progress and answer; a resume after the last id read gets the rest, then the end', () => {
    const streams = new SessionStreams(() => undefined);
    const { post, lastRead } = leftPost(streams);
    // Still the home of its messages: kept for a resume, not sent to the GET stream.
    expect(post.open).toBe(true);
    expect(post.connected).toBe(false);
    expect(post.send(progress(2))).toBe(true);
    post.answer({ jsonrpc: '2.0', id: 7, result: { done: true } });
    const again = new UnreadResponse();
    const resumed = resume(streams, lastRead, again);
    expect(resumed).toMatchObject({ replayed: 2, lost: false });
    expect(again.headers['content-type']).toBe('text/event-stream');
    expect(again.messages()).toEqual([progress(2), { jsonrpc: '2.0', id: 7, result: { done: true } }]);
    expect(again.writableEnded).toBe(true);
  });

  it('an answer larger than the replay buffer is never kept: the resume ends with an error answer for its request, saying it was lost', () => {
    const streams = new SessionStreams(() => undefined);
    const { post, lastRead } = leftPost(streams);
    post.send(progress(2));
    post.answer({ jsonrpc: '2.0', id: 'big', result: { text: 'y'.repeat(MAX_REPLAY_BYTES) } });
    const again = new UnreadResponse();
    expect(resume(streams, lastRead, again)).toMatchObject({ replayed: 1, lost: true });
    expect(again.messages()).toEqual([progress(2), { jsonrpc: '2.0', id: 'big', error: { code: -32603, message: expect.stringContaining('answer was lost') as unknown } }]);
    expect(again.writableEnded).toBe(true);
  });

  it('resumed while its call runs: what came meanwhile, then what comes live, the answer last', () => {
    const streams = new SessionStreams(() => undefined);
    const { post, lastRead } = leftPost(streams);
    post.send(progress(2));
    const again = new UnreadResponse();
    resume(streams, lastRead, again);
    expect(again.writableEnded).toBe(false);
    post.send(progress(3));
    post.answer({ jsonrpc: '2.0', id: 7, result: {} });
    expect(again.messages().map((m) => (m.params as { progress?: number } | undefined)?.progress ?? m.id)).toEqual([2, 3, 7]);
    expect(again.writableEnded).toBe(true);
  });

  it("an upstream's request is written only where a client reads: while the POST's client is away, the GET stream", () => {
    const streams = new SessionStreams(() => requests.flush());
    const requests = new ServerRequests(streams.listening);
    const get = new UnreadResponse();
    streams.listen(asRes(get));
    const { post } = leftPost(streams);
    requests.asked({}, 1, 'sampling/createMessage', undefined, () => Promise.resolve(), post);
    expect(get.messages().map((m) => m.method)).toEqual(['sampling/createMessage']);
  });

  it('an id of another session, a made-up one, one past the last event, or not an id at all resumes nothing', () => {
    const mine = new SessionStreams(() => undefined);
    const other = new SessionStreams(() => undefined);
    const { lastRead } = leftPost(other);
    const [key, n] = leftPost(mine).lastRead.split('.');
    for (const id of [lastRead, `${'A'.repeat(22)}.1`, `${key}.${Number(n) + 1}`, `${key}.-1`, `${key}.1e3`, `${key}.`, key!, '', '.1']) {
      expect(resume(mine, id, new UnreadResponse())).toBe('unknown');
    }
    expect(resume(mine, `${key}.0`, new UnreadResponse())).toMatchObject({ replayed: 1 });
  });

  it('a GET stream is resumed only while no other GET stream of the session is read', () => {
    const streams = new SessionStreams(() => undefined);
    const first = new UnreadResponse();
    streams.listen(asRes(first));
    streams.listening.send(progress(1));
    const id = first.ids()[0]!;
    first.destroy();
    const second = new UnreadResponse();
    expect(streams.listen(asRes(second))).toBe(true);
    expect(resume(streams, id, new UnreadResponse())).toBe('busy');
    second.destroy();
    const again = new UnreadResponse();
    expect(resume(streams, id, again)).toMatchObject({ replayed: 0, lost: false });
    // The resumed stream is the session's GET stream again.
    streams.listening.send(progress(2));
    expect(again.messages()).toEqual([progress(2)]);
  });
});

describe('the replay buffer', () => {
  it(`keeps at most ${MAX_REPLAY_EVENTS} events and ${MAX_REPLAY_BYTES} bytes; each owner told of every event that falls out, oldest first`, () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 300 * 1024 }), { maxLength: 3000 }), (sizes) => {
        const buffer = new ReplayBuffer();
        const fell: number[] = [];
        const owner: ReplayOwner = { fellOut: (e) => void fell.push(e.seq) };
        sizes.forEach((size, i) => buffer.keep({ owner, seq: i + 1, event: Buffer.alloc(size) }));
        const kept = buffer.after(owner, 0);
        expect(kept.length).toBeLessThanOrEqual(MAX_REPLAY_EVENTS);
        expect(buffer.size).toBeLessThanOrEqual(MAX_REPLAY_BYTES);
        expect(buffer.size).toBe(kept.reduce((n, e) => n + e.event.length, 0));
        // Every event is kept or fell out, once; what is kept is the newest.
        expect([...fell, ...kept.map((e) => e.seq)].sort((a, b) => a - b)).toEqual(sizes.map((_, i) => i + 1));
        expect(fell).toEqual([...fell].sort((a, b) => a - b));
        if (kept.length > 0) expect(Math.max(...fell, 0)).toBeLessThan(kept[0]!.seq);
      }),
      { numRuns: 60 },
    );
  });

  it('property: past the bound, a resume gets every later answer (itself or an error saying it was lost) and every request still awaited', () => {
    type Op = { op: 'progress'; bytes: number } | { op: 'ask' } | { op: 'reply' } | { op: 'post' };
    const op = fc.oneof(
      fc.record({ op: fc.constant('progress' as const), bytes: fc.integer({ min: 0, max: 48 * 1024 }) }),
      fc.constant<Op>({ op: 'ask' }),
      fc.constant<Op>({ op: 'reply' }),
      fc.constant<Op>({ op: 'post' }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (script) => {
        const streams = new SessionStreams(() => requests.flush());
        const requests = new ServerRequests(streams.listening);
        const get = new UnreadResponse();
        streams.listen(asRes(get));
        const posts: { post: PostStream; id: number; read: string }[] = [];
        const awaited: string[] = [];
        let next = 1;
        for (const step of script) {
          if (step.op === 'progress') streams.listening.send(progress(next++, step.bytes));
          else if (step.op === 'ask') {
            const before = get.messages().length;
            requests.asked({}, next++, 'roots/list', undefined, () => Promise.resolve());
            awaited.push(...get.messages().slice(before).map((m) => m.id as string));
          } else if (step.op === 'reply' && awaited.length > 0) void requests.answered([{ id: awaited.shift(), result: {} }]);
          else if (step.op === 'post') {
            const left = leftPost(streams);
            posts.push({ post: left.post, id: next++, read: left.lastRead });
          }
          get.drain(); // the client reads its GET stream as it comes
        }
        // Every POST is answered while its client is away, then resumed from the one id it read.
        for (const { post, id } of posts) post.answer({ jsonrpc: '2.0', id, result: { n: id } });
        for (const { id, read } of posts) {
          const again = new UnreadResponse();
          if (typeof resume(streams, read, again) === 'string') continue; // forgotten past the streams a session keeps
          const answer = again.messages().find((m) => m.id === id);
          if (answer?.result) expect(answer.result).toEqual({ n: id });
          else expect((answer?.error as { message?: string } | undefined)?.message).toMatch(/answer was lost/);
          expect(again.writableEnded).toBe(true);
        }
        // The GET stream lost before its first event and resumed: every request still awaited is in what it gets.
        const key = get.ids()[0]?.split('.')[0];
        get.destroy();
        if (key === undefined) return;
        const again = new UnreadResponse();
        expect(resume(streams, `${key}.0`, again)).not.toBeTypeOf('string');
        const got = new Set(again.messages().map((m) => m.id));
        for (const id of awaited) expect(got.has(id)).toBe(true);
      }),
      { numRuns: 80 },
    );
  });
});
