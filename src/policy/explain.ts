// `mcp-auth-gateway explain`: what the gateway would decide for one
// operation, and which rule (file:line) decides it — the same evaluate() the
// running gateway uses, on the same loaded configuration. On an aggregated
// route it names the upstream the operation is sent to: a tool's or prompt's
// by its shown name; a resource's only a session knows, so `--upstream` says it.
import { ConfigError } from '../config/config-error.js';
import { loadConfig } from '../config/load.js';
import type { RouteConfig } from '../config/types.js';
import { evaluateOperation, type Decision } from './evaluate.js';
import { NAME_KIND, NAME_MEMBER, type Operation } from './json-rpc.js';
import { compilePolicy, type RoutePolicy } from './route-policy.js';
import { withUpstream } from './routed-upstream.js';

/** parseArgs options of the explain command. */
export const EXPLAIN_OPTIONS = {
  route: { type: 'string' },
  method: { type: 'string' },
  tool: { type: 'string' },
  uri: { type: 'string' },
  prompt: { type: 'string' },
  upstream: { type: 'string' },
  scopes: { type: 'string' },
  client: { type: 'string' },
  subject: { type: 'string' },
  claims: { type: 'string' },
  arguments: { type: 'string' },
  json: { type: 'boolean' },
} as const;

export interface ExplainArgs {
  route?: string;
  method?: string;
  tool?: string;
  uri?: string;
  prompt?: string;
  /** On an aggregated route: the upstream a session serves `uri` from (a tool's or prompt's follows from its name). */
  upstream?: string;
  /** Comma- or space-separated. */
  scopes?: string;
  client?: string;
  subject?: string;
  /** JSON objects: the token's claims and the call's arguments, for rules with `when`. */
  claims?: string;
  arguments?: string;
  json?: boolean;
}

export const EXPLAIN_USAGE =
  'mcp-auth-gateway explain --config <dir> --route <path> --method <m> [--tool t | --uri u | --prompt p] [--upstream name] [--scopes a,b] [--client id] [--subject sub] [--claims json] [--arguments json] [--json]';

export interface ExplainOutput {
  log(line: string): void;
  error(line: string): void;
}

class UsageError extends Error {}

/** Exit code: 0 decided (allow or deny), 1 invalid configuration, 2 usage. */
export async function explainCommand(source: string, args: ExplainArgs, out: ExplainOutput = console): Promise<number> {
  let operation: Operation;
  let claims: Record<string, unknown> | undefined;
  try {
    operation = operationFrom(args);
    claims = jsonObjectArg('claims', args.claims);
    if (!args.route) throw new UsageError('--route is required');
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    out.error(`${err.message}\nusage: ${EXPLAIN_USAGE}`);
    return 2;
  }

  let config;
  try {
    config = await loadConfig(source);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    out.error(err.message);
    return 1;
  }
  const route = config.routes.find((r) => r.path === args.route);
  if (!route) {
    out.error(`no route ${args.route}; the routes are: ${config.routes.map((r) => r.path).join(', ') || '(none)'}`);
    return 2;
  }

  const policy = compilePolicy(route);
  const routed = routedOperation(route, policy, operation, args.upstream);
  if (typeof routed === 'string') return (out.error(routed), 2);
  const scopes = (args.scopes ?? '').split(/[\s,]+/).filter(Boolean);
  const caller = { subject: args.subject ?? '', clientId: args.client ?? '', scopes, claims };
  const decision = evaluateOperation(policy, routed, caller);
  const missing = decision.requiredScopes.filter((s) => !scopes.includes(s));

  if (args.json) {
    out.log(
      JSON.stringify({
        decision: decision.allow ? 'allow' : 'deny',
        reason: decision.reason,
        route: route.path,
        method: operation.method,
        ...(operation.name !== undefined && { name: operation.name }),
        ...(route.aggregate && { upstream: routed.upstream ?? null }),
        rule: decision.rule ?? null,
        required_scopes: decision.requiredScopes,
        missing_scopes: decision.reason === 'scope' ? missing : [],
      }),
    );
    return 0;
  }
  for (const line of describe(decision, operation, route.path, route.file, missing)) out.log(line);
  if (route.aggregate) out.log(upstreamLine(policy, routed));
  return 0;
}

