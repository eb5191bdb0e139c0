/**
 * One aggregated session's requests of the upstreams to the client (server-requests.ts): held
 * until the client's stream is open, bounded per upstream of the session in count and in bytes held (beyond, refused: the caller answers the upstream),
 * an upstream's cancellation told to the client under the gateway's id, and an answer claimed once.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors/gateway-error.js';
import { MAX_HELD_BYTES, MAX_PENDING, ServerRequests, type ClientAnswer } from '../../src/proxy/aggregate/server-requests.js';

interface Written {
  id?: string;
  method: string;
  params?: Record<string, unknown>;
}

function harness() {
  let open = false;
  const written: Written[] = [];
  const requests = new ServerRequests({ send: (m) => (open ? (written.push(m as Written), true) : false), open: true, connected: true });
  const answered: { id: string | number; answer: ClientAnswer }[] = [];
  const sink = (id: string | number, answer: ClientAnswer) => (answered.push({ id, answer }), Promise.resolve());
  return { requests, written, answered, sink, open: () => ((open = true), requests.flush()) };
}

describe('server requests of an aggregated session', () => {
  it('holds requests until the stream opens, then writes each once under a fresh id', () => {
    const h = harness();
    const source = {};
    h.requests.asked(source, 0, 'roots/list', undefined, h.sink);
    h.requests.asked(source, 1, 'sampling/createMessage', { maxTokens: 1 }, h.sink);
    expect(h.written).toEqual([]);
    h.open();
    h.requests.flush();
    expect(h.written.map((m) => m.method)).toEqual(['roots/list', 'sampling/createMessage']);
    expect(new Set(h.written.map((m) => m.id)).size).toBe(2);
    for (const m of h.written) expect(m.id).toMatch(/^mag-[A-Za-z0-9_-]{24}$/);
  });

  it(`refuses an upstream's request past ${MAX_PENDING} of its own pending, without writing to the client or answering it`, () => {
    const h = harness();
    h.open();
    const source = {};
    const taken = Array.from({ length: MAX_PENDING + 1 }, (_, i) => h.requests.asked(source, i, 'ping', undefined, h.sink));
    expect(taken.filter((t) => !t)).toHaveLength(1);
    expect(taken.at(-1)).toBe(false);
    expect(h.written).toHaveLength(MAX_PENDING);
    // The caller refuses it (bounded there): nothing is answered from here.
    expect(h.answered).toEqual([]);
  });

  it('one upstream holding its share unanswered leaves the other upstreams of the session able to ask', () => {
    const h = harness();
    h.open();
    const hog = {};
    for (let i = 0; i < MAX_PENDING; i++) expect(h.requests.asked(hog, i, 'sampling/createMessage', undefined, h.sink)).toBe(true);
    expect(h.requests.asked(hog, 'more', 'sampling/createMessage', undefined, h.sink)).toBe(false);
    expect(h.requests.asked({}, 0, 'elicitation/create', undefined, h.sink)).toBe(true);
    expect(h.written.at(-1)?.method).toBe('elicitation/create');
  });

  it("an upstream's cancellation reaches the client under the gateway's id, and the id is answered no more", async () => {
    const h = harness();
    h.open();
    const a = {};
    const b = {};
    h.requests.asked(a, 7, 'elicitation/create', undefined, h.sink);
    h.requests.asked(b, 7, 'elicitation/create', undefined, h.sink);
    const [fromA, fromB] = h.written.map((m) => m.id!);
    h.requests.cancelled(a, 7, 'gave up');
    expect(h.written.at(-1)).toEqual({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: fromA, reason: 'gave up' } });
    await expect(h.requests.answered([{ id: fromA, result: { action: 'cancel' } }])).rejects.toBeInstanceOf(GatewayError);
    await h.requests.answered([{ id: fromB, result: { action: 'decline' } }]);
    expect(h.answered).toEqual([{ id: 7, answer: { result: { action: 'decline' } } }]);
  });

  it('a request not yet written to the client cannot be answered (its id was never sent)', async () => {
    const h = harness();
    h.requests.asked({}, 1, 'roots/list', undefined, h.sink);
    // The id exists only inside the gateway: a client guessing its shape gets nothing.
    await expect(h.requests.answered([{ id: 'mag-AAAAAAAAAAAAAAAAAAAAAAAA', result: {} }])).rejects.toMatchObject({ status: 400 });
    expect(h.answered).toEqual([]);
  });

  it('passes on only the result, or an error with its code, message and data', async () => {
    const h = harness();
    h.open();
    h.requests.asked({}, 'x', 'sampling/createMessage', undefined, h.sink);
    h.requests.asked({}, 'y', 'sampling/createMessage', undefined, h.sink);
    const [x, y] = h.written.map((m) => m.id!);
    await h.requests.answered([{ id: x, error: { code: -1, message: 'no', data: 1, extra: 'dropped' } } as never, { id: y, result: { ok: true } }]);
    expect(h.answered).toEqual([
      { id: 'x', answer: { error: { code: -1, message: 'no', data: 1 } } },
      { id: 'y', answer: { result: { ok: true } } },
    ]);
  });

  // Review of issue 26: 32 held requests just under max_body_bytes each were 128 MiB per upstream and session.
  it('holds at most MAX_HELD_BYTES of one upstream\'s requests for a client with no stream open, whatever their sizes (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 600_000 }), { minLength: 1, maxLength: 40 }), (sizes) => {
        const h = harness();
        const hog = {};
        let held = 0;
        let accepted = 0;
        for (const [i, size] of sizes.entries()) {
          const params = { data: 'x'.repeat(size) };
          const bytes = JSON.stringify({ jsonrpc: '2.0', id: `mag-${'A'.repeat(24)}`, method: 'sampling/createMessage', params }).length;
          const fits = held + bytes <= MAX_HELD_BYTES && accepted < MAX_PENDING;
          const taken = h.requests.asked(hog, i, 'sampling/createMessage', params, h.sink);
          expect(taken).toBe(fits);
          if (taken) {
            held += bytes;
            accepted++;
          }
        }
        // Another upstream of the session still asks; once the stream opens, every held request is written.
        expect(h.requests.asked({}, 'other', 'roots/list', undefined, h.sink)).toBe(true);
        h.open();
        expect(h.written).toHaveLength(accepted + 1);
        // Written, the bytes are no longer held: the upstream may ask again (within its count).
        if (accepted < MAX_PENDING) expect(h.requests.asked(hog, 'after', 'sampling/createMessage', { data: 'x'.repeat(600_000) }, h.sink)).toBe(true);
      }),
      { numRuns: 60 },
    );
  });
});
