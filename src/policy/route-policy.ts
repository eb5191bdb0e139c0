// A route's rules compiled once per configuration load: globs turned into
// matchers, client and subject lists into sets, and a one-line description of
// each rule for `explain` and the audit log.
import { ShownNames } from '../config/shown-names.js';
import type { AggregateConfig, RouteConfig, RuleConfig } from '../config/types.js';
import { compileCondition, type CompiledCondition } from './cel-condition.js';
import { compileGlob, type Glob } from './glob.js';
import type { Operation } from './json-rpc.js';

/** A rule's `match` (also a rate limit's), compiled: every glob given must match. */
export interface CompiledMatch {
  method?: Glob;
  tool?: Glob;
  uri?: Glob;
  prompt?: Glob;
  /** A rule's CEL condition, planned once. */
  when?: CompiledCondition;
  /** `match.upstream` on an aggregated route: the upstream the operation must be sent to. */
  upstream?: string;
}

export interface CompiledRule extends CompiledMatch {
  /** Position in the route's `rules` list (0-based). */
  index: number;
  /** `file:line` of the rule in the configuration, when known. */
  source?: string;
  /** The rule as written, on one line. */
  description: string;
  deny: boolean;
  requireScopes: readonly string[];
  allowClients?: ReadonlySet<string>;
  allowSubjects?: ReadonlySet<string>;
}

export interface RoutePolicy {
  /** The route's path, for messages. */
  route: string;
  /** The route's file, for rules that have no `source`. */
  file?: string;
  /** Scopes every request to the route needs. */
  requiredScopes: readonly string[];
  rules: readonly CompiledRule[];
  /** An aggregated route's shown names: which upstream a tool or prompt leads to (routed-upstream.ts). */
  names?: ShownNames;
}

export function compilePolicy(route: Pick<RouteConfig, 'path' | 'requiredScopes' | 'rules'> & { file?: string; aggregate?: AggregateConfig }): RoutePolicy {
  const names = shownNamesOf(route);
  return {
    route: route.path,
    file: route.file,
    requiredScopes: [...route.requiredScopes],
    rules: route.rules.map((rule, index) => compileRule(rule, index)),
    ...(names && { names }),
  };
}

/** The shown names of an aggregated route: which upstream a tool or prompt leads to, for `match.upstream`. */
export const shownNamesOf = (route: { aggregate?: AggregateConfig }): ShownNames | undefined => (route.aggregate ? new ShownNames(route.aggregate) : undefined);

export function compileMatch(match: RuleConfig['match']): CompiledMatch {
  return {
    upstream: match.upstream,
    method: match.method === undefined ? undefined : compileGlob(match.method),
    tool: match.tool === undefined ? undefined : compileGlob(match.tool),
    uri: match.uri === undefined ? undefined : compileGlob(match.uri),
    prompt: match.prompt === undefined ? undefined : compileGlob(match.prompt),
    when: match.when === undefined ? undefined : compileCondition(match.when),
  };
}

/** Whether `match`'s method and names apply to the operation (its `when`, if any, is the caller's to test: evaluate.ts). */
export function matchesOperation(match: CompiledMatch, operation: Operation): boolean {
  const { method, name } = operation;
  if (match.method && !match.method.test(method)) return false;
  // A name pattern applies only to the method that carries that kind of name.
  if (match.tool && (method !== 'tools/call' || name === undefined || !match.tool.test(name))) return false;
  if (match.uri && (method !== 'resources/read' || name === undefined || !match.uri.test(name))) return false;
  if (match.prompt && (method !== 'prompts/get' || name === undefined || !match.prompt.test(name))) return false;
  // An upstream applies to what is sent to it alone: tools and prompts by shown name, resources as the session routes them (routed-upstream.ts).
  if (match.upstream !== undefined && operation.upstream !== match.upstream) return false;
  return true;
}

function compileRule(rule: RuleConfig, index: number): CompiledRule {
  const { match } = rule;
  return {
    index,
    source: rule.source,
    description: describeRule(rule),
    ...compileMatch(match),
    deny: rule.deny === true,
    requireScopes: rule.requireScopes ?? [],
    allowClients: rule.allowClients && new Set(rule.allowClients),
    allowSubjects: rule.allowSubjects && new Set(rule.allowSubjects),
  };
}

/** `match { method: tools/call, tool: "delete_*" } → require_scopes [mcp:write]` */
export function describeRule(rule: RuleConfig): string {
  const outcomes: string[] = [];
  if (rule.deny) outcomes.push('deny');
  if (rule.allowClients) outcomes.push(`allow_clients [${rule.allowClients.join(', ')}]`);
  if (rule.allowSubjects) outcomes.push(`allow_subjects [${rule.allowSubjects.join(', ')}]`);
  if (rule.requireScopes) outcomes.push(`require_scopes [${rule.requireScopes.join(', ')}]`);
  if (outcomes.length === 0) outcomes.push('allow');
  return `${describeMatch(rule.match)} → ${outcomes.join(', ')}`;
}

/** `match { method: tools/call, tool: "delete_*" }` */
export function describeMatch(match: RuleConfig['match']): string {
  const fields = Object.entries(match)
    .filter(([, value]) => value !== undefined)
    .map(([key, value]) => `${key}: ${key === 'when' ? JSON.stringify(value) : quoteIfGlob(value as string)}`)
    .join(', ');
  return `match { ${fields} }`;
}

const quoteIfGlob = (value: string) => (/[*?]/.test(value) ? JSON.stringify(value) : value);
