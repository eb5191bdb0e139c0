// Which upstream of an aggregated session serves a resource URI (DESIGN §8.2):
// the first in configuration order whose latest list (resources/list) holds
// it, else the first whose resource template (resources/templates/list, RFC
// 6570) matches it. Clashes are logged once per route. Each upstream's latest
// list replaces its previous one, and a session keeps at most MAX_LISTED_URIS
// of them: kept from every list, an upstream listing fresh URIs each time (a
// "recent items" server, or a hostile one) grew one session's map by a whole
// list per resources/list its client asked for, without bound. Templates are matched by
// uri-templates' strict de-substitution, which walks the URI with string
// searches: no pattern is compiled from what an upstream sends, so no template
// can make matching backtrack. It never backtracks either: a value that holds
// the literal text after its expression is split there, and such a URI may
// not be placed. Its cost is bounded here: templates per upstream, their
// length and expressions, the URI's length (measured: tens of microseconds a
// template at the bounds); an explode modifier (`{/path*}`) makes its work
// quadratic in the URI (milliseconds a template), so such a template routes
// nothing.
import uriTemplate from 'uri-templates';
import type { ProxyLogger } from '../forwarder.js';

/** Templates of one upstream that route reads; those beyond are listed to the client but route nothing (logged). */
export const MAX_ROUTING_TEMPLATES = 32;
/** A longer template, or one with more expressions, routes nothing (logged). */
export const MAX_TEMPLATE_LENGTH = 512;
export const MAX_TEMPLATE_EXPRESSIONS = 8;
/** URIs matched against templates: a longer one is placed only if an upstream listed it. */
export const MAX_MATCHED_URI_LENGTH = 2048;
/** URIs a session remembers from its upstreams' lists (~30 bytes each): beyond, a listed URI is still shown but routes no read (logged once). */
export const MAX_LISTED_URIS = 50_000;
/** Clashes and unusable templates logged per route (once each). */
const MAX_LOGGED = 1_000;

interface Template {
  text: string;
  matches(uri: string): boolean;
}

export class ResourceOwners {
  /** Upstream → the URIs of its latest resources/list (every page read), within MAX_LISTED_URIS over all upstreams. */
  private readonly listed = new Map<string, Set<string>>();
  /** Upstream → its usable templates, as its latest templates list gave them. */
  private readonly templates = new Map<string, Template[]>();

  constructor(
    private readonly route: string,
    /** The route's upstreams in configuration order. */
    private readonly order: readonly string[],
    /** Shared by the route's sessions: what was logged once is not logged again. */
    private readonly logged: Set<string>,
    private readonly logger?: ProxyLogger,
  ) {}

  /** An upstream's resources or templates changed: learnt again from the next lists. */
  clear(): void {
    this.listed.clear();
    this.templates.clear();
  }

  /** The URIs of `upstream`'s latest resources/list, replacing what it listed before; those beyond MAX_LISTED_URIS route nothing. */
  listedAt(upstream: string, uris: readonly string[]): void {
    this.listed.delete(upstream);
    let room = MAX_LISTED_URIS;
    for (const kept of this.listed.values()) room -= kept.size;
    const kept = new Set<string>();
    for (const uri of uris) {
      if (kept.size >= room) {
        this.logOnce(`listed ${upstream}`, { upstream, kept: kept.size }, 'a session\'s upstreams list more resource URIs than route reads: the rest are shown but route nothing');
        break;
      }
      kept.add(uri);
    }
    this.listed.set(upstream, kept);
  }

  /** Two upstreams list one URI (lists are read in configuration order): the first serves it, logged once per route. */
  clash(uri: string, servedBy: string, also: string): void {
    this.logOnce(`uri ${uri}`, { uri, served_by: servedBy, also }, 'two upstreams list one resource URI: the first in configuration order serves it');
  }

  /** The resource templates one upstream listed (every page), replacing what it listed before. */
  templatesOf(upstream: string, items: readonly unknown[]): void {
    const usable: Template[] = [];
    for (const item of items) {
      const text = isRecord(item) ? item.uriTemplate : undefined;
      if (typeof text !== 'string') continue;
      if (usable.length >= MAX_ROUTING_TEMPLATES) {
        this.logOnce(`many ${upstream}`, { upstream, kept: MAX_ROUTING_TEMPLATES }, 'an upstream lists more resource templates than route reads: the rest route nothing');
        break;
      }
      const template = compiled(text);
      if (template) usable.push(template);
      else this.logOnce(`unusable ${upstream} ${text.slice(0, 200)}`, { upstream, uriTemplate: text.slice(0, 200) }, 'a resource template that routes no read (not RFC 6570, an explode modifier, or over the bounds of length and expressions)');
    }
    this.templates.set(upstream, usable);
  }

  /** Whether the lists read so far hold templates of some upstream (else a URI they lack is worth a fresh list). */
  get knowsTemplates(): boolean {
    return this.templates.size > 0;
  }

  /**
   * The upstream that serves `uri`: the first that listed it; else the first that listed it as a
   * template (a completion's `ref/resource` names a template as listed); else the first, in
   * configuration order, whose template matches it.
   */
  owner(uri: string): string | undefined {
    return this.order.find((upstream) => this.listed.get(upstream)?.has(uri)) ?? this.order.find((upstream) => this.templates.get(upstream)?.some((t) => t.text === uri)) ?? this.matching(uri);
  }

  private matching(uri: string): string | undefined {
    if (uri.length > MAX_MATCHED_URI_LENGTH) return undefined;
    let first: { upstream: string; template: string } | undefined;
    for (const upstream of this.order) {
      const template = this.templates.get(upstream)?.find((t) => t.matches(uri));
      if (!template) continue;
      if (!first) first = { upstream, template: template.text };
      else {
        this.logOnce(`templates ${first.template} ${template.text}`, { uri, served_by: first.upstream, template: first.template, also: upstream, also_template: template.text }, 'resource templates of two upstreams match one URI: the first in configuration order serves it');
        break;
      }
    }
    return first?.upstream;
  }

  private logOnce(key: string, fields: object, message: string): void {
    if (this.logged.has(key) || this.logged.size >= MAX_LOGGED) return;
    this.logged.add(key);
    this.logger?.warn({ route: this.route, ...fields }, message);
  }
}

/** An expression with an explode modifier: `{/path*}`, `{?list*,x}`. */
const EXPLODED = /\{[^}]*\*/;

/** A template that routes reads, or undefined when it cannot (not RFC 6570 as the library reads it, over the bounds, exploded). */
function compiled(text: string): Template | undefined {
  if (text.length > MAX_TEMPLATE_LENGTH) return undefined;
  const expressions = text.split('{').length - 1;
  if (expressions > MAX_TEMPLATE_EXPRESSIONS || expressions !== text.split('}').length - 1 || EXPLODED.test(text)) return undefined;
  let parsed: ReturnType<typeof uriTemplate>;
  try {
    parsed = uriTemplate(text);
  } catch {
    return undefined;
  }
  if (parsed.varNames.some((name) => name === '')) return undefined;
  return {
    text,
    matches(uri) {
      try {
        return parsed.fromUri(uri, { strict: true }) !== undefined;
      } catch {
        return false; // a percent-encoding that decodes to no text: no value of a variable
      }
    },
  };
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
