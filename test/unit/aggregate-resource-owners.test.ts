/**
 * Who serves a resource URI in an aggregated session (resource-owners.ts, DESIGN §8.2): the first
 * upstream that listed it, else the first in configuration order whose RFC 6570 template matches
 * it, clashes logged once; templates over the bounds route nothing (their cost:
 * test/security/k-aggregate-bounds.test.ts, [K63]). The property: for random
 * templates and values, the URI uri-templates expands them to is routed to the template's
 * upstream, whatever other upstreams (before and after it) list templates under other schemes.
 * Its class: values that do not hold the literal text after their expression, and literals that
 * do not begin with an operator's prefix (`/`, `.`, `;`, `?`, `&`, `#`): the library does not
 * backtrack, which keeps it linear, so such a URI may not be placed (the last cases show two).
 */
import fc from 'fast-check';
import uriTemplate from 'uri-templates';
import { describe, expect, it } from 'vitest';
import { MAX_LISTED_URIS, MAX_ROUTING_TEMPLATES, MAX_TEMPLATE_EXPRESSIONS, MAX_TEMPLATE_LENGTH, ResourceOwners } from '../../src/proxy/aggregate/resource-owners.js';

function owners(order = ['a', 'b', 'c']) {
  const warnings: { fields: Record<string, unknown>; message: string }[] = [];
  const logger = { warn: (fields: object, message: string) => warnings.push({ fields: fields as Record<string, unknown>, message }), error: () => undefined };
  return { owners: new ResourceOwners('/all/mcp', order, new Set(), logger), warnings };
}

const templates = (...uriTemplates: string[]) => uriTemplates.map((uriTemplate) => ({ uriTemplate, name: uriTemplate }));

describe('ResourceOwners', () => {
  it('a listed URI is served by the first upstream, in configuration order, that lists it; a clash is logged once', () => {
    const { owners: o, warnings } = owners();
    o.listedAt('b', ['memory://graph']);
    o.listedAt('a', ['memory://graph']);
    o.clash('memory://graph', 'a', 'b');
    o.clash('memory://graph', 'a', 'b');
    expect(o.owner('memory://graph')).toBe('a');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]!.fields).toMatchObject({ uri: 'memory://graph', served_by: 'a', also: 'b' });
  });

  it("an upstream's latest list replaces its previous one; the session keeps at most MAX_LISTED_URIS over all upstreams (logged once)", () => {
    const { owners: o, warnings } = owners();
    o.listedAt('a', ['x://1', 'x://2']);
    o.listedAt('a', ['x://2', 'x://3']);
    expect(o.owner('x://1')).toBeUndefined();
    expect(o.owner('x://3')).toBe('a');
    const many = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}${i}`);
    o.listedAt('b', many('b://', MAX_LISTED_URIS - 2)); // a holds 2
    o.listedAt('c', many('c://', 10));
    expect(o.owner(`b://${MAX_LISTED_URIS - 3}`)).toBe('b');
    expect(o.owner('x://3')).toBe('a');
    expect(o.owner('c://0')).toBeUndefined();
    o.listedAt('c', many('c://', 10));
    expect(warnings.map((w) => w.message)).toEqual(["a session's upstreams list more resource URIs than route reads: the rest are shown but route nothing"]);
    // b lists less: room for c again.
    o.listedAt('b', []);
    o.listedAt('c', many('c://', 10));
    expect(o.owner('c://9')).toBe('c');
  });

  it('a URI no upstream listed goes to the first upstream, in configuration order, whose template matches; the clash is logged once per pair of templates', () => {
    const { owners: o, warnings } = owners();
    o.templatesOf('c', templates('demo://resource/dynamic/text/{resourceId}'));
    o.templatesOf('b', templates('github://repos/{owner}/{repo}', 'demo://resource/dynamic/text/{resourceId}'));
    expect(o.owner('demo://resource/dynamic/text/7')).toBe('b');
    expect(o.owner('demo://resource/dynamic/text/8')).toBe('b');
    expect(o.owner('github://repos/acme/gateway')).toBe('b');
    expect(warnings.map((w) => w.message)).toEqual(['resource templates of two upstreams match one URI: the first in configuration order serves it']);
    expect(warnings[0]!.fields).toMatchObject({ served_by: 'b', also: 'c', template: 'demo://resource/dynamic/text/{resourceId}' });
    // Strict: `{resourceId}` never holds a `/` (expansion would have encoded it), nor another path.
    expect(o.owner('demo://resource/dynamic/text/7/8')).toBeUndefined();
    expect(o.owner('demo://resource/dynamic/blob/7')).toBeUndefined();
    expect(o.owner('demo://resource/dynamic/text/%FF')).toBeUndefined();
  });

  it('a listed URI wins over a template of an earlier upstream; a template as listed (a completion ref) leads to its upstream; clear() forgets both', () => {
    const { owners: o } = owners();
    o.templatesOf('a', templates('file:///{+path}'));
    o.listedAt('b', ['file:///srv/readme']);
    expect(o.owner('file:///srv/readme')).toBe('b');
    expect(o.owner('file:///srv/other')).toBe('a');
    expect(o.owner('file:///{+path}')).toBe('a');
    o.templatesOf('a', []);
    expect(o.owner('file:///srv/other')).toBeUndefined();
    o.clear();
    expect(o.owner('file:///srv/readme')).toBeUndefined();
  });

  it('templates over the bounds (length, expressions, count) or not RFC 6570 route nothing, each logged once', () => {
    const { owners: o, warnings } = owners();
    const long = `x://${'a'.repeat(MAX_TEMPLATE_LENGTH)}/{id}`;
    const many = `y://${Array.from({ length: MAX_TEMPLATE_EXPRESSIONS + 1 }, (_, i) => `{v${i}}`).join('/')}`;
    o.templatesOf('a', [...templates(long, many, 'z://{unclosed', 'z://{}', 'p://{/path*}', 'q://{id}'), { uriTemplate: 42 }, 'not an object']);
    o.templatesOf('a', templates(long));
    expect(o.owner('p:///a/b')).toBeUndefined();
    o.templatesOf('a', templates('p://{/path*}', 'q://{id}'));
    expect(o.owner('q://1')).toBe('a');
    expect(o.owner(`x://${'a'.repeat(MAX_TEMPLATE_LENGTH)}/1`)).toBeUndefined();
    expect(o.owner(`y://${Array.from({ length: MAX_TEMPLATE_EXPRESSIONS + 1 }, () => '1').join('/')}`)).toBeUndefined();
    o.templatesOf('a', templates(...Array.from({ length: MAX_ROUTING_TEMPLATES + 5 }, (_, i) => `t${i}://{id}`), 'q://{id}'));
    expect(o.owner(`t${MAX_ROUTING_TEMPLATES - 1}://1`)).toBe('a');
    expect(o.owner(`t${MAX_ROUTING_TEMPLATES}://1`)).toBeUndefined();
    expect(warnings.filter((w) => w.message.startsWith('a resource template that routes no read'))).toHaveLength(5);
    expect(warnings.filter((w) => w.message.startsWith('an upstream lists more resource templates'))).toHaveLength(1);
  });

});

