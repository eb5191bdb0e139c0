/**
 * The filter of a 2026-07-28 `subscriptions/listen` on an aggregated route
 * (src/proxy/aggregate/subscription-filter.ts), over the class of every filter a client may send
 * and every notification an upstream may send: a notification reaches the client exactly when the
 * filter asked for it (a list change flagged true; an update of a URI watched at that upstream),
 * rebuilt with nothing but its method and URI; the acknowledgement names only what was asked;
 * the watched URIs are strings, each once, at most MAX_WATCHED_URIS.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { acknowledged, LIST_CHANGES, listenFilterOf, MAX_WATCHED_URIS, notificationFor, RESOURCE_UPDATED, upstreamFilter } from '../../src/proxy/aggregate/subscription-filter.js';

const KINDS = Object.keys(LIST_CHANGES) as (keyof typeof LIST_CHANGES)[];
const uri = fc.constantFrom('file:///a', 'file:///b', 'test://c', 'file:///d');
const flag = fc.oneof(fc.constant(true), fc.constant(false), fc.constant(undefined), fc.constant('true'), fc.constant(1));
const notifications = fc.record(
  {
    toolsListChanged: flag,
    promptsListChanged: flag,
    resourcesListChanged: flag,
    resourceSubscriptions: fc.oneof(fc.array(fc.oneof(uri, fc.integer(), fc.constant(null))), fc.constant('file:///a')),
  },
  { requiredKeys: [] },
);
const method = fc.oneof(fc.constantFrom(...Object.values(LIST_CHANGES), RESOURCE_UPDATED, 'notifications/message', 'notifications/progress'), fc.string());
const params = fc.oneof(fc.constant(undefined), fc.record({ uri: fc.oneof(uri, fc.integer()), extra: fc.jsonValue(), _meta: fc.dictionary(fc.string(), fc.jsonValue()) }, { requiredKeys: [] }));

describe('a listen filter on an aggregated route', () => {
  it('passes a notification exactly when the filter asked for it, rebuilt with nothing else', () => {
    fc.assert(
      fc.property(notifications, method, params, fc.subarray(['file:///a', 'file:///b', 'test://c', 'file:///d']), (asked, m, p, watchedHere) => {
        const filter = listenFilterOf({ notifications: asked })!;
        const watched = new Set(watchedHere);
        const out = notificationFor(filter, m, p as Record<string, unknown> | undefined, watched);
        const kind = KINDS.find((k) => LIST_CHANGES[k] === m);
        const wanted = kind !== undefined ? asked[kind] === true : m === RESOURCE_UPDATED && typeof p?.uri === 'string' && watched.has(p.uri);
        expect(out !== undefined).toBe(wanted);
        if (out === undefined) return;
        expect(out.method).toBe(m);
        expect(out.params).toEqual(kind !== undefined ? {} : { uri: p!.uri });
      }),
      { numRuns: 2_000 },
    );
  });

  it('acknowledges and asks an upstream only for what was asked; watched URIs are strings, once each, bounded', () => {
    fc.assert(
      fc.property(notifications, fc.array(fc.webUrl(), { maxLength: MAX_WATCHED_URIS + 40 }), (asked, many) => {
        const filter = listenFilterOf({ notifications: { ...asked, resourceSubscriptions: [...many, ...many] } })!;
        expect(filter.uris.length).toBe(Math.min(new Set(many).size, MAX_WATCHED_URIS));
        expect(new Set(filter.uris).size).toBe(filter.uris.length);
        const ack = acknowledged(filter, filter.uris.slice(0, 1));
        for (const kind of KINDS) expect(ack[kind]).toBe(asked[kind] === true ? true : undefined);
        expect(ack.resourceSubscriptions).toEqual(filter.uris.length > 0 ? filter.uris.slice(0, 1) : undefined);
        expect(Object.keys(upstreamFilter(filter, [])).every((k) => asked[k as keyof typeof asked] === true)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a listen whose notifications are not an object (the request is then -32602)', () => {
    for (const p of [undefined, {}, { notifications: null }, { notifications: [] }, { notifications: 'all' }]) expect(listenFilterOf(p)).toBeUndefined();
    expect(listenFilterOf({ notifications: {} })).toEqual({ changes: new Set(), uris: [] });
  });
});
