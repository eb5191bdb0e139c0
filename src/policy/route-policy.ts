// A route's rules compiled once per configuration load: globs turned into
// matchers, client and subject lists into sets, and a one-line description of
// each rule for `explain` and the audit log.
import type { RouteConfig, RuleConfig } from '../config/types.js';
import { compileGlob, type Glob } from './glob.js';

export interface CompiledRule {
  /** Position in the route's `rules` list (0-based). */
  index: number;
  /** `file:line` of the rule in the configuration, when known. */
  source?: string;
  /** The rule as written, on one line. */
  description: string;
  method?: Glob;
  tool?: Glob;
  uri?: Glob;
  prompt?: Glob;
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
}

export function compilePolicy(route: Pick<RouteConfig, 'path' | 'requiredScopes' | 'rules'> & { file?: string }): RoutePolicy {
  return {
    route: route.path,
    file: route.file,
    requiredScopes: [...route.requiredScopes],
    rules: route.rules.map((rule, index) => compileRule(rule, index)),
  };
}

function compileRule(rule: RuleConfig, index: number): CompiledRule {
  const { match } = rule;
  return {
    index,
    source: rule.source,
    description: describeRule(rule),
    method: match.method === undefined ? undefined : compileGlob(match.method),
    tool: match.tool === undefined ? undefined : compileGlob(match.tool),
    uri: match.uri === undefined ? undefined : compileGlob(match.uri),
    prompt: match.prompt === undefined ? undefined : compileGlob(match.prompt),
    deny: rule.deny === true,
    requireScopes: rule.requireScopes ?? [],
    allowClients: rule.allowClients && new Set(rule.allowClients),
    allowSubjects: rule.allowSubjects && new Set(rule.allowSubjects),
  };
}

/** `match { method: tools/call, tool: "delete_*" } → require_scopes [mcp:write]` */
export function describeRule(rule: RuleConfig): string {
  const match = Object.entries(rule.match)
    .filter(([, value]) => value !== undefined)
    .map(([key, value]) => `${key}: ${quoteIfGlob(value as string)}`)
    .join(', ');
  const outcomes: string[] = [];
  if (rule.deny) outcomes.push('deny');
  if (rule.allowClients) outcomes.push(`allow_clients [${rule.allowClients.join(', ')}]`);
  if (rule.allowSubjects) outcomes.push(`allow_subjects [${rule.allowSubjects.join(', ')}]`);
  if (rule.requireScopes) outcomes.push(`require_scopes [${rule.requireScopes.join(', ')}]`);
  if (outcomes.length === 0) outcomes.push('allow');
  return `match { ${match} } → ${outcomes.join(', ')}`;
}

const quoteIfGlob = (value: string) => (/[*?]/.test(value) ? JSON.stringify(value) : value);
