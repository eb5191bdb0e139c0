// The policy step of a protected route, between reading the body and the
// credential swap: parse the JSON-RPC body once, hold the 2026-07-28 routing
// and parameter headers to it, decide, count it against the route's rate
// limits (429 over one; rate-limiter.ts), write the audit line, and hand the
// proxy the response transform for this request: the `tools/list` filter
// when the route filters, else a reader of `tools/list` answers that learns
// the tools' Mcp-Param headers (tool-param-registry.ts); on routes with task
// binding, a request naming another principal's MCP task is refused and the
// answers that create or list tasks are read too (task-binding.ts).
import type { IncomingHttpHeaders } from 'node:http';
import type { AuthContext } from '../auth/principal.js';
import type { RouteConfig } from '../config/types.js';
import { deniedByPolicy, GatewayError, insufficientScope, tooManyRequests } from '../errors/gateway-error.js';
import type { Audit } from '../observability/audit.js';
import type { GatewaySpan } from '../observability/tracing.js';
import type { ResponseTransform } from '../proxy/response-transform.js';
import { createDecisionAudit, type DecisionAudit } from './decision-audit.js';
import { spanDecision, spanRequest } from './decision-span.js';
import { evaluate, evaluateOperation, type Decision, type MessageDecision } from './evaluate.js';
import { requireIdentityEncoding, requireUtf8Body } from './body-charset.js';
import { parseJsonRpcBody, type ParsedRequest } from './json-rpc.js';
import { HeaderMismatchError, checkMcpHeaders, refuseMcpHeadersWithoutBody } from './mcp-headers.js';
import { checkParamHeaders } from './param-headers.js';
import { createRateLimiter, type RateLimiter, type RateLimiterDeps } from './rate-limiter.js';
import { compilePolicy, type RoutePolicy } from './route-policy.js';
import { chainTransforms } from './chained-transform.js';
import type { TaskBinding } from './task-binding.js';
import { TaskNotFoundError, type TaskRequests } from './task-requests.js';
import { toolsListFilter } from './tools-list-filter.js';
import { toolsListLearner } from './tools-list-learner.js';
import { ToolParamRegistry } from './tool-param-registry.js';

/** Upper bound of a tools/list answer (JSON body, or one event) held in memory to filter or learn from it. */
const MAX_FILTERED_BYTES = 16 * 1024 * 1024;

const DENIED_BY_POLICY = 'denied by policy: no scope allows this operation';

export interface PolicyRequest {
  method?: string;
  headers: IncomingHttpHeaders;
  /** Node's `[name, value, …]` list, where repeated headers are still apart. */
  rawHeaders?: readonly string[];
}

export interface PolicyOutcome {
  /** Set when the answer must be read: filtered (tools/list), or learnt from. */
  transform?: ResponseTransform;
}

export interface PolicyStep {
  readonly policy: RoutePolicy;
  /**
   * Throws a GatewayError (400 not JSON-RPC, 403 refused, 429 over a rate
   * limit) or a HeaderMismatchError (400, -32020); nothing is forwarded then.
   * A TaskNotFoundError (403) too. Synchronous unless the route has rate
   * limits or the request concerns tasks (they ask the store). `span`:
   * the request's, told the MCP operation and the decision.
   */
  check(req: PolicyRequest, body: Buffer, auth: AuthContext, span?: GatewaySpan): PolicyOutcome | Promise<PolicyOutcome>;
}

export interface PolicyStepDeps {
  audit: Audit;
  /** The route's binding of MCP tasks to principals; without it tasks are not bound (tools that only decide, such as explain). */
  tasks?: TaskBinding;
  /** The store and counters of the route's `rate_limits`; without it, they are not enforced (tools that only decide, such as explain). */
  rateLimits?: RateLimiterDeps;
}

const NOTHING_TO_DO: PolicyOutcome = Object.freeze({});
const NO_OPERATIONS: readonly undefined[] = [];

