// The policy step of a protected route, between reading the body and the
// credential swap: parse the JSON-RPC body once, hold the 2026-07-28 routing
// and parameter headers to it, decide, count it against the route's rate
// limits (429 over one; rate-limiter.ts), write the audit line, and hand the
// proxy the response transform for this request: the `tools/list` filter
// when the route filters, else a reader of the answers to its `tools/list`
// requests that learns the tools' Mcp-Param headers (tool-param-registry.ts);
// on routes with task binding, the reader of task and event ids too, and the
// body with a foreign task id substituted (task-binding.ts). On an aggregated
// route whose rules or rate limits name an upstream, the route first says
// where the caller's session serves each resource URI (routed-upstream.ts).
import type { IncomingHttpHeaders } from 'node:http';
import type { AuthContext } from '../auth/principal.js';
import type { RouteConfig } from '../config/types.js';
import { GatewayError, insufficientScope, tooManyRequests } from '../errors/gateway-error.js';
import type { Audit } from '../observability/audit.js';
import type { GatewaySpan } from '../observability/tracing.js';
import type { ResponseTransform } from '../proxy/response-transform.js';
import { createDecisionAudit, type DecisionAudit } from './decision-audit.js';
import { spanDecision, spanRequest } from './decision-span.js';
import { evaluate, evaluateOperation, type Decision, type MessageDecision } from './evaluate.js';
import { requireIdentityEncoding, requireUtf8Body } from './body-charset.js';
import { parseJsonRpcBody, type ParsedRequest } from './json-rpc.js';
import { policyDenial } from './policy-denial.js';
import { HeaderMismatchError, checkMcpHeaders, refuseMcpHeadersWithoutBody } from './mcp-headers.js';
import { checkParamHeaders } from './param-headers.js';
import { checkProtocolVersion } from './protocol-version.js';
import { createRateLimiter, type RateLimiter, type RateLimiterDeps } from './rate-limiter.js';
import { compilePolicy, type RoutePolicy } from './route-policy.js';
import { routingUris, type ResourceRouting, type ServedBy } from './routed-upstream.js';
import { requiresRequestHeaders } from './header-revision.js';
import { ToolsListAnswers } from './tools-list-answers.js';
import { chainTransforms } from './chained-transform.js';
import type { BoundRequest, TaskBinding } from './task-binding.js';
import { toolsListFilter } from './tools-list-filter.js';
import { toolsListLearner } from './tools-list-learner.js';
import { ToolParamRegistry } from './tool-param-registry.js';

/** Upper bound of a tools/list answer (JSON body, or one event) held in memory to filter or learn from it. */
const MAX_FILTERED_BYTES = 16 * 1024 * 1024;

export interface PolicyRequest {
  method?: string;
  headers: IncomingHttpHeaders;
  /** Node's `[name, value, …]` list, where repeated headers are still apart. */
  rawHeaders?: readonly string[];
}

export interface PolicyOutcome {
  /** Set when the answer must be read: filtered (tools/list), or learnt from. */
  transform?: ResponseTransform;
  /** The body to forward in place of the client's (task-binding.ts). */
  body?: Buffer;
  /** Headers to forward in place of the client's, with the body (task-binding.ts). */
  headers?: Record<string, string>;
  /** Where the resources of the request were judged to be served from: the aggregated route sends them there. */
  servedBy?: ServedBy;
}

export interface PolicyStep {
  readonly policy: RoutePolicy;
  /**
   * Throws a GatewayError (400 not JSON-RPC, 403 refused — a JSON-RPC body
   * when denied by policy, policy-denial.ts —, 429 over a rate
   * limit) or a HeaderMismatchError (400, -32020); nothing is forwarded then.
   * Synchronous unless the route has rate limits or binds tasks (they ask the store). `span`:
   * the request's, told the MCP operation and the decision.
   */
  check(req: PolicyRequest, body: Buffer, auth: AuthContext, span?: GatewaySpan): PolicyOutcome | Promise<PolicyOutcome>;
}