/** The operation with the upstream it is sent to on an aggregated route (from its shown name, else as `--upstream` gives it), or why `--upstream` does not fit. */
function routedOperation(route: RouteConfig, policy: RoutePolicy, operation: Operation, upstream: string | undefined): Operation | string {
  if (!route.aggregate) return upstream === undefined ? operation : `--upstream applies only to a route with upstreams; ${route.path} has one upstream`;
  const known = route.aggregate.upstreams.map((u) => u.name);
  if (upstream !== undefined && !known.includes(upstream)) return `${upstream} is not one of ${route.path}'s upstreams (${known.join(', ')})`;
  const named = withUpstream(policy, operation).upstream;
  if (named !== undefined && upstream !== undefined && named !== upstream) return `${operation.name} is ${named}'s, not ${upstream}'s`;
  return upstream === undefined ? withUpstream(policy, operation) : { ...operation, upstream };
}

/** `upstream  github (its own name: create_issue)`, or why none is named. */
function upstreamLine(policy: RoutePolicy, routed: Operation): string {
  if (routed.upstream === undefined) {
    const why = routed.method === 'resources/read' ? 'a session serves a URI from the upstream that lists it or whose template matches it: --upstream names it' : 'none: the operation is not sent to one upstream, or its name leads to none';
    return `upstream  ${why}`;
  }
  const own = routed.name === undefined ? undefined : policy.names?.owner(routed.name)?.name;
  return `upstream  ${routed.upstream}${own !== undefined && routed.method !== 'resources/read' ? ` (its own name: ${own})` : ''}`;
}

function operationFrom(args: ExplainArgs): Operation {
  const named = (['tool', 'uri', 'prompt'] as const).filter((kind) => args[kind] !== undefined);
  if (named.length > 1) throw new UsageError('give at most one of --tool, --uri, --prompt');
  const kind = named[0];
  // --tool alone means tools/call, --uri resources/read, --prompt prompts/get.
  const method = args.method ?? Object.keys(NAME_KIND).find((m) => NAME_KIND[m] === kind);
  if (!method) throw new UsageError('--method is required');
  const expected = NAME_KIND[method];
  if (kind !== expected) {
    throw new UsageError(expected ? `${method} needs --${expected} (its params.${NAME_MEMBER[method]})` : `${method} carries no name: --${kind} does not apply`);
  }
  const callArguments = jsonObjectArg('arguments', args.arguments);
  return kind ? { method, name: args[kind], ...(callArguments && { arguments: callArguments }) } : { method };
}

/** `--claims` / `--arguments`: a JSON object, or undefined when not given. */
function jsonObjectArg(option: string, text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    value = undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new UsageError(`--${option} must be a JSON object`);
  return value as Record<string, unknown>;
}

const REASONS: Record<Decision['reason'], string> = {
  route: 'no rule matches: the route’s required_scopes apply',
  rule: 'the rule allows it',
  response: 'a response to the server: always passed',
  scope: 'insufficient_scope: the token lacks',
  deny: 'denied by policy: no scope allows it',
  client: 'denied by policy: the client is not in allow_clients',
  subject: 'denied by policy: the subject is not in allow_subjects',
  condition: "denied by policy: the rule's when could not be evaluated on this call (a claim or argument it reads is missing, or of another type)",
};

function describe(decision: Decision, operation: Operation, routePath: string, routeFile: string, missing: string[]): string[] {
  const what = operation.name === undefined ? operation.method : `${operation.method} ${operation.name}`;
  const rule = decision.rule;
  const because = decision.reason === 'scope' ? `${REASONS.scope} ${missing.join(' ')}` : REASONS[decision.reason];
  return [
    `decision  ${decision.allow ? 'allow' : 'deny'}  (${what} on ${routePath})`,
    `rule      ${rule ? `${rule.source ?? routeFile} rules[${rule.index}]: ${rule.description}` : `none (${routeFile}: required_scopes)`}`,
    `why       ${because}`,
    `needs     ${['deny', 'client', 'subject', 'condition'].includes(decision.reason) ? '(no scope allows it)' : decision.requiredScopes.join(' ') || '(no scope)'}`,
  ];
}
