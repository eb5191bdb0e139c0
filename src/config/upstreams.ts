// `upstreams:` resolved (DESIGN §8.2): each entry's upstream as a route's
// would be (the resolver's own code, handed in), and the names checked so that
// every shown name leads back to one upstream: `upstream` and `upstreams`
// never both, at least one entry, a pattern with {upstream} and {name} once,
// names a tool name can carry, no two upstreams whose shown names could meet,
// no rename onto another shown name.
import { patternParts, TOOL_NAME_CHARS } from './shown-names.js';
import { DEFAULT_NAMES_PATTERN } from './upstreams-schema.js';
import type { ConfigIssue } from './config-error.js';
import type { ConfigPath, Locate } from './yaml-file.js';
import type { AggregateConfig, AggregateUpstreamConfig, RouteConfig } from './types.js';
import type { RouteFile } from './schema.js';

type EntryFile = NonNullable<RouteFile['upstreams']>[string];
/** Resolves one entry as if it were a route's own upstream (`at` already points into the entry). */
export type ResolveEntry = (entry: EntryFile, at: Locate) => Promise<Omit<AggregateUpstreamConfig, 'name' | 'renames'>>;
type Report = (path: ConfigPath, message: string) => void;

/** The route's aggregate, or undefined for a route with one `upstream`; every problem goes to `issue`, located. */
export async function resolveUpstreams(f: RouteFile, at: Locate, issue: (found: ConfigIssue) => void, resolveEntry: ResolveEntry): Promise<AggregateConfig | undefined> {
  const note: Report = (path, message) => issue(at(path, message));
  checkUpstreamMatches(f, note);
  if (f.upstreams === undefined) {
    if (f.names !== undefined) note(['names'], 'names applies only to a route with upstreams');
    return undefined;
  }
  if (f.upstream !== undefined) note(['upstreams'], 'a route has either upstream or upstreams, not both');
  const entries = Object.entries(f.upstreams);
  if (entries.length === 0) note(['upstreams'], 'an aggregated route needs at least one upstream');
  const pattern = f.names ?? DEFAULT_NAMES_PATTERN;
  checkPattern(pattern, note);
  const upstreams: AggregateUpstreamConfig[] = [];
  for (const [name, entry] of entries) {
    const here: Locate = (path, message, key) => at(['upstreams', name, ...path], message, key);
    if (!TOOL_NAME_CHARS.test(name)) note(['upstreams', name], `the upstream name ${JSON.stringify(name)} cannot be carried in a tool name (letters, digits, _ - . only)`);
    for (const shown of Object.values(entry.rename)) {
      if (!TOOL_NAME_CHARS.test(shown)) note(['upstreams', name, 'rename'], `${JSON.stringify(shown)} is not a tool name (letters, digits, _ - . only)`);
    }
    upstreams.push({ name, renames: entry.rename, ...(await resolveEntry(entry, here)) });
  }
  checkCollisions(pattern, upstreams, note);
  return { pattern, upstreams };
}

function checkPattern(pattern: string, note: Report): void {
  const count = (token: string) => pattern.split(token).length - 1;
  const literal = pattern.replaceAll('{upstream}', '').replaceAll('{name}', '');
  if (count('{upstream}') !== 1 || count('{name}') !== 1) note(['names'], `${JSON.stringify(pattern)} must hold {upstream} and {name} exactly once each`);
  else if (literal !== '' && !TOOL_NAME_CHARS.test(literal)) note(['names'], `${JSON.stringify(pattern)} cannot be carried in a tool name (letters, digits, _ - . only besides {upstream} and {name})`);
}

/**
 * Two upstreams collide when some name could be shown for both: one's text
 * before {name} begins the other's and one's text after it ends the other's
 * (`{upstream}_{name}` with upstreams `a` and `a_b`: `a_b_c`). A rename onto
 * a name the pattern gives, or onto another rename, collides too.
 */
function checkCollisions(pattern: string, upstreams: readonly AggregateUpstreamConfig[], note: Report): void {
  const parts = upstreams.map((u) => ({ name: u.name, ...patternParts(pattern, u.name) }));
  for (const [i, a] of parts.entries()) {
    for (const b of parts.slice(i + 1)) {
      const prefixes = a.before.startsWith(b.before) || b.before.startsWith(a.before);
      const suffixes = a.after.endsWith(b.after) || b.after.endsWith(a.after);
      if (prefixes && suffixes) note(['upstreams', b.name], `shown names of ${b.name} and ${a.name} can collide under ${JSON.stringify(pattern)} (e.g. ${a.before}x${a.after}): rename an upstream or change names`);
    }
  }
  const renamed = new Map<string, string>();
  for (const u of upstreams) {
    for (const [own, shown] of Object.entries(u.renames)) {
      const here = ['upstreams', u.name, 'rename', own];
      const other = renamed.get(shown);
      if (other !== undefined) note(here, `${shown} is already the shown name of ${other}`);
      renamed.set(shown, `${u.name}'s ${own}`);
      const patterned = parts.find((p) => shown.length > p.before.length + p.after.length && shown.startsWith(p.before) && shown.endsWith(p.after));
      if (patterned) note(here, `${shown} collides with the names ${JSON.stringify(pattern)} gives ${patterned.name}'s tools and prompts`);
    }
  }
}

/**
 * What reaches the upstreams, as routes of their own: each entry of an
 * aggregated route with the route's settings and its own upstream, under
 * `<path>#<name>` (sessions, metrics, messages; no route path holds `#`); any
 * other route is itself. What checks or reaches an upstream reads these.
 */
export function upstreamRoutes(route: RouteConfig): RouteConfig[] {
  if (!route.aggregate) return [route];
  return route.aggregate.upstreams.map(({ name, renames: _renames, ...entry }) => ({ ...route, ...entry, path: `${route.path}#${name}`, aggregate: undefined }));
}

/** `match: { upstream }` names one of the route's upstreams, and only an aggregated route has any. */
function checkUpstreamMatches(f: RouteFile, note: Report): void {
  const known = Object.keys(f.upstreams ?? {});
  const matches = [...f.rules.map((r, i) => ({ at: ['rules', i, 'match', 'upstream'], upstream: r.match.upstream })), ...f.rate_limits.map((l, i) => ({ at: ['rate_limits', i, 'match', 'upstream'], upstream: l.match?.upstream }))];
  for (const m of matches) {
    if (m.upstream === undefined || known.includes(m.upstream)) continue;
    note(m.at, f.upstreams === undefined ? 'match.upstream applies only to a route with upstreams' : `${m.upstream} is not one of this route's upstreams (${known.join(', ')})`);
  }
}