export interface PolicyStepDeps {
  audit: Audit;
  /** The route's binding of MCP tasks and event ids to principals; without it they are not bound (stdio and SSE routes, whose sessions are the gateway's; explain). */
  tasks?: TaskBinding;
  /** The store and counters of the route's `rate_limits`; without it, they are not enforced (tools that only decide, such as explain). */
  rateLimits?: RateLimiterDeps;
  /** An aggregated route's forwarder: where a session serves resource URIs, for `match.upstream`. */
  resourceRouting?: ResourceRouting;
}

const NOTHING_TO_DO: PolicyOutcome = Object.freeze({});
const NO_OPERATIONS: readonly undefined[] = [];

export function createPolicyStep(route: RouteConfig, deps: PolicyStepDeps): PolicyStep {
  const policy = compilePolicy(route);
  const { audit, tasks } = deps;
  const decisionAudit = createDecisionAudit(audit, route);
  const limiter = deps.rateLimits && route.rateLimits.length > 0 ? createRateLimiter(route, deps.rateLimits) : undefined;
  const limited = limiter && applyRateLimits(limiter, decisionAudit);
  // No rules, no filtering, no audit line and no rate limit: every well-formed request that
  // passed authentication (the route's scopes) is allowed, so nothing is left
  // to decide once the body has been read and held to the routing headers.
  const onlyValidate = policy.rules.length === 0 && !route.filterToolsList && !audit.enabled && !limiter;
  const answers = answerReading(route, policy);
  const routing = routingFor(route, deps);

  /** The decision, the audit line, the rate limits and the answer readers, once the resources' upstreams are known. */
  function decide(req: PolicyRequest, request: ParsedRequest, auth: AuthContext, span: GatewaySpan | undefined, servedBy: ServedBy | undefined): PolicyOutcome | Promise<PolicyOutcome> {
    const decision = evaluate(policy, request, auth, servedBy);
    if (!decision.allow || !limited) decisionAudit.decided(auth, decision.messages, !decision.allow);
    if (span) spanDecision(span, decision, route);
    if (!decision.allow) throw refusal(decision, request);
    const outcome = servedBy ? { ...answers.ofPost(auth, request), servedBy } : answers.ofPost(auth, request);
    const admitted = limited ? limited(auth, decision.messages, outcome, span) : outcome;
    return tasks ? bindPost(tasks, request, req.headers, auth, admitted) : admitted;
  }

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
        return req.method === 'GET' && tasks ? bindStream(tasks, decisionAudit, req, auth, admitted) : admitted;
      }
      let request: ParsedRequest;
      try {
        requireUtf8Body(req.headers['content-type']);
        requireIdentityEncoding(req.headers['content-encoding']);
        request = parseJsonRpcBody(body);
        checkMcpHeaders(req.headers, request, req.rawHeaders);
        checkProtocolVersion(req.headers, request, req.rawHeaders);
        checkParamHeaders(req.headers, request, answers.paramHeaders);
      } catch (err) {
        decisionAudit.rejected(auth, err instanceof HeaderMismatchError ? 'header_mismatch' : 'malformed', 400);
        throw err;
      }
      if (span) spanRequest(span, request);
      if (onlyValidate) {
        if (span) spanDecision(span, undefined, route);
        return tasks ? bindPost(tasks, request, req.headers, auth, answers.ofPost(auth, request)) : answers.ofPost(auth, request);
      }
      const placing = routing && placeResources(routing, req.headers, request, auth, span);
      return placing ? placing.then((servedBy) => decide(req, request, auth, span, servedBy)) : decide(req, request, auth, span, undefined);
    },
  };
}

/** Only rules and rate limits that name an upstream need to know where a session serves a resource. */
function routingFor(route: RouteConfig, deps: PolicyStepDeps): ResourceRouting | undefined {
  const named = route.rules.some((r) => r.match.upstream !== undefined) || route.rateLimits.some((l) => l.match?.upstream !== undefined);
  return named ? deps.resourceRouting : undefined;
}

/**
 * Where the caller's session serves the request's resource URIs (a 2026-07-28 request without a
 * session: its principal's session-less session); undefined when it names none, or has no session to ask.
 */
