/**
 * The client's streams of one aggregated session (proxy/aggregate/session-streams.ts and
 * post-stream.ts): a POST's answer is JSON unless something of its requests went first on its own
 * event stream, and the answers then end that stream; a client that reads nothing holds at most
 * MAX_UNREAD_PER_STREAM per stream and MAX_UNREAD_PER_SESSION over all (plus one message) of the
 * gateway's memory, whatever it opens and whatever the upstreams send (a property over random
 * streams, messages and drains); requests held meanwhile go once the client reads.
 */
import type { ServerResponse } from 'node:http';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { acceptsEventStream, PostStream } from '../../src/proxy/aggregate/post-stream.js';
import { ServerRequests } from '../../src/proxy/aggregate/server-requests.js';
import { MAX_UNREAD_PER_SESSION, MAX_UNREAD_PER_STREAM, SessionStreams } from '../../src/proxy/aggregate/session-streams.js';
import { UnreadResponse } from '../helpers/unread-response.js';

const asRes = (r: UnreadResponse) => r as unknown as ServerResponse;
const progress = (n: number, pad = 0) => ({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 't', progress: n, pad: 'p'.repeat(pad) } });

describe("a POST's answer", () => {
  it('is JSON when nothing went before it, whatever the client accepts', () => {
    const streams = new SessionStreams(() => undefined);
    const res = new UnreadResponse();
    new PostStream(asRes(res), streams, undefined, true).answer({ jsonrpc: '2.0', id: 1, result: {} });
    expect(res.headers['content-type']).toBe('application/json');
    expect(JSON.parse(res.chunks.join(''))).toEqual({ jsonrpc: '2.0', id: 1, result: {} });
  });

  it('is an event stream once a message of its requests went first: those messages as they came, then each answer, then the end', () => {
    const streams = new SessionStreams(() => undefined);
    const res = new UnreadResponse();
    const post = new PostStream(asRes(res), streams, undefined, true);
    expect(post.send(progress(1))).toBe(true);
    expect(post.send({ jsonrpc: '2.0', id: 'mag-x', method: 'sampling/createMessage', params: {} })).toBe(true);
    post.answer([{ jsonrpc: '2.0', id: 1, result: {} }, { jsonrpc: '2.0', id: 2, result: {} }]);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(res.messages().map((m) => m.method ?? m.id)).toEqual(['notifications/progress', 'sampling/createMessage', 1, 2]);
    expect(res.writableEnded).toBe(true);
    // Answered: it takes nothing more (what comes later goes to the GET stream).
    expect(post.open).toBe(false);
    expect(post.send(progress(2))).toBe(false);
  });

  it('never streams to a client that does not accept an event stream', () => {
    const streams = new SessionStreams(() => undefined);
    const res = new UnreadResponse();
    const post = new PostStream(asRes(res), streams, undefined, acceptsEventStream('application/json'));
    expect(post.open).toBe(false);
    expect(post.send(progress(1))).toBe(false);
    post.answer({ jsonrpc: '2.0', id: 1, result: {} });
    expect(res.headers['content-type']).toBe('application/json');
  });

  it.each([
    ['application/json, text/event-stream', true],
    ['text/event-stream;q=0.5, application/json', true],
    ['TEXT/EVENT-STREAM', true],
    ['application/json', false],
    ['text/event-streams', false],
    [undefined, false],
  ])('Accept %s takes an event stream: %s', (accept, expected) => {
    expect(acceptsEventStream(accept)).toBe(expected);
  });
});

