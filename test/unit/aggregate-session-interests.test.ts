/**
 * What the client of an aggregated session asked the upstreams to tell it
 * (proxy/aggregate/session-interests.ts), against a model: an upstream's resources/updated is
 * the client's only for a URI it subscribed to through that upstream and has not unsubscribed
 * from there; at most MAX_SUBSCRIPTIONS URIs; a session opened afresh with an upstream is told
 * again exactly the level and that upstream's subscriptions.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_SUBSCRIPTIONS, SessionInterests } from '../../src/proxy/aggregate/session-interests.js';

const UPSTREAMS = ['a', 'b', 'c'];

describe('the resources and logging level a client asked for', () => {
  it('property: updates pass exactly for the URIs subscribed through that upstream; replay tells that upstream its own again', () => {
    const op = fc.record({
      method: fc.constantFrom('resources/subscribe', 'resources/unsubscribe', 'logging/setLevel'),
      uri: fc.constantFrom('file:///1', 'file:///2', 'test://3', 'x'),
      upstream: fc.constantFrom(...UPSTREAMS),
      level: fc.constantFrom('debug', 'info', 'error'),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), fc.constantFrom(...UPSTREAMS), fc.string(), (ops, from, stray) => {
        const interests = new SessionInterests();
        const model = new Map<string, string>();
        let level: string | undefined;
        for (const o of ops) {
          if (o.method === 'logging/setLevel') {
            interests.setLevel({ level: o.level });
            level = o.level;
            continue;
          }
          interests.accepted(o.method, o.uri, o.upstream);
          if (o.method === 'resources/subscribe') model.set(o.uri, o.upstream);
          else if (model.get(o.uri) === o.upstream) model.delete(o.uri);
        }
        for (const uri of ['file:///1', 'file:///2', 'test://3', 'x', stray]) expect(interests.wants(from, uri)).toBe(model.get(uri) === from);
        expect(interests.wants(from, 42)).toBe(false);
        const replay = interests.replay(from);
        expect(replay.filter((r) => r.method === 'logging/setLevel')).toEqual(level === undefined ? [] : [{ method: 'logging/setLevel', params: { level } }]);
        if (level !== undefined) expect(replay[0]!.method).toBe('logging/setLevel');
        const uris = replay.filter((r) => r.method === 'resources/subscribe').map((r) => r.params.uri);
        expect(uris.sort()).toEqual([...model].filter(([, u]) => u === from).map(([uri]) => uri).sort());
      }),
    );
  });

  it(`at most ${MAX_SUBSCRIPTIONS} URIs: the next new one is not admitted, one held already is, and an unsubscribe makes room`, () => {
    const interests = new SessionInterests();
    for (let i = 0; i < MAX_SUBSCRIPTIONS; i++) {
      expect(interests.admits(`file:///${i}`)).toBe(true);
      interests.accepted('resources/subscribe', `file:///${i}`, 'a');
    }
    expect(interests.admits('file:///new')).toBe(false);
    interests.accepted('resources/subscribe', 'file:///new', 'a');
    expect(interests.wants('a', 'file:///new')).toBe(false);
    expect(interests.admits('file:///0')).toBe(true);
    // A subscribe without a URI is the upstream's to refuse, not counted here.
    expect(interests.admits(undefined)).toBe(true);
    interests.accepted('resources/unsubscribe', 'file:///0', 'a');
    expect(interests.admits('file:///new')).toBe(true);
  });

  it('a level that is not a string is not kept (nothing to tell again)', () => {
    const interests = new SessionInterests();
    interests.setLevel({ level: 3 });
    interests.setLevel(undefined);
    expect(interests.replay('a')).toEqual([]);
  });
});