function placeResources(routing: ResourceRouting, headers: IncomingHttpHeaders, request: ParsedRequest, auth: AuthContext, span: GatewaySpan | undefined): Promise<ServedBy> | undefined {
  const sessionId = headers['mcp-session-id'];
  const uris = routingUris(request.messages);
  if (uris.length === 0) return undefined;
  if (typeof sessionId === 'string') return routing(sessionId, auth, uris, span);
  return requiresRequestHeaders(headers) ? routing(undefined, auth, uris, span) : undefined;
}

/**
 * What reads a route's answers: the tools/list filter on a filtering route,
 * else a reader of tools/list answers only; both teach `paramHeaders` the
 * tools' Mcp-Param headers. A reload builds a new step, so it starts afresh.
 */
function answerReading(route: RouteConfig, policy: RoutePolicy) {
  const paramHeaders = new ToolParamRegistry();
  const learn = (tools: readonly unknown[]) => paramHeaders.learn(tools);
  const filterFor = (auth: AuthContext, asked?: ToolsListAnswers): PolicyOutcome => ({
    transform: toolsListFilter({ mayCall: (tool) => evaluateOperation(policy, { method: 'tools/call', name: tool }, auth).allow, maxBytes: MAX_FILTERED_BYTES, learn, asked }),
  });
  return {
    paramHeaders,
    /** A GET stream carries no request of the client's, but a resumed POST stream may deliver a tool list on it: filtered, never learnt from. */
    ofGet: (auth: AuthContext): PolicyOutcome => (route.filterToolsList ? filterFor(auth) : NOTHING_TO_DO),
    /** A filtering route reads every answer: a server (or a bridge routing answers by id) may deliver a tool list on any. */
    ofPost(auth: AuthContext, request: ParsedRequest): PolicyOutcome {
      const asked = ToolsListAnswers.of(request);
      if (route.filterToolsList) return filterFor(auth, asked);
      return asked ? { transform: toolsListLearner(learn, MAX_FILTERED_BYTES, asked) } : NOTHING_TO_DO;
    },
  };
}

/** The task binding's body and answer reader, after whatever else reads the answer; synchronous when both steps are. */
function bindPost(tasks: TaskBinding, request: ParsedRequest, headers: IncomingHttpHeaders, auth: AuthContext, admitted: PolicyOutcome | Promise<PolicyOutcome>): PolicyOutcome | Promise<PolicyOutcome> {
  if (admitted instanceof Promise) return admitted.then((outcome) => bindPost(tasks, request, headers, auth, outcome));
  const bound = tasks.forPost(request, headers, auth);
  return bound instanceof Promise ? bound.then((b) => withBinding(admitted, b)) : withBinding(admitted, bound);
}

function withBinding(outcome: PolicyOutcome, bound: BoundRequest): PolicyOutcome {
  const transform = bound.transform ? chainTransforms(outcome.transform, bound.transform) : outcome.transform;
  return { transform, body: bound.body, headers: bound.headers, ...(outcome.servedBy && { servedBy: outcome.servedBy }) };
}

/** A GET stream: its `Last-Event-ID` must be the caller's (400, audited, else); its events are read after whatever else reads them. */
async function bindStream(tasks: TaskBinding, decisionAudit: DecisionAudit, req: PolicyRequest, auth: AuthContext, admitted: PolicyOutcome | Promise<PolicyOutcome>): Promise<PolicyOutcome> {
  const outcome = await admitted;
  let transform;
  try {
    transform = await tasks.forStream(req.headers, auth);
  } catch (err) {
    if (err instanceof GatewayError && err.status === 400) decisionAudit.rejected(auth, 'foreign_event_id', 400);
    throw err;
  }
  return { transform: chainTransforms(outcome.transform, transform) };
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

/** 403 insufficient_scope with the scopes that would allow it; when none would, 403 with a JSON-RPC error per denied message and no challenge. */
function refusal(decision: Decision, request: ParsedRequest): GatewayError {
  if (decision.reason === 'scope') {
    return insufficientScope('The token does not grant the scopes this operation requires', decision.requiredScopes);
  }
  return policyDenial(request.messages, decision.messages, request.batch);
}
