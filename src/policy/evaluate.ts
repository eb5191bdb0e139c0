// The policy decision, pure: which rule applies to each JSON-RPC message of a
// request and whether the caller may do it. First matching rule wins; no
// match means the route's required scopes only. A batch is allowed only when
// every message in it is, and a subscription only when the caller may read
// every resource it watches. On an aggregated route each operation knows the
// upstream it is sent to (routed-upstream.ts).
import { operationOf, subscribedUris, type JsonRpcMessage, type Operation } from './json-rpc.js';
import { matchesOperation, type CompiledRule, type RoutePolicy } from './route-policy.js';
import { withUpstream, type ServedBy } from './routed-upstream.js';

export interface PolicyCaller {
  subject: string;
  clientId: string;
  scopes: readonly string[];
  /** The verified token's claims: what a rule's `when` reads as `claims`. */
  claims?: Readonly<Record<string, unknown>>;
}

/**
 * Why: allowed by the route's scopes alone (`route`), by a matching rule
 * (`rule`), or because the message is a response (`response`); refused for
 * lack of scope (`scope`), by a `deny` rule (`deny`), because the client or
 * subject is not listed (`client`, `subject`), or because a rule's `when`
 * could not be evaluated on this message (`condition`: refused, never skipped,
 * so a deny rule cannot be sidestepped by leaving out what it reads).
 */
export type DecisionReason = 'route' | 'rule' | 'response' | 'scope' | 'deny' | 'client' | 'subject' | 'condition';

export interface RuleRef {
  index: number;
  /** `file:line` of the rule. */
  source?: string;
  description: string;
}

export interface MessageDecision {
  allow: boolean;
  reason: DecisionReason;
  /** Undefined for a response (nothing asked of the server). */
  operation?: Operation;
  rule?: RuleRef;
  /** Every scope this operation needs: the route's plus the matching rule's. */
  requiredScopes: string[];
}

export interface Decision extends MessageDecision {
  /** 403 when refused. */
  status?: 403;
  /** One decision per message, in order (a single message: one). */
  messages: MessageDecision[];
}

/**
 * Decides a whole request: `messages` is the body (one message, or a batch). `servedBy`: on an
 * aggregated route, the upstream the caller's session serves each resource URI from.
 */
export function evaluate(policy: RoutePolicy, request: { messages: readonly JsonRpcMessage[] }, caller: PolicyCaller, servedBy?: ServedBy): Decision {
  const messages = request.messages.map((message) => {
    const operation = operationOf(message);
    if (!operation) return responseDecision(policy);
    const decision = decide(policy, withUpstream(policy, operation, message, servedBy), caller);
    const uris = subscribedUris(message);
    return uris.length === 0 ? decision : withSubscriptions(policy, decision, uris, caller, servedBy);
  });
  return combine(policy, messages);
}

/**
 * A subscription (`subscriptions/listen`, `resources/subscribe`) judged with a
 * `resources/read` of each URI it watches: refused as the first refused read
 * is (a refusal no scope lifts first), asking for every scope they need, and
 * still named by its own operation.
 */
function withSubscriptions(policy: RoutePolicy, decision: MessageDecision, uris: readonly string[], caller: PolicyCaller, servedBy: ServedBy | undefined): MessageDecision {
  const reads = uris.map((uri) => decide(policy, withUpstream(policy, { method: 'resources/read', name: uri }, undefined, servedBy), caller));
  const combined = combine(policy, [decision, ...reads]);
  const { messages: _parts, status: _status, ...merged } = combined;
  return { ...merged, operation: decision.operation };
}

/** Decides one operation (`tools/list` filtering asks this for each tool; `explain` for its arguments). */
export function evaluateOperation(policy: RoutePolicy, operation: Operation, caller: PolicyCaller): Decision {
  const single = decide(policy, withUpstream(policy, operation), caller);
  return combine(policy, [single]);
}

/** The first rule that matches the operation (its `when` true), if any; `failed`: a `when` on the way could not be evaluated. */
function matchingRule(policy: RoutePolicy, operation: Operation, caller: PolicyCaller): { rule?: CompiledRule; failed?: true } {
  for (const rule of policy.rules) {
    if (!matchesOperation(rule, operation)) continue;
    if (!rule.when) return { rule };
    const result = rule.when.test({ operation, claims: caller.claims });
    if (result === 'match') return { rule };
    if (result === 'error') return { rule, failed: true };
  }
  return {};
}

// Per-rule results computed once: this runs on every request.
const ruleScopes = new WeakMap<CompiledRule, string[]>();
const ruleRefs = new WeakMap<CompiledRule, RuleRef>();

function requiredScopesOf(policy: RoutePolicy, rule: CompiledRule | undefined): string[] {
  if (!rule) return policy.requiredScopes as string[];
  let scopes = ruleScopes.get(rule);
  if (!scopes) ruleScopes.set(rule, (scopes = Object.freeze(union(policy.requiredScopes, rule.requireScopes ?? [])) as string[]));
  return scopes;
}

function refOf(rule: CompiledRule): RuleRef {
  let ref = ruleRefs.get(rule);
  if (!ref) {
    ref = { index: rule.index, ...(rule.source !== undefined && { source: rule.source }), description: rule.description };
    ruleRefs.set(rule, ref);
  }
  return ref;
}

function decide(policy: RoutePolicy, operation: Operation, caller: PolicyCaller): MessageDecision {
  const { rule, failed } = matchingRule(policy, operation, caller);
  const requiredScopes = requiredScopesOf(policy, rule);
  const base = { operation, requiredScopes, ...(rule && { rule: refOf(rule) }) };
  if (failed) return { ...base, allow: false, reason: 'condition' };
  if (rule?.deny) return { ...base, allow: false, reason: 'deny' };
  // No scope would help a client or subject that is not listed: checked first.
  if (rule?.allowClients && !rule.allowClients.has(caller.clientId)) return { ...base, allow: false, reason: 'client' };
  if (rule?.allowSubjects && !rule.allowSubjects.has(caller.subject)) return { ...base, allow: false, reason: 'subject' };
  if (!requiredScopes.every((scope) => caller.scopes.includes(scope))) return { ...base, allow: false, reason: 'scope' };
  return { ...base, allow: true, reason: rule ? 'rule' : 'route' };
}

function responseDecision(policy: RoutePolicy): MessageDecision {
  return { allow: true, reason: 'response', requiredScopes: [...policy.requiredScopes] };
}

/**
 * A batch is refused when any message is. A refusal no scope can lift
 * (deny, client, subject) wins over a missing scope; a missing scope asks for
 * every scope the batch needs, so one step-up covers all of it.
 */
function combine(policy: RoutePolicy, messages: MessageDecision[]): Decision {
  const only = messages.length === 1 ? messages[0]! : undefined;
  if (only?.allow) return { ...only, messages };
  const refused = messages.filter((m) => !m.allow);
  if (refused.length === 0) {
    const first = messages.find((m) => m.reason !== 'response') ?? messages[0] ?? responseDecision(policy);
    return { ...first, messages };
  }
  const final = refused.find((m) => m.reason !== 'scope');
  if (final) return { ...final, status: 403, messages };
  const requiredScopes = union(...messages.map((m) => m.requiredScopes));
  return { ...refused[0]!, requiredScopes, status: 403, messages };
}

function union(...lists: (readonly string[])[]): string[] {
  return [...new Set(lists.flat())];
}