describe('what a client that reads nothing can make the gateway hold', () => {
  type Op = { op: 'get' } | { op: 'post' } | { op: 'send'; to: number; bytes: number } | { op: 'drain'; of: number } | { op: 'close'; of: number };
  const ops = fc.array(
    fc.oneof(
      fc.constant<Op>({ op: 'get' }),
      fc.constant<Op>({ op: 'post' }),
      fc.record({ op: fc.constant('send' as const), to: fc.nat(20), bytes: fc.integer({ min: 0, max: 64 * 1024 }) }),
      fc.record({ op: fc.constant('drain' as const), of: fc.nat(20) }),
      fc.record({ op: fc.constant('close' as const), of: fc.nat(20) }),
    ),
    { maxLength: 300 },
  );
  const LARGEST = 64 * 1024 + 200; // one message's event, the bound's overshoot at most

  it(`property: at most ${MAX_UNREAD_PER_STREAM} bytes unread per stream and ${MAX_UNREAD_PER_SESSION} per session, plus one message`, () => {
    fc.assert(
      fc.property(ops, (script) => {
        const streams = new SessionStreams(() => undefined);
        const open: UnreadResponse[] = [];
        const channels: { send(m: object): boolean }[] = [];
        for (const step of script) {
          if (step.op === 'get') {
            const res = new UnreadResponse();
            if (!streams.listen(asRes(res))) continue; // one GET stream at a time
            open.push(res);
            channels.push(streams.listening);
          } else if (step.op === 'post') {
            const res = new UnreadResponse();
            open.push(res);
            channels.push(new PostStream(asRes(res), streams, undefined, true));
          } else if (step.op === 'send' && channels.length > 0) channels[step.to % channels.length]!.send(progress(1, step.bytes));
          else if (step.op === 'drain' && open.length > 0) open[step.of % open.length]!.drain();
          else if (step.op === 'close' && open.length > 0) open[step.of % open.length]!.destroy();
          const live = open.filter((r) => !r.destroyed);
          for (const r of live) expect(r.writableLength).toBeLessThan(MAX_UNREAD_PER_STREAM + LARGEST);
          expect(live.reduce((n, r) => n + r.writableLength, 0)).toBeLessThan(MAX_UNREAD_PER_SESSION + LARGEST);
        }
      }),
      { numRuns: 200 },
    );
  });

  it('progress past the bound is dropped; a request past it waits and is written once the client reads', () => {
    const streams = new SessionStreams(() => requests.flush());
    const requests = new ServerRequests(streams.listening);
    const get = new UnreadResponse();
    streams.listen(asRes(get));
    let sent = 0;
    while (streams.listening.send(progress(sent, 16 * 1024))) sent++;
    expect(sent * 16 * 1024).toBeGreaterThanOrEqual(MAX_UNREAD_PER_STREAM);
    expect(sent * 16 * 1024).toBeLessThan(MAX_UNREAD_PER_STREAM + 17 * 1024);
    expect(requests.asked({}, 1, 'roots/list', undefined, () => Promise.resolve())).toBe(true);
    expect(get.messages().some((m) => m.method === 'roots/list')).toBe(false);
    get.drain();
    expect(get.messages().filter((m) => m.method === 'roots/list')).toHaveLength(1);
  });

  it("a request that came with a POST goes on that POST's stream; once the POST is answered, a held one goes to the GET stream", () => {
    const streams = new SessionStreams(() => requests.flush());
    const requests = new ServerRequests(streams.listening);
    const get = new UnreadResponse();
    streams.listen(asRes(get));
    const postRes = new UnreadResponse();
    const post = new PostStream(asRes(postRes), streams, undefined, true);
    requests.asked({}, 1, 'sampling/createMessage', undefined, () => Promise.resolve(), post);
    expect(postRes.messages().map((m) => m.method)).toEqual(['sampling/createMessage']);
    expect(get.messages()).toEqual([]);
    // Full: the next one waits; the POST is answered meanwhile, so it goes on the GET stream when that has room.
    while (post.send(progress(0, 32 * 1024)));
    requests.asked({}, 2, 'elicitation/create', undefined, () => Promise.resolve(), post);
    post.answer({ jsonrpc: '2.0', id: 9, result: {} });
    postRes.drain();
    expect(postRes.messages().filter((m) => m.method === 'elicitation/create')).toEqual([]);
    expect(get.messages().map((m) => m.method)).toEqual(['elicitation/create']);
  });
});