/**
 * A literal of a template (lower-case letters and `-`: never an operator's prefix), variable names
 * (`X0`…) and values that hold none of its characters (so never the text after their expression).
 */
const literal = fc.stringMatching(/^[a-z-]{1,6}$/);
const operator = fc.constantFrom('', '+', '#', '.', '/', ';', '?', '&');
const value = fc.stringMatching(/^[A-Z0-9 _~:/?#@!$&'()*+,;=%.]{1,8}$/);

/** A template: a scheme, then expressions each followed by a literal (RFC 6570 level 3 operators), with fresh variable names. */
const templateArbitrary = fc.array(fc.tuple(operator, literal), { minLength: 1, maxLength: 4 }).map((parts) => `s://r/${parts.map(([op, lit], i) => `{${op}X${i}}${lit}`).join('')}`);

describe('ResourceOwners, property: a URI the library expands from a template is routed to that template’s upstream', () => {
  it('whatever the values, and whatever templates of other schemes other upstreams list before and after it', () => {
    fc.assert(
      fc.property(templateArbitrary, fc.array(value, { minLength: 4, maxLength: 4 }), fc.integer({ min: 0, max: 2 }), (template, values, at) => {
        const order = ['a', 'b', 'c'];
        const { owners: o } = owners(order);
        for (const [i, upstream] of order.entries()) o.templatesOf(upstream, templates(i === at ? template : template.replace('s://', `other${i}://`)));
        const uri = uriTemplate(template).fill(Object.fromEntries(values.map((v, i) => [`X${i}`, v])));
        expect(o.owner(uri), `${template} → ${uri}`).toBe(order[at]);
        expect(o.owner(uri.replace('s://', 'unlisted://'))).toBeUndefined();
      }),
      { numRuns: 500 },
    );
  });

  it('outside that class: a value holding the literal after its expression, or a literal that begins with the expression’s prefix, may leave its URI unplaced (the library does not backtrack)', () => {
    const { owners: o } = owners(['a']);
    o.templatesOf('a', templates('s://r/{v0}~{;v1}.'));
    const uri = uriTemplate('s://r/{v0}~{;v1}.').fill({ v0: '~&', v1: '=' });
    expect(uri).toBe('s://r/~%26~;v1=%3D.');
    expect(o.owner(uri)).toBeUndefined();
    expect(o.owner(uriTemplate('s://r/{v0}~{;v1}.').fill({ v0: 'A&', v1: '=' }))).toBe('a');
    // A literal that begins as the expression before it does (`/` after `{/x}`): the search finds the expression's own prefix.
    o.templatesOf('a', templates('s://r/{/x}/{y}/'));
    expect(o.owner(uriTemplate('s://r/{/x}/{y}/').fill({ x: '_', y: 'A' }))).toBeUndefined();
  });
});