export function createPolicyStep(route: RouteConfig, deps: PolicyStepDeps): PolicyStep {
  const policy = compilePolicy(route);
  const { audit } = deps;
  const decisionAudit = createDecisionAudit(audit, route);
  const limiter = deps.rateLimits && route.rateLimits.length > 0 ? createRateLimiter(route, deps.rateLimits) : undefined;
  const limited = limiter && applyRateLimits(limiter, decisionAudit);
  // No rules, no filtering, no audit line and no rate limit: every well-formed request that
  // passed authentication (the route's scopes) is allowed, so nothing is left
  // to decide once the body has been read and held to the routing headers.
  const onlyValidate = policy.rules.length === 0 && !route.filterToolsList && !audit.enabled && !limiter;

  const answers = answerReading(route, policy);
  const { tasks } = deps;

  return {
    policy,
    check(req, body, auth, span) {
      if (req.method !== 'POST') {
        try {
          refuseMcpHeadersWithoutBody(req.headers);
        } catch (err) {
          decisionAudit.rejected(auth, 'header_mismatch', 400);
          throw err;
        }
        const outcome = req.method === 'GET' ? answers.ofGet(auth) : NOTHING_TO_DO;
        const admitted = limited ? limited(auth, undefined, outcome, span) : outcome;
        return req.method === 'GET' && tasks ? tasksOnGet(tasks, auth, admitted) : admitted;
      }
      let request: ParsedRequest;
      let asks: TaskRequests | undefined;
      try {
        requireUtf8Body(req.headers['content-type']);
        requireIdentityEncoding(req.headers['content-encoding']);
        request = parseJsonRpcBody(body);
        checkMcpHeaders(req.headers, request, req.rawHeaders);
        checkParamHeaders(req.headers, request, answers.paramHeaders);
        asks = tasks?.asks(request);
      } catch (err) {
        decisionAudit.rejected(auth, err instanceof HeaderMismatchError ? 'header_mismatch' : 'malformed', 400);
        throw err;
      }
      if (span) spanRequest(span, request);
      if (onlyValidate) {
        if (span) spanDecision(span, undefined, route);
        return asks && tasks ? bindTasks(tasks, decisionAudit, asks, auth, answers.ofPost(auth, request)) : answers.ofPost(auth, request);
      }
      const decision = evaluate(policy, request, auth);
      if (!decision.allow || !limited) decisionAudit.decided(auth, decision.messages, !decision.allow);
      if (span) spanDecision(span, decision, route);
      if (!decision.allow) throw refusal(decision);
      const outcome = answers.ofPost(auth, request);
      const admitted = limited ? limited(auth, decision.messages, outcome, span) : outcome;
      return asks && tasks ? bindTasks(tasks, decisionAudit, asks, auth, admitted) : admitted;
    },
  };
}

/** Refuses (audited) a task the caller does not own; else adds the reader of the answer's tasks to the outcome. */
async function bindTasks(tasks: TaskBinding, decisionAudit: DecisionAudit, asks: TaskRequests, auth: AuthContext, admitted: PolicyOutcome | Promise<PolicyOutcome>): Promise<PolicyOutcome> {
  const outcome = await admitted;
  let transform;
  try {
    transform = await tasks.check(asks, auth);
  } catch (err) {
    if (err instanceof TaskNotFoundError) decisionAudit.rejected(auth, 'task_not_found', err.status);
    throw err;
  }
  return transform ? { transform: chainTransforms(outcome.transform, transform) } : outcome;
}

/** A GET stream's task lists are cut to the caller's own, after whatever else reads it. */
async function tasksOnGet(tasks: TaskBinding, auth: AuthContext, admitted: PolicyOutcome | Promise<PolicyOutcome>): Promise<PolicyOutcome> {
  const outcome = await admitted;
  return { transform: chainTransforms(outcome.transform, await tasks.forGet(auth)) };
}

/** After the policy allowed: the rate limits, then the audit lines (naming the limit when one refused). */
function applyRateLimits(limiter: RateLimiter, decisionAudit: DecisionAudit) {
  return async function limited(auth: AuthContext, messages: readonly MessageDecision[] | undefined, outcome: PolicyOutcome, span?: GatewaySpan): Promise<PolicyOutcome> {
    const refusal = await limiter.admit(auth, messages?.map((m) => m.operation) ?? NO_OPERATIONS);
    if (!refusal) {
      if (messages) decisionAudit.decided(auth, messages, false);
      return outcome;
    }
    span?.set('mag.rate_limit', refusal.limit.name);
    if (messages) decisionAudit.decided(auth, messages, { limit: refusal.limit.name });
    else decisionAudit.rejected(auth, 'rate_limited', 429, refusal.limit.name);
    const { requests, windowMs, label } = refusal.limit;
    throw tooManyRequests(`Rate limit of this route: at most ${requests} per ${windowMs / 1000} s (${label})`, refusal.retryAfterMs);
  };
}

/** 403 insufficient_scope with the scopes that would allow it; 403 denied by policy, with no challenge, when none would. */
function refusal(decision: Decision): GatewayError {
  if (decision.reason === 'scope') {
    return insufficientScope('The token does not grant the scopes this operation requires', decision.requiredScopes);
  }
  return deniedByPolicy(DENIED_BY_POLICY);
}
