/**
 * What the policy judged is where a request goes (aggregate-methods.ts, DESIGN §8.2): the policy
 * places a request's URIs with `upstreamOf` before deciding a `match.upstream` rule, and the
 * session sends the request to that placement (`servedBy`), never placing it again — a
 * `list_changed` between the two cannot move a judged read to an upstream nobody judged. Without a
 * placement the session places it itself, as `upstreamOf` does (a property over random listings).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { AuthContext } from '../../src/auth/principal.js';
import { ShownNames } from '../../src/config/shown-names.js';
import { AggregateMethods, type SessionUpstream } from '../../src/proxy/aggregate/aggregate-methods.js';
import { UpstreamHealth } from '../../src/proxy/aggregate/upstream-health.js';
import type { UpstreamLink } from '../../src/proxy/aggregate/upstream-link.js';

const AUTH = { issuer: 'https://as.example', subject: 'alice', clientId: 'c', scopes: [], token: 't' } as unknown as AuthContext;

interface Listing {
  resources: string[];
  templates: string[];
}

/** An upstream that lists `listing` and records every other request it is sent. */
function fakeUpstream(name: string, listing: Listing, sent: { upstream: string; method: string; params: unknown }[]): SessionUpstream {
  const link = {
    request(method: string, params: Record<string, unknown> | undefined) {
      if (method === 'resources/list') return Promise.resolve({ answer: { result: { resources: listing.resources.map((uri) => ({ uri, name: uri })) } }, bytes: 10 });
      if (method === 'resources/templates/list') return Promise.resolve({ answer: { result: { resourceTemplates: listing.templates.map((uriTemplate) => ({ uriTemplate, name: uriTemplate })) } }, bytes: 10 });
      sent.push({ upstream: name, method, params });
      return Promise.resolve({ answer: { result: { from: name } }, bytes: 10 });
    },
    clientVersion: '2025-06-18',
  } as unknown as UpstreamLink;
  return { link, health: new UpstreamHealth('/r', name) };
}

function session(listings: Record<string, Listing>) {
  const sent: { upstream: string; method: string; params: unknown }[] = [];
  const names = Object.keys(listings);
  const upstreams = names.map((n) => fakeUpstream(n, listings[n]!, sent));
  const shown = new ShownNames({ pattern: '{upstream}__{name}', upstreams: names.map((name) => ({ name, renames: {} })) } as never);
  return { methods: new AggregateMethods('/r', upstreams, shown, new Set()), sent };
}

describe('a judged request goes where it was judged', () => {
  it('a read placed on b is sent to b though the session would serve the URI from a; one the policy could not place is -32002 with nothing sent', async () => {
    const { methods, sent } = session({ a: { resources: ['x://r'], templates: [] }, b: { resources: ['x://r'], templates: ['y://{id}'] } });
    expect(await methods.upstreamOf('x://r', { auth: AUTH })).toBe('a');
    expect(await methods.answer('resources/read', { uri: 'x://r' }, { auth: AUTH })).toEqual({ result: { from: 'a' } });
    expect(await methods.answer('resources/read', { uri: 'x://r' }, { auth: AUTH, servedBy: new Map([['x://r', 'b']]) })).toEqual({ result: { from: 'b' } });
    sent.length = 0;
    expect(await methods.answer('resources/read', { uri: 'x://r' }, { auth: AUTH, servedBy: new Map() })).toMatchObject({ error: { code: -32002 } });
    expect(await methods.answer('completion/complete', { ref: { type: 'ref/resource', uri: 'y://{id}' }, argument: { name: 'id', value: '' } }, { auth: AUTH, servedBy: new Map() })).toMatchObject({ error: { code: -32602 } });
    expect(sent).toEqual([]);
    expect(await methods.answer('completion/complete', { ref: { type: 'ref/resource', uri: 'y://{id}' }, argument: { name: 'id', value: '' } }, { auth: AUTH })).toEqual({ result: { from: 'b' } });
    expect(sent.map((s) => s.upstream)).toEqual(['b']);
  });

  it('property: without a placement, a read goes to the upstream upstreamOf names (listed first, then templates, configuration order)', async () => {
    const uri = fc.constantFrom('x://1', 'x://2', 'y://3', 'z://4');
    const listing = fc.record({ resources: fc.uniqueArray(uri, { maxLength: 3 }), templates: fc.subarray(['x://{id}', 'y://{id}', 'q://{id}']) });
    await fc.assert(
      fc.asyncProperty(fc.tuple(listing, listing, listing), uri, async (listings, asked) => {
        const { methods, sent } = session({ a: listings[0], b: listings[1], c: listings[2] });
        const placed = await methods.upstreamOf(asked, { auth: AUTH });
        const listedBy = ['a', 'b', 'c'].find((_, i) => listings[i]!.resources.includes(asked));
        const templatedBy = ['a', 'b', 'c'].find((_, i) => listings[i]!.templates.some((t) => asked.startsWith(t.slice(0, 4))));
        expect(placed).toBe(listedBy ?? templatedBy);
        const answer = await methods.answer('resources/read', { uri: asked }, { auth: AUTH });
        if (placed === undefined) expect(answer).toMatchObject({ error: { code: -32002 } });
        else expect(sent.filter((s) => s.method === 'resources/read').map((s) => s.upstream)).toEqual([placed]);
      }),
      { numRuns: 200 },
    );
  });
});
